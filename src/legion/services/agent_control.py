"""Reaching an agent's session from anywhere on the machine (`legion kill`, `legion attach`):
through the worker manager of the project the bus says the agent belongs to, found where the
bus says that project lives, and refused when another project now lives in that folder (its
sessions are not the agent's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from legion.bus import Bus, actions
from legion.bus.model import Agent, AgentStatus
from legion.errors import InputError, LegionError
from legion.runtime.tmux import Attach
from legion.sessions.workers import WorkerManager


def workers_of(bus: Bus, agent: Agent, env: Mapping[str, str] | None = None) -> WorkerManager:
    """The worker manager of the agent's project, found where the bus says it lives (`env`:
    Legion's settings' environment; default the process's)."""
    from legion.backends import open_backends, open_workers
    from legion.bus.sessions import project_channel_name
    from legion.config import load_project

    root = bus.projects().get(agent.project)
    if root is None:
        raise InputError(f"the bus does not know where project {agent.project!r} lives")
    project = load_project(root, env)
    there = project_channel_name(project, bus)
    if there != agent.project:  # another project took its folder: its sessions are not ours
        raise InputError(
            f"project {agent.project!r} no longer lives at {root} (project {there!r} does)"
        )
    return open_workers(project, open_backends(project), env)


@dataclass(frozen=True, slots=True)
class Killed:
    """What a kill did: the agent as it is after, and whether a running session was ended."""

    agent: Agent
    stopped: bool  # a running session was ended
    marked: bool  # the agent was marked failed (it had not ended)
    force: bool

    @property
    def said(self) -> str:
        """What `legion kill` and the TUI say of it, in one line: never "killed" when no
        session ran."""
        from legion.core.text import for_display

        who = f"@{for_display(self.agent.address)}"
        if self.stopped:
            return f"{'force-killed' if self.force else 'killed'} {who}: its session ended"
        if self.marked:
            return f"no session of {who} was running: marked {self.agent.status.value}"
        return f"nothing to kill: {who} is {self.agent.status.value}, with no running session"


def kill_with(
    bus: Bus, actor: Agent, target: Agent, *, force: bool, stop: Callable[[Agent], bool]
) -> Killed:
    """`legion.bus.actions.kill` with `stop` (True when it ended a running session), and what
    it did."""
    stopped: list[bool] = []

    def stopping(found: Agent) -> bool:
        stopped.append(stop(found))
        return stopped[-1]

    before = bus.agent(target.id).status
    after = actions.kill(bus, actor, target, force=force, stop=stopping)
    marked = after.status is AgentStatus.FAILED and before is not AgentStatus.FAILED
    return Killed(after, any(stopped), marked, force)


def kill(bus: Bus, actor: Agent, target: Agent, *, force: bool, env: Mapping[str, str]) -> Killed:
    """`actor` ends `target`'s session (`legion.bus.actions.kill` says who may and when),
    its status looked at first: "busy" must be true now, not what was last seen, so with no
    daemon the session is looked at."""
    from legion.services.agent_watch import observe_all

    observe_all(bus, env, [target.project])

    def stop(found: Agent) -> bool:
        if found.session_id is None:
            return False
        return bool(
            workers_of(bus, found, env).supervisor.stop_session(found.session_id, force=force)
        )

    return kill_with(bus, actor, target, force=force, stop=stop)


def attach_command(bus: Bus, target: Agent, env: Mapping[str, str]) -> Attach:
    """How to open `target`'s live session in this terminal (its tmux window, read-write);
    refused when it has no session or its session is not running."""
    from legion.core.text import for_display

    if target.session_id is None:
        raise InputError(f"@{for_display(target.address)} has no session to attach to")
    windows = workers_of(bus, target).windows
    window = windows.live_window(target.session_id)
    if window is None:
        raise LegionError(
            f"@{for_display(target.address)} is not running (status {target.status.value}): "
            "no live session to attach to"
        )
    actions.unarchive(bus, target)  # attached to again: back in the lists
    return windows.attach_command(window.id, env)
