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
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from legion.runtime import npm_pin
from legion.runtime.codex.settings import CodexSettings
from legion.runtime.npm_pin import Binary, Pin, install_pinned, resolve_binary, setting_source

if TYPE_CHECKING:
    from legion.config.settings import Settings

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


def cache_prefix(env: Mapping[str, str]) -> Path:
    """The npm prefix of Legion's own Codex install (beside `legion/claude-code`)."""
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "legion" / "codex"


def cached_binary(env: Mapping[str, str]) -> Path:
    """The JS launcher npm links into the cache (what users run as `codex`)."""
    return cache_prefix(env) / "node_modules" / ".bin" / "codex"


def native_binary(launcher_prefix: Path) -> Path | None:
    """The platform binary under an npm prefix (`<prefix>/node_modules/...`), or None."""
    target = _TARGETS.get((sys.platform, platform.machine().lower()))
    if target is None:
        return None
    package, triple = target
    path = launcher_prefix / "node_modules" / package / "vendor" / triple / "bin" / "codex"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def fix_hint(env: Mapping[str, str]) -> str:
    return (
        f"run `legion doctor --install` (installs Codex {PINNED_VERSION} into "
        f"{cache_prefix(env)} with npm), or set codex_bin (LEGION_CODEX_BIN) to your `codex`"
    )


CodexBinary = Binary


def resolve(
    configured: Path | None, env: Mapping[str, str], *, configured_source: str = "setting"
) -> Binary:
    """The Codex CLI to run; a ToolMissingError naming the cause and the fix if none."""
    return resolve_binary(
        configured,
        env,
        setting="codex_bin",
        command="codex",
        product="Codex",
        cached=cached_binary(env),
        fix=fix_hint(env),
        configured_source=configured_source,
    )


def resolve_configured(settings: Settings | None, env: Mapping[str, str]) -> Binary:
    """`resolve` with the codex_bin setting and where it came from (None: no settings)."""
    if settings is None:
        return resolve(None, env)
    named = setting_source(settings.sources, "codex_bin")
    return resolve(settings.section(CodexSettings).bin, env, configured_source=named)


def version_of(binary: Path) -> str | None:
    """What `codex --version` says (`codex-cli 0.169.0`; no network request), or None."""
    try:
        out = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = out.stdout.split()
    return words[-1] if out.returncode == 0 and words else None


PIN = Pin("Codex", NPM_PACKAGE, PINNED_VERSION, "set codex_bin (LEGION_CODEX_BIN) to a `codex`")


def install(env: Mapping[str, str], say: Callable[[str], None]) -> Path:
    """Install the pinned Codex into the cache, unless it is there already; the launcher's path."""
    prefix = cache_prefix(env)

    def missing_hint() -> str:
        if native_binary(prefix) is None:
            return " (the platform package is missing: was it installed with --omit=optional?)"
        return ""

    return install_pinned(
        PIN, prefix, cached_binary(env), version_of, env, say, missing_hint=missing_hint
    )


def configured_or_installed(env: Mapping[str, str], say: Callable[[str], None]) -> Binary:
    """`legion.runtime.npm_pin.configured_or_installed` for this CLI."""
    return npm_pin.configured_or_installed(
        env,
        lambda settings: settings.section(CodexSettings).bin,
        lambda: install(env, say),
        lambda settings: resolve_configured(settings, env),
    )
