"""Which Codex CLI Legion runs, and installing the version Legion is tested with.

The counterpart of `legion.runtime.claude.binary` for OpenAI's Codex CLI: the `codex_bin`
setting (when the caller has one), else Legion's own cached install of the pinned version
(`$XDG_CACHE_HOME/legion/codex`, which `legion doctor --install` and `scripts/test` fill), else
`codex` on `PATH`.

The npm package `@openai/codex` holds only a JS launcher (`bin/codex.js`, linked as
`node_modules/.bin/codex`); the native binary comes in the per-platform optional dependency
(`@openai/codex-linux-x64` is an alias of `@openai/codex@<version>-linux-x64`), from the npm
registry like any package, with no install script. The launcher finds that binary and
`execve`s it with `CODEX_MANAGED_BY_NPM=1`; `native_binary` finds it the same way, for callers
that would rather skip node (and its 0.1 s start).
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from legion.runtime.codex.settings import CodexSettings
from legion.runtime.npm_pin import Binary, NpmCli

PINNED_VERSION = "0.169.0"
NPM_PACKAGE = "@openai/codex"

# (sys.platform, machine) -> (npm alias of the platform package, Rust target triple), as in the
# launcher's PLATFORM_PACKAGE_BY_TARGET.
_TARGETS: dict[tuple[str, str], tuple[str, str]] = {
    ("linux", "x86_64"): ("@openai/codex-linux-x64", "x86_64-unknown-linux-musl"),
    ("linux", "amd64"): ("@openai/codex-linux-x64", "x86_64-unknown-linux-musl"),
    ("linux", "aarch64"): ("@openai/codex-linux-arm64", "aarch64-unknown-linux-musl"),
    ("linux", "arm64"): ("@openai/codex-linux-arm64", "aarch64-unknown-linux-musl"),
    ("darwin", "x86_64"): ("@openai/codex-darwin-x64", "x86_64-apple-darwin"),
    ("darwin", "arm64"): ("@openai/codex-darwin-arm64", "aarch64-apple-darwin"),
}


CLI = NpmCli(
    product="Codex",
    command="codex",
    package=NPM_PACKAGE,
    version=PINNED_VERSION,
    folder="codex",
    bin_of=lambda settings: settings.section(CodexSettings).bin,
)  # `codex --version`: `codex-cli 0.169.0`


def native_binary(launcher_prefix: Path) -> Path | None:
    """The platform binary under an npm prefix (`<prefix>/node_modules/...`), or None."""
    target = _TARGETS.get((sys.platform, platform.machine().lower()))
    if target is None:
        return None
    package, triple = target
    path = launcher_prefix / "node_modules" / package / "vendor" / triple / "bin" / "codex"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def install(env: Mapping[str, str], say: Callable[[str], None]) -> Path:
    """Install the pinned Codex into the cache, unless it is there already; the launcher's path."""
    prefix = CLI.cache_prefix(env)

    def missing_hint() -> str:
        if native_binary(prefix) is None:
            return " (the platform package is missing: was it installed with --omit=optional?)"
        return ""

    return CLI.install(env, say, missing_hint=missing_hint)


def configured_or_installed(env: Mapping[str, str], say: Callable[[str], None]) -> Binary:
    """`legion.runtime.npm_pin.configured_or_installed` for this CLI."""
    return CLI.configured_or_installed(env, lambda: install(env, say))
