"""The model proxy: the daemon stands between every Claude Code session and the model API
(`legion.proxy.server`), so that the model credential stays with the daemon and every
response's usage is recorded as it passes (`legion.proxy.metering`, `legion.proxy.ledger`).

What a session gets instead of the key is decided here, for the runtimes the proxy serves:
Claude Code is pointed at the proxy (`ANTHROPIC_BASE_URL`) and, when the daemon holds the
credential, given its capability as its token (`ANTHROPIC_AUTH_TOKEN`: sent as a bearer
token, and not a key the CLI asks the user to approve) with every real credential taken out of
its environment. Codex sessions are not proxied yet: they keep the key they are given.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from legion.plugins import CLAUDE_CODE

# The model credentials a Claude Code session may be given; with a proxy that holds the
# credential, none of them reaches the session.
CLAUDE_CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
# The runtimes whose sessions the proxy serves.
PROXIED = frozenset({CLAUDE_CODE})
# Where the daemon says its proxy listens, and whether it holds the credential. Read only while
# the daemon runs (its lock held); kept when it stops, so that the next start takes the port.
ACCESS_FILE = "model-proxy"


@dataclass(frozen=True)
class ProxyAccess:
    """How a session reaches the model through the project's daemon."""

    url: str
    holds_credential: bool


def write_access(state_dir: Path, access: ProxyAccess) -> None:
    from legion.statefiles import write_private

    mode = "credential" if access.holds_credential else "passthrough"
    write_private(state_dir / ACCESS_FILE, f"{access.url} {mode}\n")


def read_access(state_dir: Path) -> ProxyAccess | None:
    """What the project's daemon said of its proxy; None when it runs none."""
    try:
        url, mode = (state_dir / ACCESS_FILE).read_text().split()
    except (OSError, ValueError):
        return None
    return ProxyAccess(url, mode == "credential")


def session_variables(
    runtime: str, access: ProxyAccess, token: str | None, env: dict[str, str]
) -> dict[str, str]:
    """`env` (a session's) with the model reached through the proxy, for a runtime it serves
    (others: `env` as it is). `token`: the session's capability."""
    if runtime != CLAUDE_CODE:
        return env
    routed = dict(env)
    routed["ANTHROPIC_BASE_URL"] = access.url
    if access.holds_credential and token:
        for name in CLAUDE_CREDENTIALS:
            routed.pop(name, None)
        routed["ANTHROPIC_AUTH_TOKEN"] = token
    return routed
