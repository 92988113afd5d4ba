"""Where the model proxy (`legion.proxy.server`) sends each runtime's requests: its upstream
(the real model API and the credential the daemon holds for it, from the daemon's environment)
and its mount (the path its sessions are served under, and what its CLI may send there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from legion.plugins import load, proxied_runtimes

from .routes import (
    APIS,
    Api,
)

if TYPE_CHECKING:
    from legion.config.settings import Settings


@dataclass(frozen=True)
class Upstream:
    """The real model API and the credential the daemon holds for it (None: the sessions'
    own pass through)."""

    base_url: str
    headers: Mapping[str, str]

    @property
    def holds_credential(self) -> bool:
        return bool(self.headers)


def upstreams_from(env: Mapping[str, str], settings: Settings | None = None) -> dict[str, Upstream]:
    """Each runtime the proxy serves, by name, and its real endpoint and credential, from the
    daemon's environment `env` (with the variables `settings` give each runtime's view of its
    CLI: `RuntimePlugin.environment`). A runtime is left out when the daemon holds no key for
    it, unless its sessions' own login passes through (`ModelRoute.own_login`)."""
    found: dict[str, Upstream] = {}
    for plugin in proxied_runtimes():
        route = plugin.model
        assert route is not None
        own = env if settings is None else {**env, **load(plugin.environment)(settings)}
        endpoint = load(route.upstream)(own)
        if endpoint is None:
            continue
        upstream = Upstream(endpoint[0], dict(endpoint[1]))
        if upstream.holds_credential or route.own_login:
            found[plugin.name] = upstream
    return found


@dataclass(frozen=True)
class Mount:
    """Where the proxy serves one runtime's sessions: the path, the runtime, its upstream and
    what its CLI may send there."""

    path: str  # "": the proxy's root
    runtime: str
    upstream: Upstream
    api: Api


def mounts(upstreams: Mapping[str, Upstream]) -> tuple[Mount, ...]:
    """The mounts of the runtimes in `upstreams`, the longest path first (the root last)."""
    found = []
    for plugin in proxied_runtimes():
        if plugin.name in upstreams and plugin.model is not None:
            api = APIS[plugin.model.api]
            found.append(Mount(plugin.model.mount, plugin.name, upstreams[plugin.name], api))
    return tuple(sorted(found, key=lambda mount: -len(mount.path)))


def under(target: str, path: str) -> bool:
    return not path or target == path or target.startswith((path + "/", path + "?"))
