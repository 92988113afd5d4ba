"""The relay: how Legion's sessions reach a tracker or forge that needs a credential.

Credentials stay with Legion, never with a worker. A worker runs commands a model wrote, so a
token in its environment is a token the model can print (into its transcript, a comment, a
commit). When a project's tracker or forge is a remote one (`relay_needed`), the daemon alone
holds the credentials: it runs a Unix-socket server (`legion.relay.server`) and makes every API
call itself. Each session Legion starts gets, instead of a credential, a capability
(`legion.relay.capabilities`): a random token the daemon knows by its hash, scoped to the
session's issue for a worker, to the whole project for the controller (whose Oracle runs in
the same session). The session's `legion` commands find `LEGION_CAPABILITY` and
`LEGION_RELAY_SOCKET` in their environment and send their tracker and forge calls to the daemon
(`legion.relay.client`), which checks the scope, makes the call, and answers with the result
or the error, re-raised as the same `LegionError` (so exit codes do not change).

The embedded tracker and forge hold no credential, but their writes are the daemon's all the
same while it runs: a merge fast-forwards the user's checkout, which a confined worker
(`legion.sandbox`) cannot see, and a worker's tracker writes are held to its issue. So every
session started while the daemon runs gets a capability and the socket, whatever the backends;
one started without a daemon, on the embedded backends, opens the database directly.

The protocol: one JSON request and one JSON answer per connection (`legion.relay.protocol`).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from legion.config.settings import Settings

# What a session started by Legion finds in its environment.
CAPABILITY_ENV = "LEGION_CAPABILITY"
SOCKET_ENV = "LEGION_RELAY_SOCKET"
# Set in a command the daemon runs for a session (`legion.services.session_ops`): it runs here, and
# is not sent back to the daemon.
RUN_BY_DAEMON_ENV = "LEGION_RUN_BY_DAEMON"

SOCKET_NAME = "relay.sock"
# sun_path holds 108 bytes on Linux (104 on macOS), the terminating NUL included.
MAX_SOCKET_PATH = 103 if sys.platform == "darwin" else 107


def session_has_relay(env: Mapping[str, str]) -> bool:
    """Whether this runs in a session Legion gave the relay (its capability and the socket)."""
    return bool(env.get(CAPABILITY_ENV) and env.get(SOCKET_ENV))


def wake_up_fetcher(env: Mapping[str, str]) -> Callable[[str, str | None], str | None] | None:
    """How a session's hooks get its wake-up context from the daemon, which assembles it (a
    confined session sees no bus); None outside a session with the relay (the hook reads the
    bus itself). The client is imported only when it is fetched: hooks run at every turn."""
    if not session_has_relay(env):
        return None

    def fetch(why: str, compaction: str | None) -> str | None:
        from legion.relay.client import fetch_wake_up

        return fetch_wake_up(env, why, compaction)

    return fetch


def relay_needed(settings: Settings) -> bool:
    """Whether the project's sessions go through the daemon: when its tracker or its forge is a
    remote one, which needs a credential the sessions must not have."""
    from legion import plugins

    return plugins.is_remote((settings.tracker, settings.forge))


def socket_path(state_dir: Path, name: str = SOCKET_NAME) -> Path:
    """Where the daemon of the project with this state folder listens: `name` (the relay's
    `relay.sock`, the model proxy's `model.sock`) in the state folder's `run/` (private,
    0700) when that path fits in a socket address, else a short one in `/tmp/legion-<uid>/` (a 0700
    folder the server checks is ours), named by a hash of the state folder. Decided from the
    state folder and the user alone, never from the environment, so the daemon and any
    process that starts a worker agree on it."""
    from legion.daemon_link import run_folder

    preferred = run_folder(state_dir) / name
    if len(os.fsencode(preferred)) <= MAX_SOCKET_PATH:
        return preferred
    digest = hashlib.sha256(os.fsencode(state_dir)).hexdigest()[:16]
    return fallback_folder() / (f"{digest}.sock" if name == SOCKET_NAME else f"{digest}.{name}")


def fallback_folder() -> Path:
    # /tmp, not $TMPDIR or $XDG_RUNTIME_DIR: a user's shells may differ in those, and the
    # path must be the same for the daemon and for whoever starts a worker.
    from legion.daemon_link import short_folder

    return short_folder()  # the server checks it is ours and 0700
