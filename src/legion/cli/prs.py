"""`legion pr …`: pull requests on the configured forge."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from legion import plugins
from legion.cli import common, render
from legion.core.text import LOG_TAIL_BYTES, LOG_TAIL_LINES
from legion.errors import InputError
from legion.sessions import identity

app = typer.Typer(
    help="Open, review and merge pull requests.",
    no_args_is_help=True,
    epilog=common.example("legion pr create --issue LEG-3 --branch legion/leg-3", "legion pr list"),
)

RefArgument = typer.Argument(help="PR number (3 or #3) or issue identifier (its PR).")


@app.command(epilog=common.example("legion pr create --issue LEG-3 --branch legion/leg-3 --draft"))
def create(
    ctx: typer.Context,
    issue: Annotated[str, typer.Option("--issue", "-i", help="The issue the PR resolves.")],
    branch: Annotated[str, typer.Option("--branch", help="The branch with the work.")],
    title: Annotated[str | None, typer.Option(help="Title (default: the issue's).")] = None,
    body: Annotated[str | None, typer.Option("--body", "-b", help="Description.")] = None,
    body_file: Annotated[
        Path | None,
        typer.Option("--body-file", help="Read the description from a file (- for stdin)."),
    ] = None,
    draft: Annotated[bool, typer.Option("--draft", help="Open it as a draft.")] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Open a pull request for an issue's branch and print its number."""
    text = common.read_text_arg(body, body_file, "the description") or ""
    project, backends = common.backends(ctx)
    pr = backends.forge.create_pr(issue, branch, title=title, body=text, draft=draft)
    common.changed(project)
    if as_json:
        common.print_json(render.pr_json(pr))
    else:
        typer.echo(f"#{pr.number}")


@app.command("list", epilog=common.example("legion pr list", "legion pr list --json"))
def list_prs(ctx: typer.Context, as_json: Annotated[bool, common.JsonOption] = False) -> None:
    """List pull requests."""
    _, backends = common.backends(ctx)
    found = backends.forge.list_prs()
    if as_json:
        common.print_json([render.pr_json(pr) for pr in found])
    elif not found:
        common.info("No pull requests.")
    else:
        common.print_table(render.prs_table(found))


@app.command(epilog=common.example("legion pr view 2", "legion pr view LEG-3 --json"))
def view(
    ctx: typer.Context,
    ref: Annotated[str, RefArgument],
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Show a pull request and its reviews."""
    _, backends = common.backends(ctx)
    pr = backends.forge.get_pr(ref)
    if as_json:
        common.print_json(render.pr_json(pr))
    else:
        common.console().print(render.pr_detail(pr))


def _set_draft(ctx: typer.Context, ref: str, draft: bool, as_json: bool) -> None:
    project, backends = common.backends(ctx)
    pr = backends.forge.set_draft(ref, draft)
    common.changed(project)
    if as_json:
        common.print_json(render.pr_json(pr))
    else:
        typer.echo(f"#{pr.number}: {'draft' if pr.is_draft else 'ready for review'}")


@app.command(epilog=common.example("legion pr ready 2"))
def ready(
    ctx: typer.Context,
    ref: Annotated[str, RefArgument],
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Mark a draft pull request ready for review."""
    _set_draft(ctx, ref, False, as_json)


@app.command(epilog=common.example("legion pr draft LEG-3"))
def draft(
    ctx: typer.Context,
    ref: Annotated[str, RefArgument],
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Turn a pull request back into a draft."""
    _set_draft(ctx, ref, True, as_json)


@app.command(
    epilog=common.example(
        "legion pr review 2 --approve",
        'legion pr review 2 --request-changes --body "Add a test for the empty list."',
    )
)
def review(
    ctx: typer.Context,
    ref: Annotated[str, RefArgument],
    approve: Annotated[bool, typer.Option("--approve", help="Approve it.")] = False,
    request_changes: Annotated[
        bool, typer.Option("--request-changes", help="Ask for changes (needs --body).")
    ] = False,
    comment: Annotated[
        bool, typer.Option("--comment", help="Comment without a verdict (needs --body).")
    ] = False,
    body: Annotated[str | None, typer.Option("--body", "-b", help="The review text.")] = None,
    body_file: Annotated[
        Path | None, typer.Option("--body-file", help="Read the review from a file (- for stdin).")
    ] = None,
    author: Annotated[
        str | None, typer.Option(help="Reviewer (default: you, or the worker).")
    ] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Record a review. The latest approval or change request is the PR's review outcome."""
    chosen = [
        name
        for name, flag in (
            ("approved", approve),
            ("changes_requested", request_changes),
            ("commented", comment),
        )
        if flag
    ]
    if len(chosen) != 1:
        raise InputError("give exactly one of --approve, --request-changes, --comment")
    text = common.read_text_arg(body, body_file, "the review") or ""
    project, backends = common.backends(ctx)
    pr = backends.forge.add_review(
        ref, chosen[0], body=text, author=author or identity.default_author()
    )
    common.changed(project)
    outcome = chosen[0]
    if as_json:
        data = render.pr_json(pr)
        # The review just recorded (loaded in the transaction that added it); the PR's
        # resulting review outcome is `review`.
        data["recorded"] = render.review_json(pr.reviews[-1]) if pr.reviews else None
        common.print_json(data)
        return
    said = {"approved": "approved", "changes_requested": "changes requested"}.get(
        outcome, "comment recorded"
    )
    note = "" if outcome == pr.review.value else f"; review outcome still {pr.review.value}"
    typer.echo(f"#{pr.number}: {said}{note}")


@app.command(
    epilog=common.example(
        "legion pr checks LEG-3", "legion pr checks LEG-3 --log lint", "legion pr checks 2 --json"
    )
)
def checks(
    ctx: typer.Context,
    ref: Annotated[str, RefArgument],
    log: Annotated[
        str | None,
        typer.Option(
            "--log",
            metavar="NAME",
            help=f"Print the end of this check's log: its last {LOG_TAIL_LINES} lines, at most "
            f"{LOG_TAIL_BYTES // 1024} KiB.",
        ),
    ] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """List the CI checks on a pull request's head, or print the end of one check's log."""
    _, backends = common.backends(ctx)
    found = backends.forge.pr_checks(ref, log=log)
    if found.log is not None:
        if as_json:
            common.print_json(render.check_log_json(found))
            return
        if found.log.cut:
            common.info(
                f"(the end of {found.log.name!r}'s log on PR #{found.number}: earlier lines "
                "left out)",
                err=True,
            )
        text = found.log.text
        common.echo(text[:-1] if text.endswith("\n") else text)
        return
    if as_json:
        common.print_json([render.check_json(check) for check in found.checks])
    elif not found.checks:
        common.info(f"no checks: {found.note}" if found.note else f"PR #{found.number}: no checks")
    else:
        for line in render.check_lines(found.checks):
            common.echo(line)


@app.command(epilog=common.example("legion pr merge 2"))
def merge(
    ctx: typer.Context,
    ref: Annotated[str, RefArgument],
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Merge though its CI checks fail or run (a person's; logged)."
        ),
    ] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Merge a pull request into its base branch (a real git merge; conflicts are reported).
    Refused while any of its CI checks fails or runs, naming them, unless --force."""
    from legion.core.merge_gate import merge_refusal
    from legion.errors import ConflictError, NotPermittedError

    if force and identity.current().in_session:
        raise NotPermittedError("--force is a person's: a session merges only what passes")
    project, backends = common.backends(ctx)
    forced = None
    pinned = None
    if backends.relay is None:  # through the relay, its end refuses red work itself
        if project.settings.forge == plugins.DEFAULT_BACKEND:
            # The embedded forge's checks ran on the head a merge would land (a worker's
            # newest commits brought home first): the merge lands that head or nothing. A
            # hosted forge's checks are on its own head, which its merge expects.
            pinned = backends.forge.branch_head(ref)
        found = backends.forge.get_pr(ref)
        red = merge_refusal(
            found.number,
            [c.name for c in found.failing_checks],
            [c.name for c in found.pending_checks],
            person=True,
        )
        if red is not None and not force:
            raise ConflictError(red)
        forced = None if red is None else (found.issue or "-", red.split(" (")[0])
    pr = backends.forge.merge(ref, reviewed=pinned)
    if forced is not None:  # merged: a person's decision past red checks, by name
        common.logged(backends, forced[0], "pr_merge_forced", forced[1])
    common.changed(project)
    if as_json:
        common.print_json(render.pr_json(pr))
    else:
        common.echo(
            f"#{pr.number}: merged {pr.branch} into {pr.base} ({(pr.merge_commit or '')[:12]})"
        )
