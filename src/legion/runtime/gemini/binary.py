"""Which Gemini CLI Legion runs, and installing the version Legion is tested with.

The counterpart of the other runtimes' `binary` modules for Google's Gemini CLI: the
`gemini_bin` setting (when the caller has one), else Legion's own cached install of the pinned
version (`$XDG_CACHE_HOME/legion/gemini`, which `legion doctor --install` fills), else `gemini`
on `PATH`. The npm package is one node bundle (`bundle/gemini.js`, linked as
`node_modules/.bin/gemini`).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from legion.runtime import npm_pin
from legion.runtime.gemini.settings import GeminiSettings
from legion.runtime.npm_pin import Binary, Pin, install_pinned, resolve_binary, setting_source

if TYPE_CHECKING:
    from legion.config.settings import Settings

PINNED_VERSION = "0.61.0"
NPM_PACKAGE = "@google/gemini-cli"


def cache_prefix(env: Mapping[str, str]) -> Path:
    """The npm prefix of Legion's own Gemini install (beside the other CLIs')."""
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "legion" / "gemini"


def cached_binary(env: Mapping[str, str]) -> Path:
    """The launcher npm links into the cache (what users run as `gemini`)."""
    return cache_prefix(env) / "node_modules" / ".bin" / "gemini"


def fix_hint(env: Mapping[str, str]) -> str:
    return (
        f"run `legion doctor --install` (installs Gemini CLI {PINNED_VERSION} into "
        f"{cache_prefix(env)} with npm), or set gemini_bin (LEGION_GEMINI_BIN) to your `gemini`"
    )


def resolve(
    configured: Path | None, env: Mapping[str, str], *, configured_source: str = "setting"
) -> Binary:
    """The Gemini CLI to run; a ToolMissingError naming the cause and the fix if none."""
    return resolve_binary(
        configured,
        env,
        setting="gemini_bin",
        command="gemini",
        product="Gemini",
        cached=cached_binary(env),
        fix=fix_hint(env),
        configured_source=configured_source,
    )


def resolve_configured(settings: Settings | None, env: Mapping[str, str]) -> Binary:
    """`resolve` with the gemini_bin setting and where it came from (None: no settings)."""
    if settings is None:
        return resolve(None, env)
    named = setting_source(settings.sources, "gemini_bin")
    return resolve(settings.section(GeminiSettings).bin, env, configured_source=named)


def version_of(binary: Path) -> str | None:
    """What `gemini --version` says (`0.61.0`; no network request), or None."""
    try:
        out = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = out.stdout.split()
    return words[-1] if out.returncode == 0 and words else None


PIN = Pin("Gemini CLI", NPM_PACKAGE, PINNED_VERSION, "set gemini_bin (LEGION_GEMINI_BIN)")


def install(env: Mapping[str, str], say: Callable[[str], None]) -> Path:
    """Install the pinned Gemini CLI into the cache, unless it is there; the launcher's path."""
    return install_pinned(PIN, cache_prefix(env), cached_binary(env), version_of, env, say)


def configured_or_installed(env: Mapping[str, str], say: Callable[[str], None]) -> Binary:
    """`legion.runtime.npm_pin.configured_or_installed` for this CLI."""
    return npm_pin.configured_or_installed(
        env,
        lambda settings: settings.section(GeminiSettings).bin,
        lambda: install(env, say),
        lambda settings: resolve_configured(settings, env),
    )
