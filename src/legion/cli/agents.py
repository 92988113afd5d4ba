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
    from legion.watch import observe_all

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
    from legion.agent_control import kill as kill_agent

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
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="The agent, as in a mention.")],
) -> None:
    """Open the agent's live session in this terminal: its tmux window, read-write (what you
    type goes to the agent). Detach with tmux's prefix key then d (C-b d by default); the
    session runs on. Inside tmux on the same server, switches this client to it instead."""
    from legion.agent_control import attach_command

    bus = bus_common.open_bus()
    target = bus_common.target(bus, bus_common.speaker_of(ctx, bus), agent)
    attach_with = attach_command(bus, target, os.environ)
    bus.close()
    argv = attach_with.argv
    sys.stdout.flush()
    try:
        os.execvpe(argv[0], argv, attach_with.env)
    except OSError as exc:
        from legion.errors import LegionError

        raise LegionError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None


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
