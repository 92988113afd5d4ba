"""`legion config` (the settings in effect and where each comes from; `get` and `set` one) and
`legion trust` (a repository's config trusted, as it is, to choose what Legion runs)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from legion.cli import common, render
from legion.config import Project
from legion.config.settings import SPECS
from legion.errors import InputError


def _table_value(item: Any) -> Any:
    """A value in a table setting as its file would hold it."""
    from dataclasses import asdict, is_dataclass

    if is_dataclass(item) and not isinstance(item, type):
        return asdict(item)
    return getattr(item, "value", item)


app = typer.Typer(
    epilog=common.example(
        "legion config", "legion config get base_branch", "legion config set wip_limit 3"
    ),
)


def _config_rows(project: Project) -> dict[str, dict[str, Any]]:
    """Every setting's value in effect, as its file would hold it, and where it comes from."""
    settings = project.settings
    effective: dict[str, Any] = {
        "state_dir": project.state_dir,
        "workspace_root": project.workspace_root,
    }
    rows = {}
    for spec in SPECS:
        value = effective.get(spec.name, settings.value(spec.name))
        if spec.shown is not None:
            value = spec.shown(value)
        if isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, Mapping):  # [statuses]: names only; [prices]: tables
            value = {key: _table_value(item) for key, item in value.items()}
        rows[spec.name] = {"value": value, "source": settings.sources.get(spec.name, "default")}
    return rows


@app.callback(invoke_without_command=True)
def show_config(
    ctx: typer.Context,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """The settings in effect, and where each comes from; `get` and `set` one.

    Printed as TOML, each value's source in a comment after it (a file, a LEGION_* variable, the
    command line, or "default"); a setting with no value is a comment: `# name: unset (...)`.
    """
    if ctx.invoked_subcommand is not None:
        return
    project = common.project(ctx)
    rows = _config_rows(project)
    if as_json:
        common.print_json({"root": str(project.root), "settings": rows})
        return
    lines = render.config_lines(
        str(project.root),
        [
            (
                spec.name,
                rows[spec.name]["value"],
                render.source_text(rows[spec.name]["source"], spec.env_var),
            )
            for spec in SPECS
        ],
    )
    if os.environ.get("LEGION_REPO"):
        lines.insert(1, "# (the repository comes from LEGION_REPO)")
    common.echo("\n".join(lines))


@app.command(
    "get", epilog=common.example("legion config get base_branch", "legion config get tick --json")
)
def config_get(
    ctx: typer.Context,
    key: Annotated[
        str, typer.Argument(metavar="KEY", help="A setting, as `legion config` names it.")
    ],
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Print one setting's value in effect: a string as it is, anything else as TOML; nothing
    when it is unset."""
    from legion.config.files import toml_value
    from legion.config.settings import SPEC_BY_NAME

    if key not in SPEC_BY_NAME:
        raise InputError(
            f"unknown setting {key!r}{common.did_you_mean(key, SPEC_BY_NAME)}; "
            "`legion config` lists them all"
        )
    row = _config_rows(common.project(ctx))[key]
    if as_json:
        common.print_json({"key": key, **row})
        return
    value = row["value"]
    if value is not None:
        common.echo(value if isinstance(value, str) else toml_value(value))


@app.command(
    "set",
    epilog=common.example(
        "legion config set base_branch main",
        "legion config set wip_limit 3",
        'legion config set labels \'["docs", "bug"]\'',
        "legion config set claude_bin ~/bin/claude --user",
    ),
)
def config_set(
    ctx: typer.Context,
    key: Annotated[
        str, typer.Argument(metavar="KEY", help="A setting, as `legion config` names it.")
    ],
    value: Annotated[
        str,
        typer.Argument(
            metavar="VALUE",
            help='Its value: read as TOML (3, true, ["a", "b"]) when the setting takes that, '
            "else as a string.",
        ),
    ],
    user: Annotated[
        bool,
        typer.Option(
            "--user",
            help="Write your user config (~/.config/legion/config.toml), not the project's.",
        ),
    ] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Set a setting in the project's .legion/config.toml (or, with --user, your own config),
    checked by the rules Legion reads it with; the rest of the file is kept as it is.

    A repository's config that sets what Legion runs (`legion trust` lists those settings) is
    read only once you trust it again: any change to it undoes `legion trust`. Not from inside
    a Legion session."""
    from legion.config import find_project_root
    from legion.config.files import (
        check_config_key,
        config_value,
        read_toml,
        toml_value,
        write_config_value,
    )
    from legion.config.paths import CONFIG_DIR_NAME, CONFIG_FILE_NAME, user_config_path
    from legion.config.resolve import user_values, widening_keys
    from legion.sessions import identity

    identity.require_person("change Legion's settings")
    spec = check_config_key(key, repo=not user)
    raw = config_value(spec, value)
    if user:
        path = user_config_path(os.environ)
    else:
        path = find_project_root(common.repo_path(ctx)) / CONFIG_DIR_NAME / CONFIG_FILE_NAME
    write_config_value(path, key, raw, repo=not user)
    untrusted = [] if user else widening_keys(read_toml(path), user_values(os.environ))
    shown = spec.shown(raw) if spec.shown is not None else raw  # a URL's password: never
    if as_json:
        common.print_json(
            {"config": str(path), "key": key, "value": shown, "needs_trust": untrusted}
        )
        return
    common.echo(f"{path}: {key} = {toml_value(shown)}")
    if untrusted:
        common.echo(
            f"legion: warning: {path} sets what only you choose ({', '.join(untrusted)}): "
            "Legion reads it only once you read it and run `legion trust`",
            err=True,
        )


def trust_config(
    ctx: typer.Context,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Trust the repository's .legion/config.toml, as it is now, to choose what Legion runs.

    Settings that choose a program, its arguments, the sandbox, a folder, a remote (`sandbox`,
    `claude_bin`, `claude_args`, `codex_args`, `tmux_config`, `state_dir`, `remote`,
    `github_repo`, …), and budgets above your own (`token_budget`, `daily_token_budget`,
    `idle_spend_limit`, `wip_limit`), are read from a repository's config only once you trust
    that exact file: whoever lands a commit writes it. Read the file first: this prints what
    it sets, then records its hash in your state folder. Any change to the file undoes it.
    """
    from legion import trust
    from legion.config import find_project_root
    from legion.config.files import read_config, toml_value
    from legion.config.paths import CONFIG_DIR_NAME, CONFIG_FILE_NAME, state_home
    from legion.config.resolve import resolve_settings, user_values, widening_keys

    config = find_project_root(common.repo_path(ctx)) / CONFIG_DIR_NAME / CONFIG_FILE_NAME
    resolve_settings(config, os.environ, trusting=True)  # every key valid, or one line why
    data, table = read_config(config, repo=True)
    widening = {key: table[key] for key in widening_keys(table, user_values(os.environ))}
    digest = trust.trust(state_home(os.environ), config, data)
    if as_json:
        common.print_json({"config": str(config), "sha256": digest, "widens": widening})
        return
    if not widening:
        common.echo(
            f"Trusted {config} (sha256 {digest[:12]}): it sets nothing that chooses what runs."
        )
        return
    common.echo(f"Trusted {config} (sha256 {digest[:12]}), which sets:")
    for key, value in widening.items():
        common.echo(f"  {key} = {toml_value(value)}")
    common.echo("Any change to the file undoes this: run `legion trust` again after reading it.")
