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
from typing import TYPE_CHECKING

from legion.runtime import npm_pin
from legion.runtime.claude.settings import ClaudeSettings
from legion.runtime.npm_pin import Binary, Pin, install_pinned, resolve_binary, setting_source

if TYPE_CHECKING:
    from legion.config.settings import Settings

PINNED_VERSION = "2.1.328"
NPM_PACKAGE = "@anthropic-ai/claude-code"


def cache_prefix(env: Mapping[str, str]) -> Path:
    """The npm prefix of Legion's own Claude Code install."""
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "legion" / "claude-code"


def cached_binary(env: Mapping[str, str]) -> Path:
    return cache_prefix(env) / "node_modules" / ".bin" / "claude"


def fix_hint(env: Mapping[str, str]) -> str:
    return (
        f"run `legion doctor --install` (installs Claude Code {PINNED_VERSION} into "
        f"{cache_prefix(env)} with npm), or set claude_bin (LEGION_CLAUDE_BIN) to your `claude`"
    )


ClaudeBinary = Binary


def resolve(
    configured: Path | None, env: Mapping[str, str], *, configured_source: str = "setting"
) -> Binary:
    """The Claude Code CLI to run; a ToolMissingError naming the cause and the fix if none."""
    return resolve_binary(
        configured,
        env,
        setting="claude_bin",
        command="claude",
        product="Claude Code",
        cached=cached_binary(env),
        fix=fix_hint(env),
        configured_source=configured_source,
    )


def resolve_configured(settings: Settings, env: Mapping[str, str]) -> ClaudeBinary:
    """`resolve` with the claude_bin setting and where it came from."""
    named = setting_source(settings.sources, "claude_bin")
    return resolve(settings.section(ClaudeSettings).bin, env, configured_source=named)


def version_of(binary: Path) -> str | None:
    """What `claude --version` says (it makes no network request), or None."""
    try:
        out = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = out.stdout.split()
    return words[0] if out.returncode == 0 and words else None


PIN = Pin(
    "Claude Code", NPM_PACKAGE, PINNED_VERSION, "set claude_bin (LEGION_CLAUDE_BIN) to a `claude`"
)


def install(env: Mapping[str, str], say: Callable[[str], None]) -> Path:
    """Install the pinned Claude Code into the cache, unless it is there already; its path."""
    prefix = cache_prefix(env)

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

    return install_pinned(PIN, prefix, cached_binary(env), version_of, env, say, repair=repair)


def configured_or_installed(env: Mapping[str, str], say: Callable[[str], None]) -> Binary:
    """`legion.runtime.npm_pin.configured_or_installed` for this CLI."""
    return npm_pin.configured_or_installed(
        env,
        lambda settings: settings.section(ClaudeSettings).bin,
        lambda: install(env, say),
        lambda settings: resolve_configured(settings, env),
    )
