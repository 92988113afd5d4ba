"""`legion dispatch | resume | answer | workers | peek`: the worker runtime."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from legion.backends import open_workers
from legion.cli import common
from legion.core.model import Mode
from legion.core.text import for_display
from legion.errors import InputError, NotFoundError
from legion.sessions import identity

if TYPE_CHECKING:
    from legion.core.task_list import TaskList
    from legion.sessions.roster import WorkerView
    from legion.sessions.workers import WorkerManager


def dispatch(
    ctx: typer.Context,
    issue: Annotated[str, typer.Argument(help="The issue, e.g. LEG-7.")],
    mode: Annotated[
        str, typer.Argument(help="architect, plan, implement, review, retro or finish.")
    ],
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Start it even though the issue waits for another, or the WIP limit is reached.",
        ),
    ] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Start a worker for an issue in its workspace (refused if one is already live; and if the
    issue is blocked by one that is not Done, or the WIP limit is reached, unless --force)."""
    from legion.services.dispatch import dispatch_worker

    parsed = Mode.parse(mode)
    project, backends = common.backends(ctx)
    view = dispatch_worker(project, backends, issue, parsed, force=force)
    forced = " (forced)" if force else ""
    common.logged(backends, view.record.issue, "dispatch", f"{parsed.value}{forced}")
    _show(
        view,
        as_json,
        f"{parsed.value} worker started in window {view.record.window} "
        f"(session {view.record.session_id}, workspace {view.record.workspace})",
    )


def _show(view: WorkerView, as_json: bool, what: str) -> None:
    if as_json:
        common.print_json(view.to_json(time.time()))
    else:
        common.echo(f"{view.record.issue}: {what}")


def resume(
    ctx: typer.Context,
    issue: Annotated[str, typer.Argument(help="The issue, e.g. LEG-7.")],
    mode: Annotated[
        str, typer.Argument(help="The session's mode (retro resumes the implementer).")
    ],
    prompt: Annotated[
        str | None, typer.Option("--prompt", "-p", help="What to tell the worker.")
    ] = None,
    prompt_file: Annotated[
        Path | None,
        typer.Option("--prompt-file", help="Read the prompt from a file (- for stdin)."),
    ] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Give a worker's session a new prompt: typed in if it runs, else resumed in a new window."""
    identity.require_spawner("resume workers")
    parsed = Mode.parse(mode)
    text = common.read_text_arg(prompt, prompt_file, "the prompt")
    if text is None:
        raise InputError("give the prompt with --prompt TEXT or --prompt-file PATH")
    project, backends = common.backends(ctx)
    from legion.reconcile import resume_worker

    workers = open_workers(project, backends)
    view = resume_worker(workers, backends.tracker, issue, parsed, text, who=identity.role())
    common.logged(backends, view.record.issue, "resume", view.record.mode.value)
    _show(view, as_json, f"prompt sent to {view.record.window} (session {view.record.session_id})")


def answer(
    ctx: typer.Context,
    issue: Annotated[str, typer.Argument(help="The issue whose worker asked.")],
    text: Annotated[
        list[str],
        typer.Argument(
            help="The answer: an option's label or number, or free text; one per question."
        ),
    ],
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Answer the question a blocked worker is waiting on."""
    project, backends = common.backends(ctx)
    identifier = backends.tracker.get_issue(issue).identifier  # an unknown issue is bad input
    from legion.reconcile import answer_worker

    workers = open_workers(project, backends)
    view = answer_worker(workers, backends.tracker, identifier, text, who=identity.role())
    common.logged(backends, identifier, "answer", f"{view.record.mode.value}'s question")
    _show(view, as_json, f"answered; {view.record.window} goes on")


def workers(
    ctx: typer.Context,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Every worker Legion started and has not retired: running, idle, blocked or dead."""
    project, backends = common.backends(ctx)
    manager = open_workers(project, backends)
    views = manager.roster.views()
    now = time.time()
    tasks = {view.record.session_id: manager.roster.task_list(view.record) for view in views}
    if as_json:
        common.print_json(
            [
                view.to_json(now) | {"tasks": _tasks_json(tasks[view.record.session_id])}
                for view in views
            ]
        )
        return
    if not views:
        common.info("No workers.")
        return
    from rich.table import Table

    from legion.daemon_link import running_pid
    from legion.fleet.hosts import fleet_host
    from legion.services.swarm_status import shown_state

    # In a fleet, which host runs each (another host's as it last reported them).
    here = fleet_host(project.settings)
    table = Table(box=None, header_style="bold", pad_edge=False)
    host = ("Host",) if here is not None else ()
    # Its transcript's last change: a session that is not running may have written just now.
    columns = (
        "Issue", "Mode", *host, "State", "Runtime", "Window", "Last output", "Tasks", "Question"
    )  # fmt: skip
    daemon_runs = running_pid(project) is not None
    for column in columns:
        table.add_column(column, overflow="fold")
    for view in views:
        data = view.to_json(now)
        age = data["transcript_age_s"]
        task_list = tasks[view.record.session_id]
        table.add_row(
            for_display(view.record.issue),
            view.record.mode.value,
            *([] if here is None else [for_display(view.record.host or "-")]),
            shown_state(view.state, daemon_runs),
            for_display(view.record.runtime),
            for_display(view.record.window),
            "-" if age is None else f"{age:.0f}s ago",
            "-" if task_list is None else for_display(task_list.progress),
            # The worker's (its model's) words: escaped like a tracker's.
            for_display(view.question.text) if view.question else "",
        )
    common.print_table(table)


def _tasks_json(task_list: TaskList | None) -> dict[str, object] | None:
    return None if task_list is None else task_list.to_json()


def peek(
    ctx: typer.Context,
    issue: Annotated[str, typer.Argument(help="The issue whose worker to look at.")],
    lines: Annotated[
        int, typer.Option("--lines", "-n", min=1, max=10000, help="How many lines.")
    ] = 40,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """The last lines of a worker's screen (blank lines below the last output don't count).
    With no worker window, while its workspace's setup runs or after it failed: that setup's
    output."""
    project, backends = common.backends(ctx)
    identifier = backends.tracker.get_issue(issue).identifier  # an unknown issue is bad input
    workers = open_workers(project, backends)
    try:
        view, captured = workers.roster.peek(identifier, lines)
    except NotFoundError:
        if not _peek_setup(workers, identifier, lines, as_json):
            raise
        return
    screen = last_lines(captured, lines)
    if as_json:
        data = view.to_json(time.time())
        data["lines"] = lines
        data["screen"] = screen
        common.print_json(data)
        return
    common.echo(f"--- {view.record.window} ({view.state.value})")
    if screen:
        # tmux's capture (without -e) holds no escape sequences, but the characters on the
        # screen are the worker's: a bidirectional override or a stray control is escaped.
        common.echo(screen)


def _peek_setup(workers: WorkerManager, issue: str, lines: int, as_json: bool) -> bool:
    """Show the output of `issue`'s workspace setup when it runs or failed; whether it did."""
    from legion.workspaces.setup import summary

    files = workers.setup.files(issue)
    found = summary(files)
    if found["status"] not in ("running", "failed"):
        return False
    output = files.output(lines)
    if as_json:
        common.print_json({"issue": issue, "setup": found, "lines": lines, "screen": output})
        return True
    why = f": {found['why']}" if found.get("why") else ""
    common.echo(f"--- {issue} workspace setup ({found['status']}{why})")
    if output:
        common.echo(output)  # the commands' words: escaped as a worker's screen is
    return True


def last_lines(captured: str, count: int) -> str:
    """The last `count` lines of a captured pane. tmux captures from `count` lines up in the
    history to the bottom of the visible screen, so the capture alone can hold a whole screen
    more, ending in the blank rows below the cursor: those are dropped first."""
    rows = captured.splitlines()
    while rows and not rows[-1].strip():
        rows.pop()
    return "\n".join(rows[-count:])
