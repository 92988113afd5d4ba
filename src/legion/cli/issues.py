"""`legion issue …`: the tracker, whichever backend is configured."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from legion.cli import common, render
from legion.core.model import Status, normalize_identifier
from legion.errors import InputError, LegionError
from legion.sessions import identity
from legion.trackers.base import Issue

if TYPE_CHECKING:
    from legion.config import Project
    from legion.trackers.base import Tracker

# `legion issue close` moves an issue to Done, `reopen` back to Todo: Legion's statuses, each
# backend's own name for it from the project's [statuses] table.
CLOSED = Status.DONE
REOPENED = Status.TODO

app = typer.Typer(
    help="Create, read and update issues.",
    no_args_is_help=True,
    epilog=common.example('legion issue create "Add a --verbose flag"', "legion issue list"),
)

BodyOption = typer.Option("--body", "-b", help="The text.")
BodyFileOption = typer.Option("--body-file", help="Read the text from a file (- for stdin).")


@app.command(
    epilog=common.example(
        # No workflow label here: a copied `--label worker-done` would tell Legion a worker
        # finished.
        'legion issue create "Add a --verbose flag" --body "Print each step." --status Backlog',
        'legion issue create "Write the docs" --body-file notes.md --json',
    )
)
def create(
    ctx: typer.Context,
    title: str,
    body: Annotated[str | None, BodyOption] = None,
    body_file: Annotated[Path | None, BodyFileOption] = None,
    status: Annotated[str, typer.Option("--status", "-s", help="Initial status.")] = "Todo",
    label: Annotated[
        list[str] | None,
        typer.Option(
            "--label",
            "-l",
            help="A label (repeatable): one of `labels` in .legion/config.toml, or a workflow "
            "label (they drive Legion: worker-done tells it a worker finished).",
        ),
    ] = None,
    parent: Annotated[str | None, typer.Option(help="Parent issue identifier.")] = None,
    blocked_by: Annotated[
        list[str] | None,
        typer.Option(
            "--blocked-by",
            help="An issue this one waits for (repeatable): Legion starts no worker on it "
            "until each is Done.",
        ),
    ] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Create an issue and print its identifier."""
    text = common.read_text_arg(body, body_file, "the body") or ""
    parsed_status = Status.parse(status)
    blockers = [normalize_identifier(name) for name in blocked_by or ()]
    project, backends = common.backends(ctx)
    issue = backends.tracker.create_issue(
        title,
        body=text,
        status=parsed_status,
        labels=label or (),
        parent=parent,
        blocked_by=blockers,
    )
    common.changed(project)
    pickup = _pickup(project, backends.tracker, issue)
    if as_json:
        common.print_json(render.issue_json(issue) | {"pickup": pickup})
        return
    common.echo(issue.identifier)
    if pickup is not None:  # on stderr: `ID=$(legion issue create …)` holds the identifier
        common.info(pickup, err=True)


def _pickup(project: Project, tracker: Tracker, issue: Issue) -> str | None:
    """When Legion picks the new issue up; None for a session's own (its daemon runs) or when
    it cannot be told (said as such)."""
    from legion.services.projects import issue_pickup_line

    if identity.current().in_session:
        return None
    try:
        return issue_pickup_line(project, tracker, issue)
    except LegionError as exc:
        return f"When Legion picks it up is unknown: {exc}"


@app.command(
    "list", epilog=common.example('legion issue list --status "In Progress" --label worker-active')
)
def list_issues(
    ctx: typer.Context,
    status: Annotated[str | None, typer.Option("--status", "-s", help="Only this status.")] = None,
    label: Annotated[
        str | None, typer.Option("--label", "-l", help="Only issues with this label.")
    ] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """List issues."""
    wanted = Status.parse(status) if status is not None else None
    _, backends = common.backends(ctx)
    found = backends.tracker.list_issues(status=wanted, label=label)
    if as_json:
        common.print_json([render.issue_json(issue) for issue in found])
    elif not found:
        common.info("No issues.")
    else:
        common.print_table(render.issues_table(found, common.console().width))


@app.command(epilog=common.example("legion issue show LEG-3", "legion issue show LEG-3 --json"))
def show(
    ctx: typer.Context,
    identifier: str,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Show an issue with its latest comments, pull request and the tokens its workers used."""
    from legion.services.issue_view import read_issue

    project, backends = common.backends(ctx)
    view = read_issue(project, backends, identifier)
    if as_json:
        data = render.issue_json(view.issue)
        data["blockers"] = [
            {"identifier": name, "status": None if status is None else status.value}
            for name, status in view.blockers
        ]
        data["comments"] = [render.comment_json(c) for c in view.comments]
        data["earlier_comments"] = view.earlier_comments
        data["pr"] = None if view.pr is None else render.pr_json(view.pr)
        data["usage"] = render.usage_json(view.usage)
        common.print_json(data)
    else:
        common.console().print(
            render.issue_detail(
                view.issue,
                view.comments,
                view.pr,
                view.usage,
                view.blockers,
                earlier=view.earlier_comments,
            )
        )


@app.command(epilog=common.example('legion issue move LEG-3 "Needs Review"'))
def move(
    ctx: typer.Context,
    identifier: str,
    status: str,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Set an issue's status."""
    target = Status.parse(status)
    project, backends = common.backends(ctx)
    before = backends.tracker.get_issue(identifier)
    issue = backends.tracker.set_status(before.identifier, target)
    common.changed(project)
    if as_json:
        common.print_json(render.issue_json(issue))
    else:
        common.echo(f"{issue.identifier}: {before.status.value} -> {issue.status.value}")


@app.command(
    epilog=common.example(
        'legion issue edit LEG-3 --title "Add a --verbose flag to every command"',
        "legion issue edit LEG-3 --body-file spec.md --add-label docs",
    )
)
def edit(
    ctx: typer.Context,
    identifier: str,
    title: Annotated[str | None, typer.Option("--title", "-t", help="The new title.")] = None,
    body: Annotated[str | None, typer.Option("--body", "-b", help="The new body.")] = None,
    body_file: Annotated[Path | None, BodyFileOption] = None,
    add_label: Annotated[
        list[str] | None, typer.Option("--add-label", help="A label to add (repeatable).")
    ] = None,
    remove_label: Annotated[
        list[str] | None, typer.Option("--remove-label", help="A label to remove (repeatable).")
    ] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Change an issue's title, body or labels. The body replaces the old one (GitHub: the
    parent and blocker lines Legion keeps in it stay). Not from inside a Legion session: a
    worker comments instead."""
    text = common.read_text_arg(body, body_file, "the body")
    if title is None and text is None and not add_label and not remove_label:
        raise InputError(
            "nothing to do: give --title, --body (or --body-file), --add-label or --remove-label"
        )
    if title is not None or text is not None:
        identity.require_person("rewrite an issue's title or body: comment instead")
    project, backends = common.backends(ctx)
    issue = backends.tracker.get_issue(identifier)
    if title is not None or text is not None:
        issue = backends.tracker.edit_issue(issue.identifier, title=title, body=text)
    if add_label or remove_label:
        issue = backends.tracker.update_labels(
            issue.identifier, add=add_label or (), remove=remove_label or ()
        )
    common.changed(project)
    if as_json:
        common.print_json(render.issue_json(issue))
    else:
        common.echo(f"{issue.identifier}: edited ({issue.title})")


def _close_or_reopen(ctx: typer.Context, identifier: str, closing: bool, as_json: bool) -> None:
    target = CLOSED if closing else REOPENED
    project, backends = common.backends(ctx)
    before = backends.tracker.get_issue(identifier)
    if (before.status is CLOSED) is closing:
        issue, line = before, f"{before.identifier}: already {'closed' if closing else 'open'}"
        if not closing:
            line += f" ({before.status.value})"
    else:
        issue = backends.tracker.set_status(before.identifier, target)
        common.changed(project)
        line = f"{issue.identifier}: {before.status.value} -> {issue.status.value}"
    if as_json:
        common.print_json(render.issue_json(issue))
    else:
        common.echo(line)


@app.command(epilog=common.example("legion issue close LEG-3"))
def close(
    ctx: typer.Context,
    identifier: str,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Close an issue: move it to Done (the tracker's own name for Done, from [statuses]; on
    GitHub the issue is closed). Legion starts no more workers on it. Closing a closed issue
    changes nothing."""
    _close_or_reopen(ctx, identifier, True, as_json)


@app.command(epilog=common.example("legion issue reopen LEG-3"))
def reopen(
    ctx: typer.Context,
    identifier: str,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Reopen a closed (Done) issue: move it back to Todo, where Legion plans it again. An
    issue that is not closed keeps its status."""
    _close_or_reopen(ctx, identifier, False, as_json)


@app.command(
    epilog=common.example("legion issue label LEG-3 --add worker-done --remove worker-active")
)
def label(
    ctx: typer.Context,
    identifier: str,
    add: Annotated[
        list[str] | None, typer.Option("--add", "-a", help="Label to add (repeatable).")
    ] = None,
    remove: Annotated[
        list[str] | None, typer.Option("--remove", "-r", help="Label to remove (repeatable).")
    ] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Add or remove labels. Adding a present label or removing an absent one is a no-op."""
    if not add and not remove:
        raise InputError("nothing to do: give --add LABEL and/or --remove LABEL")
    if any(label.strip().casefold() == "worker-done" for label in add or ()):
        common.refuse_unshipped()  # a worker's own `worker-done`, as `legion complete`
    project, backends = common.backends(ctx)
    issue = backends.tracker.update_labels(identifier, add=add or (), remove=remove or ())
    common.changed(project)
    if as_json:
        common.print_json(render.issue_json(issue))
    else:
        common.echo(f"{issue.identifier}: {', '.join(sorted(issue.labels)) or '(no labels)'}")


@app.command(
    epilog=common.example(
        "legion issue block LEG-5 --by LEG-3 --by LEG-4", "legion issue block LEG-5 --remove LEG-3"
    )
)
def block(
    ctx: typer.Context,
    identifier: str,
    by: Annotated[
        list[str] | None,
        typer.Option("--by", help="An issue it waits for, to add (repeatable)."),
    ] = None,
    remove: Annotated[
        list[str] | None,
        typer.Option("--remove", "-r", help="A blocker to remove (repeatable)."),
    ] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Say which issues an issue waits for: Legion starts no worker on it and does not move
    it while one of them is not Done. Adding a present blocker or removing an absent one is a
    no-op; a missing issue, the issue itself and a cycle are refused."""
    if not by and not remove:
        raise InputError("nothing to do: give --by ISSUE and/or --remove ISSUE")
    added = [normalize_identifier(name) for name in by or ()]
    removed = [normalize_identifier(name) for name in remove or ()]
    project, backends = common.backends(ctx)
    issue = backends.tracker.set_blocked_by(identifier, add=added, remove=removed)
    common.changed(project)
    if as_json:
        common.print_json(render.issue_json(issue))
    else:
        common.echo(f"{issue.identifier}: blocked by {', '.join(issue.blocked_by) or '(nothing)'}")


@app.command(
    epilog=common.example(
        'legion issue comment LEG-3 --body "Plan: 1. parse the flag 2. print each step"',
        "git log -1 --format=%B | legion issue comment LEG-3 --body-file -",
    )
)
def comment(
    ctx: typer.Context,
    identifier: str,
    body: Annotated[str | None, BodyOption] = None,
    body_file: Annotated[Path | None, BodyFileOption] = None,
    author: Annotated[
        str | None, typer.Option(help="Who is writing (default: you, or the worker).")
    ] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Add a comment to an issue."""
    text = common.read_text_arg(body, body_file, "the comment")
    if text is None:
        raise InputError("give the comment with --body TEXT or --body-file PATH")
    project, backends = common.backends(ctx)
    added = backends.tracker.add_comment(
        identifier,
        text,
        author=author or identity.default_author(),
        by_legion=identity.written_by_legion(),
    )
    common.changed(project)
    if as_json:
        common.print_json(render.comment_json(added))
    else:
        common.echo(f"{added.issue}: comment {added.id} added")


@app.command(epilog=common.example("legion issue comments LEG-3 --json"))
def comments(
    ctx: typer.Context,
    identifier: str,
    last: Annotated[
        int | None,
        typer.Option("--last", min=1, help="Only the latest N comments (read from the end)."),
    ] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """List an issue's comments, oldest first (in a session, at most its latest 500)."""
    _, backends = common.backends(ctx)
    found = backends.tracker.list_comments(identifier, newest=last)
    if as_json:
        common.print_json([render.comment_json(c) for c in found])
        return
    for item in found:
        common.echo(f"--- {item.author} at {item.created_at} (comment {item.id})")
        common.echo(item.body)
