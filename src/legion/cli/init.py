"""`legion init`: the current git repository made a Legion project (its .legion/config.toml),
the credentials of a real tracker or forge checked first."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from legion import plugins
from legion.cli import common
from legion.config import Project
from legion.config.paths import CONFIG_DIR_NAME
from legion.errors import LegionError
from legion.services.projects import init_project, pickup_line


def init(
    ctx: typer.Context,
    key_given: Annotated[
        str | None,
        typer.Option(
            "--key",
            help="Prefix of issue identifiers, e.g. LEG for LEG-1 (default LEG; with --tracker "
            "github the repository's name: issue #12 of acme/widgets is WIDGETS-12).",
        ),
    ] = None,
    tracker_given: Annotated[
        str | None,
        typer.Option(
            "--tracker",
            help=f"Issue tracker: {', '.join(plugins.tracker_names())} "
            f"(default {plugins.DEFAULT_BACKEND}).",
        ),
    ] = None,
    forge_given: Annotated[
        str | None,
        typer.Option(
            "--forge",
            help=f"Code forge: {', '.join(plugins.forge_names())} "
            f"(default {plugins.DEFAULT_BACKEND}).",
        ),
    ] = None,
    team: Annotated[str | None, typer.Option(help=plugins.init_option("team").help)] = None,
    github_repo: Annotated[
        str | None, typer.Option("--repo", help=plugins.init_option("repo").help)
    ] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Make the current git repository a Legion project (.legion/config.toml).

    With a real tracker or forge, Legion checks the credentials and finds the team and the
    repository before it writes anything (LINEAR_API_KEY; GITHUB_TOKEN, GH_TOKEN or `gh`)."""
    key = common.checked_option("issue_key", key_given or "LEG", "option --key")
    default = plugins.DEFAULT_BACKEND
    tracker = common.checked_option("tracker", tracker_given or default, "option --tracker")
    forge = common.checked_option("forge", forge_given or default, "option --forge")
    choice = plugins.init_settings(
        plugins.InitRequest(
            tracker=tracker,
            forge=forge,
            key=key,
            key_given=key_given is not None,
            options={"team": team, "repo": github_repo},
            repo_path=common.repo_path(ctx),
            check=common.checked_option,
        )
    )
    extra: dict[str, Any] = dict(choice.settings)
    key = choice.key or key
    # What the options given ask for: on an existing project it must be what it already has.
    requested: dict[str, Any] = {}
    if tracker_given is not None:
        requested["tracker"] = tracker
    if forge_given is not None:
        requested["forge"] = forge
    requested.update(extra)
    if key_given is not None or choice.key is not None:
        requested["issue_key"] = key
    project, created = init_project(
        common.repo_path(ctx),
        key=key,
        tracker=tracker,
        forge=forge,
        extra=extra,
        requested=requested,
        warn=lambda line: typer.echo(f"legion: warning: {line}", err=True),
    )
    pickup = _pickup(project)
    if as_json:
        common.print_json(
            {
                "root": str(project.root),
                "config": str(project.config_path),
                "project_id": project.settings.project_id,
                "issue_key": project.settings.issue_key,
                "state_dir": str(project.state_dir),
                "created": created,
                "pickup": pickup,
            }
        )
        return
    if not created:
        typer.echo(
            f"Already a Legion project: {project.config_path} "
            f"(project id {project.settings.project_id})"
        )
        if pickup is not None:
            typer.echo(pickup)
        return
    root_dir, config_path = project.root, project.config_path
    typer.echo(f"Initialised Legion in {root_dir}")
    common.info(f"  config:     {config_path}")
    common.info(f"  project id: {project.settings.project_id}")
    common.info(f"  state:      {project.state_dir}")
    if pickup is not None:
        typer.echo(pickup)
    common.info(
        f"Commit {CONFIG_DIR_NAME}/ (its config.toml is the project's: every clone and every "
        "worker reads it)."
    )
    common.info('Next: `legion issue create "Your first issue"`, then `legion state`.')


def _pickup(project: Project) -> str | None:
    """On a tracker that already holds issues (not the embedded one, new at `init`): what
    Legion will work on once started, before anything starts (the Backlog opt-in)."""
    from legion.core.text import for_display

    if not plugins.backend(project.settings.tracker).remote:
        return None
    try:
        return pickup_line(project)
    except LegionError as exc:
        return for_display(f"What Legion will work on is unknown: {exc}")
