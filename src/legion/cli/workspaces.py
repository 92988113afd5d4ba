"""`legion workspace …`: the per-issue workspaces."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from legion.backends import open_workers, open_workspaces
from legion.cli import common

app = typer.Typer(
    help="List and clean up per-issue workspaces.",
    no_args_is_help=True,
    epilog=common.example("legion workspace list", "legion workspace clean --dry-run"),
)


@app.command("list", epilog=common.example("legion workspace list --json"))
def list_workspaces(
    ctx: typer.Context, as_json: Annotated[bool, common.JsonOption] = False
) -> None:
    """Each workspace, its branch, whether it holds uncommitted or unmerged work, and its
    setup (`workspace_setup`): none, running, ok, or failed (its attempt, when it runs again)."""
    project, _ = common.backends(ctx)  # a project with its database, as every command's
    from legion.workspaces.setup import SetupFiles, summary  # what only this command reads

    workspaces = open_workspaces(project)
    rows: list[dict[str, Any]] = []
    now = time.time()
    for workspace in workspaces.list():
        check = workspaces.check(workspace.issue)
        setup = summary(SetupFiles(project.state_dir, workspace.issue), now)
        rows.append(
            {
                "issue": workspace.issue,
                "path": str(workspace.path),
                "branch": workspace.branch,
                "kind": workspace.kind,
                "dirty": check.dirty,
                "unmerged": check.unmerged,
                "detail": check.detail,
                "setup": setup,
            }
        )
    if as_json:
        common.print_json(rows)
        return
    if not rows:
        common.info("No workspaces.")
    for row in rows:
        note = f"  ({row['detail']})" if row["detail"] else ""
        shown = setup_shown(row["setup"], now)
        common.echo(f"{row['issue']}  {row['path']}  [{row['branch']}]  setup: {shown}{note}")


def setup_shown(setup: dict[str, Any], now: float) -> str:
    """none, running, ok, or failed (attempt N, again in M min)."""
    status = str(setup["status"])
    if status != "failed":
        return status
    next_at = setup.get("next_at")
    when = "when asked" if next_at is None else f"again in {max(0, next_at - now) / 60:.0f} min"
    return f"failed (attempt {setup['attempt']}, {when})"


@app.command(
    epilog=common.example(
        "legion workspace clean --dry-run",
        "legion workspace clean",
        "legion workspace clean --rescue",
    )
)
def clean(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would go.")] = False,
    rescue: Annotated[
        bool,
        typer.Option(
            "--rescue",
            help="Move ignored files that exist nowhere else (.env, notes) out to Legion's state "
            "folder, then remove the workspace.",
        ),
    ] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Remove the workspaces of Done issues. One with uncommitted or unmerged work is kept, and
    so is one holding git-ignored files that are not build output, unless --rescue."""
    import time

    project, backends = common.backends(ctx)
    from legion.workspaces.sweep import sweep_done  # what only this command runs

    workers = open_workers(project, backends)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    results = sweep_done(
        backends.tracker,
        open_workspaces(project),
        workers.roster.live_issues(),
        dry_run=dry_run,
        rescue_to=project.state_dir / "rescued" / stamp if rescue else None,
    )
    rows = [
        {
            "issue": r.issue,
            "removed": r.removed,
            "outcome": "removed" if r.removed else ("would_remove" if r.would_remove else "kept"),
            "reason": r.reason,
        }
        for r in results
    ]
    if as_json:
        common.print_json(rows)
        return
    if not rows:
        common.info("No workspaces of Done issues.")
    for row in rows:
        if row["outcome"] == "would_remove":
            common.echo(f"{row['issue']}: {row['reason']}")
        elif row["outcome"] == "removed":
            common.echo(f"{row['issue']}: {row['reason']}")  # "removed <path>"
        else:
            common.echo(f"{row['issue']}: kept: {row['reason']}")
