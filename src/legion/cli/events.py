"""`legion events`: the bus's event log, every agent's on this machine."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

from legion.cli import bus_common, common
from legion.cli.bus_common import DEFAULT_LAST
from legion.core.text import for_display

if TYPE_CHECKING:  # the bus is imported by its commands only: other commands start faster
    from legion.bus.model import Event


def event_json(event: Event, addresses: Mapping[int, str]) -> dict[str, Any]:
    agent = None if event.agent_id is None else addresses.get(event.agent_id)
    return {
        "id": event.id,
        "kind": event.kind.value,
        "agent": agent,
        "message_id": event.message_id,
        "detail": event.detail,
        "created_at": event.created_at,
    }


def event_line(event: Event, addresses: Mapping[int, str]) -> str:
    when = event.created_at[:19].replace("T", " ")
    who = "-" if event.agent_id is None else f"@{addresses.get(event.agent_id, '?')}"
    line = f"#{event.id} {when} {event.kind.value} {for_display(who)}"
    if event.detail:
        line += f": {for_display(event.detail)}"
    if event.message_id is not None:
        line += f" (message {for_display(event.message_id)})"
    return line


def events(
    ctx: typer.Context,
    agent: Annotated[
        str | None,
        typer.Option("--agent", help="Only this agent's events (an address, as in a mention)."),
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            "-k",
            help="Only events of this kind (repeatable): registered, blocked, completed, failed, "
            "archived, compaction, message. Default: all but message.",
        ),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Keep printing new events until Ctrl-C."),
    ] = False,
    last: Annotated[
        int,
        typer.Option("--last", "-n", min=1, max=100_000, help="How many recent events."),
    ] = DEFAULT_LAST,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """The bus's event log, oldest first (with --follow, then each new one as it comes): agents
    registered (a session started), blocked, completed, failed, archived, and compactions, for
    every agent on the bus (all projects on this machine).

    With --follow --json, one JSON object per line."""
    from legion.services.messaging import events_asked_for

    kinds = events_asked_for(kind or [])
    bus = bus_common.open_bus()
    agent_id = None
    if agent is not None:
        agent_id = bus_common.target(bus, bus_common.speaker_of(ctx, bus), agent).id
    addresses = bus_common.addresses(bus)

    def fetch(since: int, newest: int | None) -> list[Event]:
        found = bus.event_log(since=since, agent_id=agent_id, kinds=kinds, last=newest)
        if any(e.agent_id is not None and e.agent_id not in addresses for e in found):
            addresses.update(bus_common.addresses(bus))  # an agent registered since
        return found

    shown = fetch(0, last)
    if as_json and not follow:
        common.print_json([event_json(e, addresses) for e in shown])
        return
    _show_events(shown, addresses, as_json)
    if not follow:
        if not shown and not as_json:
            typer.echo("No events.")
        return
    # Nothing shown: no event matches yet, so each that comes is newer than 0.
    common.follow(
        lambda cursor: fetch(cursor, None),
        shown[-1].id if shown else 0,
        lambda found: _show_events(found, addresses, as_json),
        lambda event: event.id,
    )


def _show_events(found: Iterable[Event], addresses: Mapping[int, str], as_json: bool) -> None:
    for event in found:
        if as_json:
            line = common.json_text(event_json(event, addresses))
        else:
            line = event_line(event, addresses)
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
