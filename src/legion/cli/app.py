"""The command tree."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from legion import __version__
from legion.cli import common, demo, issues, prs, swarm, workers, workspaces
from legion.config import FORGES, SPECS, TRACKERS
from legion.projects import init_project

app = typer.Typer(
    name="legion",
    help="Runs a swarm of coding agents through your issue tracker.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(issues.app, name="issue")
app.add_typer(prs.app, name="pr")
app.add_typer(workspaces.app, name="workspace")
app.command("demo")(demo.demo)
for command in (
    swarm.start,
    swarm.stop,
    swarm.status,
    swarm.reconcile,
    swarm.log,
    swarm.feedback,
    workers.dispatch,
    workers.resume,
    workers.answer,
    workers.workers,
    workers.peek,
):
    app.command()(command)
skills_app = typer.Typer(help="Legion's Claude Code skills.", no_args_is_help=True)
skills_app.command("install")(swarm.skills_install)
app.add_typer(skills_app, name="skills")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"legion {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    repo: Annotated[
        Path | None,
        typer.Option(
            "--repo",
            "-C",
            envvar="LEGION_REPO",
            help="The project's repository (default: the current directory).",
            file_okay=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    ctx.obj = {"repo": repo}


@app.command()
def init(
    ctx: typer.Context,
    key: Annotated[
        str, typer.Option(help="Prefix of issue identifiers, e.g. LEG for LEG-1.")
    ] = "LEG",
    tracker: Annotated[str, typer.Option(help=f"Issue tracker: {', '.join(TRACKERS)}.")] = "local",
    forge: Annotated[str, typer.Option(help=f"Code forge: {', '.join(FORGES)}.")] = "local",
) -> None:
    """Make the current git repository a Legion project (.legion/config.toml)."""
    project, created = init_project(common.repo_path(ctx), key=key, tracker=tracker, forge=forge)
    if not created:
        typer.echo(
            f"Already a Legion project: {project.config_path} "
            f"(project id {project.settings.project_id})"
        )
        return
    root_dir, config_path = project.root, project.config_path
    typer.echo(f"Initialised Legion in {root_dir}")
    typer.echo(f"  config:     {config_path}")
    typer.echo(f"  project id: {project.settings.project_id}")
    typer.echo(f"  state:      {project.state_dir}")
    typer.echo('Next: `legion issue create "Your first issue"`, then `legion state`.')


@app.command()
def state(
    ctx: typer.Context,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Every issue's observed state and the action the decision table suggests."""
    from legion.backends import open_workers
    from legion.state import observe

    project, backends = common.backends(ctx)
    snapshot = observe(
        project.settings.project_id,
        backends.tracker,
        backends.forge,
        open_workers(project, backends),
    )
    if as_json:
        common.print_json(snapshot.to_json())
        return
    from legion.cli.render import state_table

    out = common.console()
    if not snapshot.issues:
        out.print('No issues yet: `legion issue create "Title"` adds one.')
    else:
        out.print(state_table(snapshot))
    for warning in snapshot.warnings:
        out.print(f"[yellow]warning:[/] {warning}")


@app.command("config")
def show_config(
    ctx: typer.Context,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """The settings in effect, and where each comes from."""
    project = common.project(ctx)
    settings = project.settings
    rows = {}
    for spec in SPECS:
        value = getattr(settings, spec.name)
        if isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        rows[spec.name] = {"value": value, "source": settings.sources.get(spec.name, "default")}
    rows["state_dir"]["value"] = str(project.state_dir)
    if as_json:
        common.print_json({"root": str(project.root), "settings": rows})
        return
    typer.echo(f"project: {project.root}")
    for name, row in rows.items():
        typer.echo(f"  {name} = {row['value']!r}  ({row['source']})")
    if os.environ.get("LEGION_REPO"):
        typer.echo("  (repository from LEGION_REPO)")
