"""The servers a daemon runs for its sessions while it runs: the relay socket (their tracker,
forge, bus and record calls), the model proxy (their model requests, with the credentials) and
the egress proxy (the destinations a confined session may reach besides its model). Each is
started before the first tick starts a session, and stopped by the daemon as it stops.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from legion.backends import Backends, open_backends
from legion.config import Project
from legion.core.budget import Spent
from legion.core.model import Label
from legion.fleet.hosts import FencedStore
from legion.proxy import EGRESS_SOCKET_NAME, PROXY_SOCKET_NAME, access, read_access, write_access
from legion.proxy.egress import EgressProxy
from legion.proxy.ledger import Spender
from legion.proxy.server import ModelProxy
from legion.proxy.upstreams import upstreams_from
from legion.relay import socket_path
from legion.relay.server import RelayServer, relay_server
from legion.sessions.registry import Registry
from legion.store import Store, open_store, store_opener
from legion.trackers.label_gate import LabelGate


def start_relay(
    project: Project,
    env: Mapping[str, str],
    fenced: FencedStore,
    before_done: Callable[[str], None] | None = None,
) -> RelayServer:
    """The relay socket, which every session the daemon starts sends its tracker and forge
    calls to (the embedded backends' too); the daemon holds the project's lock, so a socket
    left by a killed daemon is replaced. `before_done(issue)`: run before `worker-done` goes
    on an issue (in a fleet, its branch sent to the shared remote), refusing it by raising."""
    from legion.services.session_ops import session_ops

    def opened() -> Backends:
        # Its writes are fenced on this daemon's lease, as the daemon's own are.
        backends = open_backends(project, direct=True, store=fenced.over(open_store(project)))
        if before_done is not None:
            backends.tracker = LabelGate(backends.tracker, Label.WORKER_DONE, before_done)
        return backends

    server = relay_server(
        project.state_dir,
        opened,
        # A session's bus and records, as the session its capability says; a command run
        # for one writes under the lease too.
        ops=session_ops(project, env, lease=lambda: fenced.lease),
    )
    server.start()
    return server


def start_model_proxy(
    project: Project,
    env: Mapping[str, str],
    db: Store,
    controller_runtime: str,
    refused: Callable[[Spender, Spent], None],
) -> ModelProxy:
    """The model proxy (`legion.proxy`), on the port it had last time when that is free (the
    sessions it served then are still pointed at it), and the file that tells whoever
    starts a session where it is. `refused`: told of each request refused for a budget."""
    state = project.state_dir
    open_db = store_opener(project, db)
    # Each runtime's, from the daemon's environment and its own view of its CLI's home.
    upstreams = upstreams_from(env, project.settings)
    before = read_access(state)
    port = 0
    if before is not None:
        with contextlib.suppress(ValueError):
            port = int(before.url.rsplit(":", 1)[1])
    options: dict[str, Any] = {
        "workers": registered_worker,
        "controller_runtime": controller_runtime,
        "limits": project.settings.limits,
        "refused": refused,
    }
    # For confined sessions, whose only way out is their bridge to this socket.
    options["unix_socket"] = socket_path(state, PROXY_SOCKET_NAME)
    try:
        server = ModelProxy(upstreams, open_db, port=port, **options)
    except OSError:  # taken meanwhile: any free port
        server = ModelProxy(upstreams, open_db, **options)
    server.start()
    holders = [name for name, upstream in upstreams.items() if upstream.holds_credential]
    write_access(state, access(server.url, holders, str(options["unix_socket"])))
    return server


def start_egress_proxy(project: Project, db: Store) -> EgressProxy | None:
    """The egress proxy (`legion.proxy.egress`) on its socket beside the model proxy's, for
    the destinations `sandbox_egress` allows; None when it allows none (a session's bridge
    then offers no egress: `legion.sessions.confinement`)."""
    from legion.core import egress
    from legion.proxy.egress_refusals import counting

    path = socket_path(project.state_dir, EGRESS_SOCKET_NAME)
    rules = egress.parse(project.settings.sandbox_egress)
    if not rules:
        path.unlink(missing_ok=True)  # a session started now is given no egress
        return None
    open_db = store_opener(project, db)
    server = EgressProxy(path, rules, open_db, refused=counting(open_db))
    server.start()
    return server


def registered_worker(db: Store, session_id: str) -> Spender | None:
    """The worker Legion recorded as running session `session_id` (its issue, mode and
    runtime), for the model proxy; None when it knows none."""
    record = Registry(db).by_session(session_id)
    if record is None:
        return None
    return Spender(session_id, record.issue, record.mode.value, record.runtime)
