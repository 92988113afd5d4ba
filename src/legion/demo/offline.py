"""The environment that keeps the real agent CLIs talking only to a local scripted model server:
used by `legion demo` (each runtime's `DemoPlugin.offline_home` is here) and by the end-to-end
tests. What each variable is for, and how it was verified, is in docs/claude-code-cli.md,
docs/codex-cli.md and docs/gemini-cli.md."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

# Any string works as long as the server ignores it; the CLI remembers approved keys by their
# last 20 characters (customApiKeyResponses.approved in .claude.json).
FAKE_API_KEY = "sk-ant-api03-legion-fake-test-key-not-a-secret-0123456789abcdef"

# Environment variables that the CLI reads and that must not leak in from the developer's
# shell or CI (they would redirect traffic, change auth or change behaviour).
_LEAKY_PREFIXES = (
    "ANTHROPIC_",
    "CLAUDE",
    "OTEL_",
    "AWS_",
    "GOOGLE_",
    "VERTEX_",
    "MCP_",
    "OPENAI_",
    "CODEX_",
    "GEMINI_",
)
_LEAKY_NAMES = frozenset(
    {
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
        "NODE_OPTIONS",
        "NODE_EXTRA_CA_CERTS",
        "TMUX",
        "TMUX_PANE",
        "DISABLE_AUTOUPDATER",
        "DISABLE_TELEMETRY",
        "IS_SANDBOX",
    }
)


def base_environment() -> dict[str, str]:
    """The caller's environment minus everything that could steer or leak the CLI."""
    return {
        k: v
        for k, v in os.environ.items()
        if k not in _LEAKY_NAMES and not k.startswith(_LEAKY_PREFIXES)
    }


def offline_variables(
    base_url: str,
    *,
    home: Path,
    config_dir: Path,
    api_key: str = FAKE_API_KEY,
    proxy_url: str | None = None,
) -> dict[str, str]:
    """The variables that point the Claude Code CLI at `base_url` and keep it off the network.

    `proxy_url` (normally the fake server itself, which refuses and records proxy requests)
    catches any HTTP(S) request the CLI would send to another host.
    """
    return network_variables(home, proxy_url) | claude_offline_home(config_dir, base_url, api_key)


def network_variables(home: Path, proxy_url: str | None) -> dict[str, str]:
    """What keeps any CLI off the network and its terminal plain; with `proxy_url`, every
    HTTP(S) request to another host goes there (to be refused and recorded)."""
    variables = {
        "HOME": str(home),
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "SHELL": shutil.which("bash") or "/bin/bash",
    }
    if proxy_url is not None:
        variables |= {
            "HTTPS_PROXY": proxy_url,
            "HTTP_PROXY": proxy_url,
            "https_proxy": proxy_url,
            "http_proxy": proxy_url,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
    if os.geteuid() == 0:
        # --dangerously-skip-permissions refuses to run as root unless the CLI is told it is
        # in a sandbox.
        variables["IS_SANDBOX"] = "1"
    return variables


def claude_offline_home(
    config_dir: Path, base_url: str, api_key: str = FAKE_API_KEY
) -> dict[str, str]:
    """The variables that make `config_dir` Claude Code's config folder and the scripted
    Messages server at `base_url` its only model (telemetry and the like off)."""
    return {
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": api_key,
        # telemetry, error reporting, feature flags, auto-update, release notes, ...
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        # the official plugin marketplace (downloads.claude.ai, then a git clone from github)
        "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
    }


def codex_offline_home(codex_home: Path, base_url: str) -> dict[str, str]:
    """Make `codex_home` a Codex home whose only model provider is the scripted Responses
    server at `base_url` (analytics, plugins and update checks off: see docs/codex-cli.md);
    the variables that point the Codex CLI at it. With `offline_variables`' proxy, any other
    request Codex tried would be refused and recorded."""
    from legion.demo.codex_config import API_KEY_ENV, codex_config_toml

    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(codex_config_toml(base_url), encoding="utf-8")
    return {"CODEX_HOME": str(codex_home), API_KEY_ENV: FAKE_API_KEY}


def gemini_offline_home(home: Path, base_url: str) -> dict[str, str]:
    """The variables that make `home` your Gemini home and the scripted Gemini-API server at
    `base_url` its only model (docs/gemini-cli.md). Each session's own home is Legion's
    (`settings.json` with the API key as the way in): nothing is written here."""
    home.mkdir(parents=True, exist_ok=True)
    return {
        "GEMINI_CLI_HOME": str(home),
        "GOOGLE_GEMINI_BASE_URL": base_url,
        "GEMINI_API_KEY": FAKE_API_KEY,
    }
