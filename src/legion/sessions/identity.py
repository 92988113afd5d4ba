"""Who runs this command: a person, a worker in some mode, or the controller, as the session's
`LEGION_*` variables say (Legion sets them in every session it starts). They are read here and
only here (`SessionVariables`); the CLI and the TUI both ask, so a rule about who may do what
is written once."""

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
    from legion.bus import Bus
    from legion.bus.model import Agent, Channel
    from legion.config import Project


@dataclass(frozen=True)
class SessionVariables:
    """The `LEGION_*` variables Legion sets in a session it starts, read once. Outside a
    session (a person at a terminal) every field is empty."""

    session_id: str | None = None
    mode: str | None = None  # the mode a worker runs in, or the controller's
    issue: str | None = None
    spawn_instance: int | None = None  # tells a replaced session's late signal apart
    author: str | None = None  # LEGION_AUTHOR: who comments are from, when set

    @classmethod
    def read(cls, env: Mapping[str, str]) -> SessionVariables:
        def value(name: str) -> str | None:
            return env.get(name, "").strip() or None

        instance = value("LEGION_SPAWN_INSTANCE")
        return cls(
            session_id=value("LEGION_SESSION_ID"),
            mode=value("LEGION_MODE"),
            issue=value("LEGION_ISSUE_ID"),
            spawn_instance=int(instance) if instance and instance.isdigit() else None,
            author=value("LEGION_AUTHOR"),
        )

    @property
    def in_session(self) -> bool:
        """Whether this runs inside a Legion session (a worker, the controller, the Oracle),
        so what it writes is Legion's, not a person's."""
        return self.mode is not None

    @property
    def is_controller(self) -> bool:
        return self.mode == CONTROLLER_MODE


def current() -> SessionVariables:
    """This process's session variables (a command runs in one session for its whole life)."""
    return SessionVariables.read(os.environ)


def default_author() -> str:
    """Who a comment or review is from: a session its mode (the controller's commands the
    daemon runs for it included, whatever name the daemon's environment carries: never a
    person's), a person their name (`LEGION_AUTHOR`, else their login)."""
    here = current()
    if here.mode:
        return f"legion-{here.mode}"
    if here.author:
        return here.author
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "user"


def role() -> str:
    """Who runs this command, in the roles' tables (`legion.core.roles`): the controller (its
    commands the daemon runs for it included), a worker's mode, or "" for a person."""
    return current().mode or ""


def require_spawner(what: str) -> None:
    """Only the orchestrator (and the human) starts sessions: a worker asks `@legion` instead
    (the seed's one privilege). A worker's session has its mode in `LEGION_MODE`."""
    here = current()
    if here.in_session and not here.is_controller:
        raise NotPermittedError(
            f"only @legion and the human {what}; a worker asks with `legion say @legion …`"
        )


def require_person(what: str) -> None:
    """What only a person does at their terminal (change Legion's settings, rewrite what an
    issue asks for): refused in any session Legion started, the controller's included."""
    here = current()
    if here.in_session or here.session_id:
        raise NotPermittedError(f"a Legion session does not {what}")


def written_by_legion() -> bool:
    """Whether this command runs inside a Legion session, so what it writes is Legion's."""
    return current().in_session


def asker_and_judge() -> tuple[str, str]:
    """(who asks, who judged it needs a human), as an escalation names them: the controller
    is Legion's Oracle; a worker's session says its mode; anyone else is a person."""
    here = current()
    if here.is_controller:
        return "the controller", "Legion's Oracle"
    if here.mode:
        return f"the {here.mode} worker", f"the {here.mode} worker"
    person = default_author()
    return person, person


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

    variables = SessionVariables.read(env)
    session_id = variables.session_id
    if not session_id:
        return Speaker(bus.human(), lambda: human_channel(project(), cwd, bus))
    agent = bus.agent_by_session(session_id)
    if agent is None:
        mode = variables.mode
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
    from legion.errors import StoreError
    from legion.sessions.registry import Registry
    from legion.store import open_store, store_exists

    record = None
    if store_exists(project):
        try:
            db = open_store(project)
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
