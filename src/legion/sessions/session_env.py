"""What of the dispatcher's environment a session inherits: everything but what must not reach
a session (`inheritable`)."""

from __future__ import annotations

from collections.abc import Mapping

from legion.plugins import backend_secret_variables, child_variables
from legion.relay import CAPABILITY_ENV, SOCKET_ENV
from legion.store import STORE_SECRET_VARIABLES

# Variables of the dispatcher that must not reach a worker: tmux's would make the CLI think it
# runs in the dispatcher's pane; those a runtime's CLI sets for its tools' processes (each
# declares them: `legion.plugins`; Claude Code's) would make a worker started by the
# controller (from its Bash tool) take itself for the controller's child: another session id,
# another transcript.
# Legion's own tracker and forge credentials stay out too: a worker runs model-written
# commands, so Legion, not the worker, holds them (its `legion` asks the daemon: see
# `legion.relay`). So does the capability of whoever starts the session (the controller's
# covers the whole project): each session is given its own.
_DROP_FROM_ENV = (
    "TMUX",
    "TMUX_PANE",
    *child_variables()[0],
    *backend_secret_variables(),
    *STORE_SECRET_VARIABLES,  # the store's URL and libpq's password: the daemon's credentials
    CAPABILITY_ENV,
    SOCKET_ENV,
)
_DROP_PREFIXES = child_variables()[1]


def inheritable(name: str) -> bool:
    return name not in _DROP_FROM_ENV and not name.startswith(_DROP_PREFIXES)


def inherited(env: Mapping[str, str]) -> dict[str, str]:
    """What of the dispatcher's environment `env` a session (or its workspace setup) gets."""
    return {key: value for key, value in env.items() if inheritable(key)}
