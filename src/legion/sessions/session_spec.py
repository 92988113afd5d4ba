"""One session's start, decided before anything is launched: a `SessionSpec` (its window, its
argv, its folder, its environment, whom its capability is for and whether it is confined).

The supervisor (`legion.sessions.supervisor`) gathers what only effects can give (the CLI's
command, a minted capability, the session's home, its agent on the bus, its sandbox), and the
functions here put the environment together from those, without touching anything: what a
session inherits of the dispatcher's, what every session is told, its way to the relay and
to the model. The spec is then launched as it is (`SessionSupervisor.launch`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from legion import proxy
from legion.daemon_link import WAKE_ENV
from legion.relay import CAPABILITY_ENV, SOCKET_ENV
from legion.runtime.tmux import HOST_ENV
from legion.sessions.session_env import inherited


@dataclass(frozen=True)
class SessionSpec:
    """A session as it is launched: `argv` run in `cwd` with exactly `env`, in tmux window
    `window`, tagged with its session id. `issue`: the issue its capability is scoped to
    (None: the controller's, the whole project); `confined`: `argv` runs in its sandbox."""

    window: str
    session_id: str
    cwd: Path
    argv: tuple[str, ...]
    env: Mapping[str, str]
    issue: str | None
    mode: str
    confined: bool


def base_environment(
    dispatcher: Mapping[str, str],
    runtime: Mapping[str, str],
    *,
    repo: Path,
    wake: Path,
    host: str,
    python_dir: Path,
    extra: Mapping[str, str],
) -> dict[str, str]:
    """What every session starts from: the dispatcher's environment less what must not reach
    a session (`inherited`), what its CLI needs (`runtime`), where its project and its
    daemon's wake-up are, the fleet host it runs on, this Legion's `legion` first on its PATH
    (whatever the PATH it inherited holds), then the caller's `extra` (its mode, its issue)."""
    env = inherited(dispatcher) | dict(runtime)
    env |= {
        "LEGION_REPO": str(repo),
        WAKE_ENV: str(wake),
        HOST_ENV: host,
        "PATH": os.pathsep.join([str(python_dir), dispatcher.get("PATH", "")]),
        **extra,
    }
    return env


def with_relay(env: Mapping[str, str], token: str, socket: Path) -> dict[str, str]:
    """`env` with the session's own capability and the relay's socket: its tracker, forge and
    bus calls go to the daemon."""
    return {**env, CAPABILITY_ENV: token, SOCKET_ENV: str(socket)}


def with_model_access(
    runtime: str,
    env: Mapping[str, str],
    access: proxy.ProxyAccess | None,
    token: str | None,
    *,
    proxied: bool,
) -> dict[str, str]:
    """`env` as its model calls need it: no model key but the one its own CLI needs for its
    own provider, and none at all when the daemon's proxy holds it (`proxied`: its commands
    could read it from the CLI's process); pointed at the proxy with its capability `token`
    when there is one (`access`)."""
    dropped = set(proxy.model_key_variables(env, besides=runtime, proxied=proxied))
    kept = {key: value for key, value in env.items() if key not in dropped}
    if access is not None and token is not None:
        kept = proxy.session_variables(runtime, access, token, kept)
    return kept
