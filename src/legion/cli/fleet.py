"""`legion hosts` and `legion host drain`: the fleet's hosts, as the project's store has them."""

from __future__ import annotations

from typing import Annotated

import typer

from legion.cli import common


def hosts(ctx: typer.Context, as_json: Annotated[bool, common.JsonOption] = False) -> None:
    """The fleet's hosts: each daemon that joined, its heartbeat, capacity and sessions, and
    which one leads (the lease's holder, with its epoch).

    A host is `up`, `draining` (it takes nothing new), `stopped` (its daemon stopped), or `lost`
    (no heartbeat for longer than `host_timeout`). On one machine with SQLite the fleet is this
    machine alone.
    """
    from legion.fleet.hosts import Fleet

    project, backends = common.backends(ctx)
    found, now = Fleet(backends.db).hosts(project.settings.host_timeout)
    if as_json:
        common.print_json([host.to_json(now) for host in found])
        return
    if not found:
        typer.echo("No host has joined yet: a host joins when its daemon starts (`legion start`).")
        return
    rows = [
        (
            host.name + (" *" if host.leader else ""),
            host.state.value,
            f"{max(0.0, now - host.heartbeat_at):.0f} s ago",
            f"{host.sessions}/{host.capacity}",
            f"epoch {host.epoch}" if host.epoch is not None else "",
        )
        for host in found
    ]
    header = ("HOST", "STATE", "HEARTBEAT", "SESSIONS", "LEADS")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        common.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    typer.echo("* leads: runs the controller and the reconciler's passes")


host_app = typer.Typer(
    help="One host of the fleet.",
    no_args_is_help=True,
    epilog=common.example("legion host drain build-2", "legion host drain build-2 --undo"),
)


@host_app.command("drain", epilog=common.example("legion host drain build-2"))
def drain(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The host, as `legion hosts` names it.")],
    undo: Annotated[
        bool, typer.Option("--undo", help="Take the host back: it may lead and take work.")
    ] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Drain a host: it takes no new issue and finishes those it has; leading, it gives up the
    lead once no worker runs on it. A daemon started again on it undoes the drain."""
    from legion.fleet.hosts import Fleet

    _, backends = common.backends(ctx)
    Fleet(backends.db).drain(name, draining=not undo)
    if as_json:
        common.print_json({"host": name, "draining": not undo})
        return
    typer.echo(f"{name}: {'taken back' if undo else 'draining'}")
