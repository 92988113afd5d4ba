"""The model proxy: the daemon stands between every session and the model API
(`legion.proxy.server`), so that the model credential stays with the daemon and every
response's usage is recorded as it passes (`legion.proxy.metering`, `legion.proxy.ledger`).

What a session gets instead of the key is decided here. Claude Code is pointed at the proxy
(`ANTHROPIC_BASE_URL`) and, when the daemon holds the credential, given its capability as its
token (`ANTHROPIC_AUTH_TOKEN`: sent as a bearer token, and not a key the CLI asks the user to
approve) with every real credential taken out of its environment. Codex is pointed at the
proxy's `/codex` path only when the daemon holds its provider's key (`OPENAI_API_KEY`, or the
provider's `env_key`): its provider then finds the capability where it looked for the key
(`legion.runtime.codex.provider`). A Codex logged in with `codex login` keeps its own login.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from legion.plugins import CLAUDE_CODE, CODEX
from legion.runtime.claude.paths import CREDENTIAL_VARIABLES

# The model credentials a Claude Code session may be given; with a proxy that holds the
# credential, none of them reaches the session.
CLAUDE_CREDENTIALS = CREDENTIAL_VARIABLES
# The runtimes whose sessions the proxy serves.
PROXIED = frozenset({CLAUDE_CODE, CODEX})
# The path under which the proxy serves Codex's provider (Claude Code's API is at its root).
CODEX_PATH = "/codex"
# Where the daemon says its proxy listens, and for which runtimes it holds the credential.
# Read only while the daemon runs (its lock held); kept when it stops, so that the next start
# takes the port.
ACCESS_FILE = "model-proxy"
# Its Unix socket's name (`legion.relay.socket_path` says where it goes).
PROXY_SOCKET_NAME = "model.sock"
# The egress proxy's (`legion.proxy.egress`), beside it: served only when `sandbox_egress`
# allows anything.
EGRESS_SOCKET_NAME = "egress.sock"


@dataclass(frozen=True)
class ProxyAccess:
    """How a session reaches the model through the project's daemon."""

    url: str
    # The runtimes whose credential the daemon holds (their sessions get a capability).
    credentials: frozenset[str] = field(default_factory=frozenset)
    # Where it also listens, for sessions with a network of their own (`legion.sandbox`).
    socket: str | None = None

    @property
    def holds_credential(self) -> bool:
        """Whether Claude Code's sessions are kept from the key (`legion status`)."""
        return CLAUDE_CODE in self.credentials

    def holds(self, runtime: str) -> bool:
        return runtime in self.credentials

    @property
    def port(self) -> int | None:
        """The TCP port of `url` (a confined session's bridge listens on the same)."""
        from urllib.parse import urlsplit

        try:
            return urlsplit(self.url).port
        except ValueError:
            return None


def access(url: str, credentials: Iterable[str], socket: str | None = None) -> ProxyAccess:
    return ProxyAccess(url, frozenset(credentials), socket)


def write_access(state_dir: Path, found: ProxyAccess) -> None:
    from legion.files.private import write_private

    record = {"url": found.url, "credentials": sorted(found.credentials), "socket": found.socket}
    write_private(state_dir / ACCESS_FILE, json.dumps(record) + "\n")


def read_access(state_dir: Path) -> ProxyAccess | None:
    """What the daemon said of its proxy; None when it runs none (or wrote no file this Legion
    reads)."""
    try:
        record = json.loads((state_dir / ACCESS_FILE).read_text())
        socket = record.get("socket")
        names = (str(name) for name in record["credentials"])
        return access(str(record["url"]), names, None if socket is None else str(socket))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def model_key_variables(
    env: Mapping[str, str], *, besides: str | None = None, proxied: bool = False
) -> set[str]:
    """The variables that hold a model credential: Claude Code's, those of Codex's `openai`
    provider (whichever provider its config chooses) and the key variable of the one it
    chooses; without those of runtime `besides` (a session's own CLI, for its own provider: a
    session has no use for another's key), unless the daemon's proxy holds that CLI's key
    (`proxied`: then none at all)."""
    from legion.core.model_keys import withheld_keys
    from legion.runtime.codex.provider import OPENAI_KEY_VARIABLES, read_provider
    from legion.runtime.codex.runtime import codex_home

    claude = set(CLAUDE_CREDENTIALS)
    codex: set[str] = set(OPENAI_KEY_VARIABLES)
    try:
        codex_own = set(read_provider(codex_home(env)).key_variables)
    except (OSError, ValueError):
        codex_own = set()  # a config Codex cannot read: it will say so itself
    own = {CLAUDE_CODE: claude, CODEX: codex_own}.get(besides or "", set())
    return set(withheld_keys(claude | codex | codex_own, own, proxied=proxied))


def session_variables(
    runtime: str, found: ProxyAccess, token: str | None, env: dict[str, str]
) -> dict[str, str]:
    """`env` (a session's) with the model reached through the proxy, for a runtime it serves
    (others: `env` as it is). `token`: the session's capability."""
    if runtime == CLAUDE_CODE:
        routed = dict(env)
        routed["ANTHROPIC_BASE_URL"] = found.url
        if found.holds(CLAUDE_CODE) and token:
            for name in CLAUDE_CREDENTIALS:
                routed.pop(name, None)
            routed["ANTHROPIC_AUTH_TOKEN"] = token
        return routed
    if runtime == CODEX and found.holds(CODEX) and token:
        from legion.runtime.codex.provider import CODEX_OVERRIDES_ENV, read_provider
        from legion.runtime.codex.runtime import codex_home

        try:
            provider = read_provider(codex_home(env))
        except (OSError, ValueError):
            return env  # Codex will say what is wrong with its config itself
        pointed = provider.pointed_at(found.url + CODEX_PATH, token)
        if pointed is None:
            return env
        variables, overrides = pointed
        routed = dict(env)
        if provider.key_variable:
            routed.pop(provider.key_variable, None)
        routed.update(variables)
        if overrides:
            routed[CODEX_OVERRIDES_ENV] = json.dumps(overrides)
        return routed
    return env
