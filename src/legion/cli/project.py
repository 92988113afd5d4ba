"""`legion project list | forget`: the projects the machine's bus knows, and taking one off it
(its agents, channels and messages leave `legion agents` and the TUI)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from legion.cli import bus_common, common
from legion.core.text import for_display
from legion.errors import InputError

if TYPE_CHECKING:
    from legion.bus.model import KnownProject

app = typer.Typer(
    help="The projects on this machine's bus: list them, forget one.",
    no_args_is_help=True,
    epilog=common.example("legion project list", "legion project forget repo-2 --yes"),
)


def _known_json(project: KnownProject) -> dict[str, Any]:
    return {
        "name": project.name,
        "project_id": project.project_id,
        "root": None if project.root is None else str(project.root),
        "exists": project.root is not None and project.root.is_dir(),
        "agents": project.agents,
    }


@app.command("list", epilog=common.example("legion project list", "legion project list --json"))
def project_list(as_json: Annotated[bool, common.JsonOption] = False) -> None:
    """Every project on this machine's bus: its name there (as in `legion agents`), where it
    lives, and how many agents it has. A folder that is gone is marked `(gone)`."""
    bus = bus_common.open_bus()
    try:
        found = [_known_json(project) for project in bus.known_projects()]
    finally:
        bus.close()
    if as_json:
        common.print_json(found)
        return
    if not found:
        typer.echo("No projects on the bus.")
        return
    for row in found:
        where = row["root"] or "(where: not recorded)"
        gone = "" if row["exists"] or row["root"] is None else " (gone)"
        agents = f"{row['agents']} agent{'' if row['agents'] == 1 else 's'}"
        common.echo(f"{row['name']}  {where}{gone}  {agents}")


@app.command(
    "forget",
    epilog=common.example(
        "legion project forget repo-2 --yes", "legion -C ~/src/app project forget --json --yes"
    ),
)
def project_forget(
    ctx: typer.Context,
    which: Annotated[
        str | None,
        typer.Argument(
            metavar="[PROJECT]",
            help="Its name on the bus (as `legion agents` and `legion project list` show it) "
            "or its project id (default: the project here, or at -C).",
        ),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask first.")] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Take a project off this machine's bus: its agents, channels, messages and tasks, so it
    leaves `legion agents` and the TUI. Its repository, tracker, database and workspaces stay.

    Refused while its daemon runs, and inside a Legion session. Asks first on a terminal;
    elsewhere it needs --yes."""
    from legion.services.projects import forget_project

    def confirm(project: KnownProject) -> bool:
        if yes:
            return True
        shown = for_display(project.name)
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise InputError(f"forgetting project {shown} cannot be undone: add --yes")
        agents = f"{project.agents} agent{'' if project.agents == 1 else 's'}"
        return typer.confirm(f"Forget project {shown} ({agents}) and all that was said in it?")

    bus = bus_common.open_bus()
    try:
        project, forgotten = forget_project(
            bus, which, lambda: common.project(ctx), os.environ, confirm
        )
    finally:
        bus.close()
    if forgotten is None:
        typer.echo("Nothing forgotten.", err=True)
        raise typer.Exit(1)
    if as_json:
        common.print_json(
            {
                "name": forgotten.name,
                "project_id": project.project_id,
                "agents": forgotten.agents,
                "messages": forgotten.messages,
                "tasks": forgotten.tasks,
            }
        )
        return
    common.echo(
        f"Forgot project {forgotten.name}: {forgotten.agents} agents, "
        f"{forgotten.messages} messages, {forgotten.tasks} tasks."
    )
