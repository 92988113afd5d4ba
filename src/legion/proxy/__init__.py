"""The model proxy: the daemon stands between every session and the model API
(`legion.proxy.server`), so that the model credential stays with the daemon and every
response's usage is recorded as it passes (`legion.proxy.metering`, `legion.proxy.ledger`).

What a session gets instead of the key is decided by its runtime, as the registry declares it
(`legion.plugins.ModelRoute`): the path the proxy serves its CLI's API under, the upstream and
credential the daemon's environment gives it, how a session is pointed at the proxy with its
capability in place of the key, and which variables hold a model key. Each runtime's own
module says its part (`legion.runtime.claude.model_route`, `legion.runtime.codex.model_route`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from legion.plugins import ModelRoute, load, proxied_runtimes, runtime_plugin

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
        """Whether the sessions the proxy serves even on their own login (`ModelRoute.
        own_login`) are kept from the key: the daemon holds it (`legion status`)."""
        metered = [p.name for p in proxied_runtimes() if p.model and p.model.own_login]
        return all(name in self.credentials for name in metered)

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


def model_route(runtime: str) -> ModelRoute | None:
    """How the proxy serves `runtime`'s sessions; None when it does not (or it is unknown)."""
    from legion.errors import ConfigError

    try:
        return runtime_plugin(runtime).model
    except ConfigError:
        return None


def serves(runtime: str, found: ProxyAccess) -> bool:
    """Whether the daemon's proxy (`found`) serves sessions of `runtime`: it holds their key,
    or their own login passes through it."""
    route = model_route(runtime)
    return route is not None and (route.own_login or found.holds(runtime))


def model_key_variables(
    env: Mapping[str, str], *, besides: str | None = None, proxied: bool = False
) -> set[str]:
    """The variables that hold a model credential, every runtime's (Claude Code's, those of
    Codex's `openai` provider and the key variable of the one its config chooses); without
    those runtime `besides` reads (a session's own CLI, for its own provider: a session has
    no use for another's key), unless the daemon's proxy holds that CLI's key (`proxied`:
    then none at all)."""
    from legion.core.model_keys import withheld_keys

    every: set[str] = set()
    own: frozenset[str] = frozenset()
    for plugin in proxied_runtimes():
        assert plugin.model is not None
        known, reads = load(plugin.model.key_variables)(env)
        every |= known
        if plugin.name == besides:
            own = reads
    return set(withheld_keys(every, own, proxied=proxied))


def session_variables(
    runtime: str, found: ProxyAccess, token: str | None, env: dict[str, str]
) -> dict[str, str]:
    """`env` (a session's) with the model reached through the proxy, for a runtime it serves
    (others: `env` as it is). `token`: the session's capability, used only when the daemon
    holds the runtime's key."""
    route = model_route(runtime)
    if route is None:
        return env
    held = token if token and found.holds(runtime) else None
    pointed: dict[str, str] = load(route.point)(env, found.url + route.mount, held)
    return pointed
