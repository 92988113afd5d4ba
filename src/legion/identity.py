"""Who runs this command: a person, a worker in some mode, or the controller, as the session's
`LEGION_*` variables say (Legion sets them in every session it starts). The CLI and the TUI
both ask here, so a rule about who may do what is written once."""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from legion.core.model import CONTROLLER_MODE
from legion.errors import ConfigError, NotPermittedError

if TYPE_CHECKING:  # every command asks who runs it: what only the bus's commands need waits
    from legion.bus.model import Agent, Channel
    from legion.bus.store import Bus
    from legion.config import Project


def default_author() -> str:
    """Who a comment or review is from: a worker says its issue and mode, a person their name."""
    explicit = os.environ.get("LEGION_AUTHOR")
    if explicit:
        return explicit
    mode = os.environ.get("LEGION_MODE")
    if mode:
        return f"legion-{mode}"
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "user"


def require_spawner(what: str) -> None:
    """Only the orchestrator (and the human) starts sessions: a worker asks `@legion` instead
    (the seed's one privilege). A worker's session has its mode in `LEGION_MODE`."""
    mode = os.environ.get("LEGION_MODE", "").strip()
    if mode and mode != CONTROLLER_MODE:
        raise NotPermittedError(
            f"only @legion and the human {what}; a worker asks with `legion say @legion …`"
        )


def written_by_legion() -> bool:
    """Whether this command runs inside a Legion session (a worker, the controller, the
    Oracle), so what it writes is Legion's, not a person's."""
    return bool(os.environ.get("LEGION_MODE"))


@dataclass(frozen=True)
class Speaker:
    """Who runs this command on the bus, and the channel it speaks in unless told otherwise
    (`channel()` may need the project: only asked when no channel was given)."""

    agent: Agent
    channel: Callable[[], Channel]


def identify(
    bus: Bus, env: Mapping[str, str], cwd: Path, project: Callable[[], Project]
) -> Speaker:
    """The agent of the session this command runs in (registered now if the session started
    before it could be), else the human."""
    from legion.bus.sessions import human_channel, register_session
    from legion.git import current_branch

    session_id = env.get("LEGION_SESSION_ID", "").strip()
    if not session_id:
        return Speaker(bus.human(), lambda: human_channel(project(), cwd, bus))
    agent = bus.agent_by_session(session_id)
    if agent is None:
        mode = env.get("LEGION_MODE", "").strip()
        if not mode:
            raise ConfigError(
                f"LEGION_SESSION_ID={session_id} is not on the bus and LEGION_MODE is unset, "
                "so Legion cannot tell which agent this is"
            )
        workspace = cwd if current_branch(cwd) is not None else project().root
        agent = register_session(
            bus,
            project(),
            mode=mode,
            session_id=session_id,
            workspace=workspace,
            runtime=session_runtime(project(), mode, session_id),
        )
    found = agent
    return Speaker(found, lambda: found.channel)


def session_runtime(project: Project, mode: str, session_id: str) -> str:
    """The agent CLI session `session_id` runs on: as the worker registry recorded it when
    Legion started it, else (the controller, or a session the registry never saw) the CLI the
    project's settings give its role."""
    from legion.bus.sessions import session_mode_named
    from legion.core.decide import session_mode
    from legion.embedded.db import Database
    from legion.errors import StoreError
    from legion.sessions.registry import Registry

    record = None
    if project.db_path.exists():
        try:
            db = Database(project.db_path, create=False)
        except StoreError:
            pass  # the settings still say which CLI the role runs on
        else:
            try:
                record = Registry(db).by_session(session_id)
            except StoreError:
                pass
            finally:
                db.close()
    if record is not None:
        return record.runtime
    role = (
        CONTROLLER_MODE if mode == CONTROLLER_MODE else session_mode(session_mode_named(mode)).value
    )
    return project.settings.runtime_for(role)
