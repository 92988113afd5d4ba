"""Which Gemini CLI Legion runs, and installing the version Legion is tested with.

The counterpart of the other runtimes' `binary` modules for Google's Gemini CLI: the
`gemini_bin` setting (when the caller has one), else Legion's own cached install of the pinned
version (`$XDG_CACHE_HOME/legion/gemini`, which `legion doctor --install` fills), else `gemini`
on `PATH`. The npm package is one node bundle (`bundle/gemini.js`, linked as
`node_modules/.bin/gemini`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from legion.runtime.gemini.settings import GeminiSettings
from legion.runtime.npm_pin import Binary, NpmCli

PINNED_VERSION = "0.61.0"
# Set for `gemini --version`: the CLI answers in the process started, rather than loading its
# bundle again in a node with a heap of half the machine's memory (1.5 s of CPU here).
NO_RELAUNCH_VARIABLE = "GEMINI_CLI_NO_RELAUNCH"
NPM_PACKAGE = "@google/gemini-cli"

CLI = NpmCli(
    product="Gemini CLI",
    command="gemini",
    package=NPM_PACKAGE,
    version=PINNED_VERSION,
    folder="gemini",
    bin_of=lambda settings: settings.section(GeminiSettings).bin,
    version_timeout=60.0,  # `gemini --version` loads the whole bundle: 4 s on 2 cores
    version_env={NO_RELAUNCH_VARIABLE: "true"},
)


def install(env: Mapping[str, str], say: Callable[[str], None]) -> Path:
    """Install the pinned Gemini CLI into the cache, unless it is there; the launcher's path."""
    return CLI.install(env, say)


def configured_or_installed(env: Mapping[str, str], say: Callable[[str], None]) -> Binary:
    """`legion.runtime.npm_pin.configured_or_installed` for this CLI."""
    return CLI.configured_or_installed(env, lambda: install(env, say))
