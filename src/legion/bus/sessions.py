"""Who is speaking on the bus, and where: Legion's sessions are agents, registered when they
start; anybody else running `legion` is the human.

A session Legion started has `LEGION_SESSION_ID` and `LEGION_MODE` in its environment (the
worker manager sets them), so a `legion say` from it is found as its agent. Its channel is its
project (its name on the bus: the repository folder's name, made unique among the projects on
the machine, see `legion.bus.stored.projects`) and the git branch it works on: an issue's workers
share the issue's branch (`legion/LEG-7`), the orchestrator is on the base branch.
"""

from __future__ import annotations

from pathlib import Path

from legion.bus import Bus
from legion.bus.address import project_name_for_folder
from legion.bus.model import ORCHESTRATOR_NAME, Agent, AgentRole, Channel
from legion.config import Project, git_toplevel
from legion.core.decide import session_mode
from legion.core.model import CONTROLLER_MODE, Mode
from legion.errors import ConfigError, InputError
from legion.git import GitPlace, current_branch


def project_channel_name(project: Project, bus: Bus | None = None) -> str:
    """The project's name on the bus: given to its project id the first time the bus sees it
    (its repository folder's name, made addressable, with a suffix when another project has
    that name), the same ever after. `bus`: the bus to ask (default: the machine's, opened
    for the call)."""
    if bus is not None:
        return bus.claim_project(
            project.settings.project_id, project_name_for_folder(project.root.name), project.root
        )
    from legion.bus import open_bus

    opened = open_bus(project.env)
    try:
        return project_channel_name(project, opened)
    finally:
        opened.close()


def agent_name_for_mode(mode: str) -> str:
    """An agent is a session: the orchestrator is `legion`; a worker is named by its session's
    mode (a retro runs in the implementer's session, so it is `implement`)."""
    if mode == CONTROLLER_MODE:
        return ORCHESTRATOR_NAME
    return session_mode(session_mode_named(mode)).value


def role_for_mode(mode: str) -> AgentRole:
    return (
        AgentRole.CONTROLLER
        if mode == CONTROLLER_MODE
        else AgentRole(session_mode_named(mode).value)
    )


def session_mode_named(mode: str) -> Mode:
    """The worker mode `LEGION_MODE` names; a one-line error for anything else."""
    try:
        return Mode(mode)
    except ValueError:
        known = ", ".join([CONTROLLER_MODE, *(m.value for m in Mode)])
        raise ConfigError(f"LEGION_MODE={mode!r} is not a mode (known: {known})") from None


def branch_of(folder: Path | GitPlace) -> str:
    branch = current_branch(folder)
    if branch is None:
        where = folder.work_tree if isinstance(folder, GitPlace) else folder
        raise InputError(
            f"{where}: no branch checked out (detached HEAD or not a git repository); "
            "give the channel with --channel PROJECT/BRANCH"
        )
    return branch


def register_session(
    bus: Bus,
    project: Project,
    *,
    mode: str,
    session_id: str,
    workspace: Path,
    runtime: str,
    at: GitPlace | None = None,
) -> Agent:
    """Record that Legion started (or resumed) session `session_id` in `mode` ("controller" or
    a worker mode) in `workspace`: its agent is busy, with a new spawn instance. Call it each
    time the session's process starts, before the process can post. Its channel is the branch
    checked out in `workspace`, read at `at` when given (the daemon gives the workspace's
    checked git folders: `legion.git.worktree_place`)."""
    channel = Channel(project_channel_name(project, bus), branch_of(at or workspace))
    return bus.register_agent(
        channel,
        agent_name_for_mode(mode),
        role=role_for_mode(mode),
        runtime=runtime,
        session_id=session_id,
    )


def human_channel(project: Project, cwd: Path, bus: Bus | None = None) -> Channel:
    """The human speaks in the project's channel of the branch checked out where they are (a
    worktree of the project counts), else of the project's main working tree."""
    here = cwd if git_toplevel(cwd) == project.root else project.root
    return Channel(project_channel_name(project, bus), branch_of(here))
