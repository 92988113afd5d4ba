"""`legion escalate`: hand a question to a human, the Oracle's way out when the evidence does
not settle it (its other way out is `legion answer`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from legion.cli import common
from legion.errors import InputError
from legion.sessions import identity


def escalate(
    ctx: typer.Context,
    issue: Annotated[str, typer.Argument(help="The issue whose question needs a human.")],
    question: Annotated[
        str | None,
        typer.Option(
            "--question",
            help="What to ask (default: the blocked worker's pending question, with its options).",
        ),
    ] = None,
    reason: Annotated[
        str | None,
        typer.Option(
            "--reason", help="Why it needs a human: what the evidence says and leaves open."
        ),
    ] = None,
    reason_file: Annotated[
        Path | None,
        typer.Option("--reason-file", help="Read the reason from a file (- for stdin)."),
    ] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Ask a human: post the question (with why it needs one) and add user-input-needed.

    Idempotent: an issue already waiting for a human is left as it is."""
    from legion.backends import open_workers
    from legion.cli import render
    from legion.core.liveness import SessionState
    from legion.core.model import Label
    from legion.reconcile.humans import ask_human, escalation_comment

    why = common.read_text_arg(reason, reason_file, "the reason")
    project, backends = common.backends(ctx)
    tracker = backends.tracker
    found = tracker.get_issue(issue)
    identifier = found.identifier
    if Label.USER_INPUT_NEEDED.value in found.labels:
        if as_json:
            common.print_json(render.issue_json(found) | {"escalated": False})
        else:
            typer.echo(f"{identifier}: already waiting for a human; nothing changed")
        return
    blocked = [
        view
        for view in open_workers(project, backends).roster.views()
        if view.record.issue == identifier
        and view.state is SessionState.BLOCKED
        and view.question is not None
    ]
    if question is not None:
        if not question.strip():
            raise InputError("the question is empty")
        items: list[tuple[str, tuple[str, ...]]] = [(question.strip(), ())]
    elif blocked and blocked[0].question is not None:
        items = [(item.question, item.options) for item in blocked[0].question.items]
    else:
        raise InputError(
            f"{identifier} has no worker waiting on a question: say what to ask with --question"
        )
    runner, judge = identity.asker_and_judge()
    asker = runner
    if blocked:
        asker = f"the {blocked[0].record.mode.value} worker ({blocked[0].record.window})"
    note = ""
    if why is not None and why.strip():
        note = f"**Why it needs a human** ({judge}): {why.strip()}"
    body = escalation_comment(identifier, asker, items, note)
    comment, updated = ask_human(tracker, identifier, body, author=identity.default_author())
    common.logged(backends, identifier, "escalate", f"asked a human in comment {comment.id}")
    common.changed(project)
    if as_json:
        data = render.issue_json(updated) | {"escalated": True}
        data["comment"] = render.comment_json(comment)
        common.print_json(data)
        return
    typer.echo(f"{identifier}: question posted for a human (user-input-needed)")
