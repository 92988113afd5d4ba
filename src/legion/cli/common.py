"""What every command shares: finding the project, opening backends, printing results."""

from __future__ import annotations

import getpass
import json
import os
import sys
from pathlib import Path
from typing import Any

import typer

from legion.backends import Backends, open_backends
from legion.config import Project, load_project
from legion.errors import InputError

JsonOption = typer.Option("--json", help="Print machine-readable JSON.")


def repo_path(ctx: typer.Context) -> Path:
    obj = ctx.find_root().obj or {}
    repo = obj.get("repo")
    return Path(repo) if repo else Path.cwd()


def project(ctx: typer.Context) -> Project:
    return load_project(repo_path(ctx))


def backends(ctx: typer.Context) -> tuple[Project, Backends]:
    proj = project(ctx)
    return proj, open_backends(proj)


def changed(project: Project) -> None:
    """A write went through: let a running daemon reconcile now instead of at its next tick."""
    from legion.daemon_link import notify

    notify(project)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def console() -> Any:
    from rich.console import Console

    # A pipe gets whole lines (for grep and less) rather than rich's 80-column default.
    width = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 200
    return Console(highlight=False, soft_wrap=False, width=width)


def default_author() -> str:
    """Who a comment or review is from: a worker says its issue and mode, a person their name."""
    explicit = os.environ.get("LEGION_AUTHOR")
    if explicit:
        return explicit
    mode = os.environ.get("LEGION_MODE")
    if mode:
        return f"legion-{mode}"
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "user"


def read_text_arg(text: str | None, file: Path | None, what: str) -> str | None:
    """The value of `--body` or `--body-file` (where `-` is standard input)."""
    if text is not None and file is not None:
        raise InputError(f"give {what} either inline or as a file, not both")
    if file is None:
        return text
    try:
        if str(file) == "-":
            return sys.stdin.read()
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {file}: {exc}") from None
