"""`legion workspace …`: the per-issue workspaces."""

from __future__ import annotations

from typing import Annotated

import typer

from legion.backends import open_workers
from legion.cli import common
from legion.workspaces.sweep import sweep_done

app = typer.Typer(help="List and clean up per-issue workspaces.", no_args_is_help=True)


@app.command("list")
def list_workspaces(
    ctx: typer.Context, as_json: Annotated[bool, common.JsonOption] = False
) -> None:
    """Each workspace, its branch, and whether it holds uncommitted or unmerged work."""
    project, backends = common.backends(ctx)
    workspaces = open_workers(project, backends).workspaces
    rows = []
    for workspace in workspaces.list():
        check = workspaces.check(workspace.issue)
        rows.append(
            {
                "issue": workspace.issue,
                "path": str(workspace.path),
                "branch": workspace.branch,
                "kind": workspace.kind,
                "dirty": check.dirty,
                "unmerged": check.unmerged,
                "detail": check.detail,
            }
        )
    if as_json:
        common.print_json(rows)
        return
    if not rows:
        typer.echo("No workspaces.")
    for row in rows:
        note = f"  ({row['detail']})" if row["detail"] else ""
        typer.echo(f"{row['issue']}  {row['path']}  [{row['branch']}]{note}")


@app.command()
def clean(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would go.")] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Remove the workspaces of Done issues; one with unsaved or unmerged work is kept."""
    project, backends = common.backends(ctx)
    workers = open_workers(project, backends)
    results = sweep_done(
        backends.tracker, workers.workspaces, workers.live_issues(), dry_run=dry_run
    )
    if as_json:
        common.print_json(
            [{"issue": r.issue, "removed": r.removed, "reason": r.reason} for r in results]
        )
        return
    if not results:
        typer.echo("No workspaces of Done issues.")
    for result in results:
        typer.echo(f"{result.issue}: {'removed' if result.removed else 'kept'}: {result.reason}")
