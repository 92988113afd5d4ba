"""Which Claude Code CLI Legion runs, and installing the version Legion is tested with.

One resolver serves the daemon, the workers, `legion start`, `legion dispatch`, `legion demo`
and `legion doctor`, so they can never disagree: the `claude_bin` setting (a flag,
`LEGION_CLAUDE_BIN`, or a config file), else Legion's own cached install of the pinned version
(`$XDG_CACHE_HOME/legion/claude-code`, which `legion demo`, `legion doctor --install` and
`scripts/test` fill), else `claude` on `PATH`. The cached install comes before `PATH` because it
is the version Legion's tests drive; a user who wants another says so with `claude_bin`.

The npm package carries the native binary in a per-platform optional dependency fetched from
the npm registry like any package; its postinstall only links that binary into place, and is
run by hand when npm skipped it (`--ignore-scripts`, a policy).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from legion.runtime.claude.settings import ClaudeSettings
from legion.runtime.npm_pin import Binary, NpmCli

PINNED_VERSION = "2.1.328"
NPM_PACKAGE = "@anthropic-ai/claude-code"

CLI = NpmCli(
    product="Claude Code",
    command="claude",
    package=NPM_PACKAGE,
    version=PINNED_VERSION,
    folder="claude-code",
    bin_of=lambda settings: settings.section(ClaudeSettings).bin,
    version_word=0,  # `2.1.328 (Claude Code)`
)


def install(env: Mapping[str, str], say: Callable[[str], None]) -> Path:
    """Install the pinned Claude Code into the cache, unless it is there already; its path."""
    prefix = CLI.cache_prefix(env)

    def repair(npm_env: Mapping[str, str]) -> None:
        # The postinstall that puts the native binary in place did not run: run it.
        node = shutil.which("node", path=env.get("PATH", os.defpath)) or "node"
        subprocess.run(
            [node, "install.cjs"],
            cwd=prefix / "node_modules" / NPM_PACKAGE,
            capture_output=True,
            check=False,
            env=dict(npm_env),
        )

    return CLI.install(env, say, repair=repair)


def configured_or_installed(env: Mapping[str, str], say: Callable[[str], None]) -> Binary:
    """`legion.runtime.npm_pin.configured_or_installed` for this CLI."""
    return CLI.configured_or_installed(env, lambda: install(env, say))
