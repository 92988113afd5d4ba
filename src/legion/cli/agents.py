"""`legion agents | kill | attach | archive`: the agents on the bus, every project's on this
machine, and what the human and `@legion` may do to one."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from legion.cli import bus_common, common
from legion.core.stamps import utc_stamp
from legion.core.text import for_display

if TYPE_CHECKING:  # the bus is imported by its commands only: other commands start faster
    from legion.bus.model import Agent


def agent_json(agent: Agent) -> dict[str, Any]:
    return {
        "id": agent.id,
        "address": agent.address,
        "project": agent.project,
        "branch": agent.branch,
        "name": agent.name,
        "role": agent.role.value,
        "runtime": agent.runtime,
        "session_id": agent.session_id,
        "status": agent.status.value,
        "spawn_instance": agent.spawn_instance,
        "created_at": utc_stamp(agent.created_at),
        "updated_at": utc_stamp(agent.updated_at),
    }


def agents(
    include_archived: Annotated[
        bool, typer.Option("--all", "-a", help="Archived agents too.")
    ] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Every agent on the bus (all projects on this machine): its address, role and status.

    A project's daemon keeps its agents' statuses true; for a project no daemon runs for, the
    sessions are looked at now (tmux and the transcripts)."""
    from legion.services.agent_watch import observe_all

    bus = bus_common.open_bus()
    observe_all(bus, os.environ)
    found = bus.agents(include_archived=include_archived)
    if as_json:
        common.print_json([agent_json(agent) for agent in found])
        return
    if not found:
        typer.echo("No agents.")
        return
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("Agent", "Role", "Status", "Spawn", "Session", "Updated"):
        table.add_column(column, overflow="fold")
    for agent in found:
        table.add_row(
            for_display(f"@{agent.address}"),
            agent.role.value,
            agent.status.value,
            str(agent.spawn_instance),
            for_display(agent.session_id or "-"),
            for_display(agent.updated_at[:19].replace("T", " ")),
        )
    common.print_table(table)


def kill(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="The agent, as in a mention.")],
    force: Annotated[
        bool,
        typer.Option(
            "--force", "-f", help="Kill it even in the middle of a turn, with SIGKILL at once."
        ),
    ] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """End an agent's session (@legion and the human only). The swarm may start the issue's
    worker again: the tracker decides; move the issue to stop its work for good."""
    from legion.services.agent_control import kill as kill_agent

    bus = bus_common.open_bus()
    speaker = bus_common.speaker_of(ctx, bus)
    target = bus_common.target(bus, speaker, agent)
    killed = kill_agent(bus, speaker.agent, target, force=force, env=os.environ)
    if as_json:
        common.print_json(agent_json(killed.agent))
        return
    common.echo(killed.said)


def attach(
    ctx: typer.Context,
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME",
            help="An issue (its live worker), a worker's window as `legion workers` shows it, "
            "or an agent's address as in a mention.",
        ),
    ],
) -> None:
    """Open a live session in this terminal: its tmux window, read-write (what you type goes
    to the agent). NAME is an issue (`LEG-7`: its live worker), a worker's window as `legion
    workers` shows it, or an agent's address (`legion/LEG-7/implement`, `legion`). Detach with
    tmux's prefix key then d (C-b d by default); the session runs on. Inside tmux on the same
    server, switches this client to it instead. Needs a terminal."""
    from legion.errors import InputError, LegionError

    inside_tmux = bool(os.environ.get("TMUX"))
    if not inside_tmux and not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise InputError(
            "`legion attach` needs a terminal: run it in one, not in a pipe or a script"
        )
    attach_with = _worker_attach(ctx, name)
    if attach_with is None:
        from legion.services.agent_control import attach_command

        bus = bus_common.open_bus()
        try:
            target = bus_common.target(bus, bus_common.speaker_of(ctx, bus), name)
        except InputError as exc:
            raise InputError(f"{exc}; {_live_workers(ctx)}") from None
        attach_with = attach_command(bus, target, os.environ)
        bus.close()
    argv = attach_with.argv
    sys.stdout.flush()
    try:
        os.execvpe(argv[0], argv, attach_with.env)
    except OSError as exc:
        raise LegionError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None


def _live_views(ctx: typer.Context) -> tuple[Any, list[Any]] | None:
    """This project's worker manager and its live workers; None outside a project (or when
    tmux cannot say)."""
    from legion.backends import open_workers
    from legion.errors import LegionError

    try:
        project, backends = common.backends(ctx)
        manager = open_workers(project, backends)
        views = manager.roster.views()
    except LegionError:
        return None
    return manager, [view for view in views if view.state.is_live and view.window is not None]


def _worker_attach(ctx: typer.Context, name: str) -> Any:
    """How to attach to the live worker `name` names (its issue, or its window); None when
    it names none of this project's workers."""
    from legion.core.model import normalize_identifier
    from legion.errors import InputError, LegionError

    found = _live_views(ctx)
    if found is None:
        return None
    manager, live = found
    matches = [view for view in live if view.record.window == name]
    if not matches:
        try:
            issue = normalize_identifier(name)
        except LegionError:
            return None
        matches = [view for view in live if view.record.issue == issue]
        if not matches:
            if any(view.record.issue == issue for view in manager.roster.views()):
                raise InputError(f"{issue} has no live worker; {_listed(live)}")
            return None
    if len(matches) > 1:
        windows = ", ".join(for_display(view.record.window) for view in matches)
        raise InputError(f"{for_display(name)} has several live workers: name a window ({windows})")
    manager.supervisor.bring_back(matches[0].record.session_id)  # attached to: back in the lists
    return manager.windows.attach_command(matches[0].window.id, os.environ)


def _listed(live: list[Any]) -> str:
    if not live:
        return "no worker is running in this project"
    shown = [
        f"{for_display(view.record.issue)} {view.record.mode.value} "
        f"(window {for_display(view.record.window)})"
        for view in live
    ]
    return "live workers: " + ", ".join(shown)


def _live_workers(ctx: typer.Context) -> str:
    """A hint for a name that names nothing: the live workers, as `legion attach` takes them."""
    found = _live_views(ctx)
    return "see `legion agents`" if found is None else _listed(found[1])


def archive(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="The agent, as in a mention.")],
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Hide an agent from `legion agents` and the TUI (its messages stay). It comes back by
    itself when it is started or prompted again."""
    from legion.bus import actions

    bus = bus_common.open_bus()
    speaker = bus_common.speaker_of(ctx, bus)
    archived = actions.archive(bus, speaker.agent, bus_common.target(bus, speaker, agent))
    if as_json:
        common.print_json(agent_json(archived))
        return
    common.echo(f"@{archived.address}: archived")
