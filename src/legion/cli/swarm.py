"""`legion status | reconcile | log | usage | feedback`: the swarm running itself (`legion start |
stop`: `legion.cli.start_stop`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer

from legion import plugins
from legion.cli import common, render
from legion.core.usage import total
from legion.daemon_link import hosts_controller
from legion.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from legion.core.decision_log import Logged
    from legion.services.swarm_status import StatusReport
    from legion.store.actionlog import ActionLog


# How long a command that runs a pass (or its dry run) waits for one already running.
WaitOption = typer.Option(
    "--wait",
    min=0,
    help="How many seconds to wait for a pass already running (the daemon's) to end.",
)


def reconcile(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be done; do nothing.")
    ] = False,
    wait: Annotated[float, WaitOption] = 120.0,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Carry out every mechanical action the decision table suggests, once, idempotently.

    With a daemon running, a worker's question goes to the controller's Oracle first; without
    one, straight to a human. While dispatch is paused, says so (on stderr) and why."""
    from legion.backends import open_workers
    from legion.reconcile import Reconciler
    from legion.sessions.pause import DispatchPause
    from legion.store.actionlog import ActionLog

    # The pass's writes are its actions, logged with what they were decided from.
    project, backends = common.backends(ctx, audited=False)
    workers = open_workers(project, backends)
    reconciler = Reconciler(
        project,
        backends.tracker,
        backends.forge,
        workers,
        ActionLog(backends.db),
        oracle=hosts_controller(project),  # a daemon runs a controller to ask
    )
    outcomes = reconciler.run(
        dry_run=dry_run, wait=wait, on_wait=lambda line: typer.echo(f"legion: {line}", err=True)
    )
    paused = DispatchPause(backends.db).reason()
    if paused is not None:
        common.echo(f"legion: {paused}", err=True)
    if as_json:
        common.print_json([o.to_json() for o in outcomes])
        return
    if not outcomes:
        typer.echo("Nothing to do.")
    for o in outcomes:
        common.echo(f"{o.issue}: {o.action}: {o.kind}" + (f" ({o.detail})" if o.detail else ""))


def log(
    ctx: typer.Context,
    lines: Annotated[
        int, typer.Option("--lines", "-n", min=1, max=100000, help="How many entries.")
    ] = 20,
    issue: Annotated[str | None, typer.Option("--issue", "-i", help="Only this issue.")] = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new entries until Ctrl-C.")
    ] = False,
    replay: Annotated[
        bool,
        typer.Option(
            "--replay",
            help="Run today's decision table over every decision the log kept, and list those "
            "it decides differently (exit 1 when there are any).",
        ),
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", help="With --replay: only entries from then on (an ISO date or time, UTC)."
        ),
    ] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """The action log: what Legion did, to which issue, and how it went (with --follow, then
    each new entry as it is written). With --follow --json, one JSON object per line. With
    --replay, the decisions today's table would make differently from the same inputs."""
    from legion.core.model import normalize_identifier
    from legion.store.actionlog import ActionLog, Entry

    if since is not None and not replay:
        raise InputError("--since goes with --replay (`legion log --replay --since 2026-11-01`)")
    if replay and follow:
        raise InputError("--replay and --follow do not go together")
    _, backends = common.backends(ctx)
    if replay:
        _replay(ActionLog(backends.db), _since(since), as_json=as_json)
        return
    # An identifier that names no issue is bad input, not an empty log.
    only = backends.tracker.get_issue(normalize_identifier(issue)).identifier if issue else None
    log = ActionLog(backends.db)
    entries = log.tail(lines, only)
    if as_json and not follow:
        common.print_json([entry.to_json() for entry in entries])
        return

    def show(found: Sequence[Entry]) -> None:
        for entry in found:
            if as_json:
                line = common.json_text(entry.to_json())
            else:
                detail = f"  {entry.said}" if entry.said else ""
                line = f"{entry.at}  {entry.issue:8}  {entry.action}: {entry.outcome}{detail}"
            common.echo(line)

    if not entries and not as_json:
        common.info(f"No actions logged{f' for {only}' if only else ''} yet.")
    show(entries)
    if follow:
        common.follow(
            lambda cursor: log.after(cursor, only),
            entries[-1].id if entries else 0,
            show,
            lambda entry: entry.id,
        )


def _replay(log: ActionLog, since: str | None, *, as_json: bool) -> None:
    """`legion log --replay`: exit 1 when today's table decides some entry differently."""
    from legion.core.decision_log import inputs_words, replay

    checked = 0

    def counted() -> Iterator[Logged]:
        nonlocal checked
        for entry in log.decisions(since):
            checked += 1
            yield entry

    differences = replay(counted())
    if as_json:
        common.print_json({"checked": checked, "different": [d.to_json() for d in differences]})
    else:
        for difference in differences:
            then, now = difference.entry.decided.verdict, difference.now
            common.echo(
                f"{difference.entry.at}  {difference.entry.issue:8}  #{difference.entry.entry_id}  "
                f"then {then.decision.action.value} (row {then.row}), "
                f"now {now.decision.action.value} (row {now.row})"
            )
            common.echo(f"    given: {inputs_words(difference.entry.decided.observation)}")
        common.info(
            f"{checked} decision{'' if checked == 1 else 's'} replayed: "
            + (
                "today's table decides each the same."
                if not differences
                else f"{len(differences)} decided differently today."
            )
        )
    if differences:
        raise typer.Exit(1)


def why(
    ctx: typer.Context,
    issue: Annotated[str, typer.Argument(help="The issue, e.g. LEG-3.")],
    wait: Annotated[float, WaitOption] = 120.0,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """What Legion will do with an issue now and why (the decision table's row and what it was
    given, and what the next pass would do through the WIP limit, the pause and the budgets),
    and what it did last and why."""
    from legion.core.decision_log import inputs_words
    from legion.services.why import why as explain_issue

    project, backends = common.backends(ctx)
    found = explain_issue(project, backends, issue, wait=wait)
    if as_json:
        common.print_json(found.to_json())
        return
    state = found.state
    common.echo(f"{state.issue.identifier}  {state.issue.title}  ({state.issue.status.value})")
    now = found.now
    if now is not None:
        note = f": {state.note}" if state.note else ""
        common.echo(f"now:       {state.decision.words}: {now.verdict.why}{note}")
        common.echo(f"given:     {inputs_words(now.observation)}")
    if found.next_pass is not None:
        planned = found.next_pass
        common.echo(
            f"next pass: {planned.kind}" + (f": {planned.detail}" if planned.detail else "")
        )
    last = found.last
    if last is None:
        common.echo("last:      no decision logged yet")
    else:
        common.echo(f"last:      {last.at}  {last.action}: {last.outcome}  {last.detail}")
        if last.decided is not None:
            common.echo(f"given:     {inputs_words(last.decided.observation)}")
            for said in last.decided.gates.words:
                common.echo(f"           {said}")
    for warning in found.warnings:
        common.echo(f"warning: {warning}", err=True)


def usage(
    ctx: typer.Context,
    issue: Annotated[str | None, typer.Option("--issue", "-i", help="Only this issue.")] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", help="Only responses from then on: an ISO date or time (UTC), 2026-11-26."
        ),
    ] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Tokens the model reported, as they passed through the daemon's model proxy: by issue,
    phase, runtime and model (the controller's on a line of its own)."""
    from legion.core.model import normalize_identifier
    from legion.proxy.ledger import UsageLedger

    project, backends = common.backends(ctx)
    only = backends.tracker.get_issue(normalize_identifier(issue)).identifier if issue else None
    rows = UsageLedger(backends.db).rows(issue=only, since=_since(since))
    prices = project.settings.prices
    costs = [prices[row.model].cost(row.used) if row.model in prices else None for row in rows]
    if as_json:
        common.print_json(
            [row.to_json() | {"cost": cost} for row, cost in zip(rows, costs, strict=True)]
        )
        return
    if not rows:
        typer.echo(
            f"No model usage recorded{f' for {only}' if only else ''} yet "
            "(it is recorded by the daemon's model proxy: `legion start`)."
        )
        return
    priced = any(cost is not None for cost in costs)
    typer.echo(
        f"{'ISSUE':8}  {'PHASE':10}  {'MODEL':24}  {'RESPONSES':>9}  {'INPUT':>10}  "
        f"{'OUTPUT':>9}  {'CACHE W':>9}  {'CACHE R':>10}  {'TOTAL':>11}"
        + (f"  {'COST':>10}" if priced else "")
    )
    for row, cost in zip(rows, costs, strict=True):
        money = "" if not priced else f"  {'-' if cost is None else f'{cost:,.4f}':>10}"
        common.echo(
            f"{row.issue or '-':8}  {row.mode:10}  {row.model[:24]:24}  {row.responses:>9,}  "
            f"{row.used.input:>10,}  {row.used.output:>9,}  {row.used.cache_write:>9,}  "
            f"{row.used.cache_read:>10,}  {row.used.total:>11,}{money}"
        )
    total = sum(row.used.total for row in rows)
    line = f"total: {total:,} tokens in {sum(row.responses for row in rows):,} responses"
    unread = sum(row.unread for row in rows)
    if unread:
        line += (
            f"; {unread:,} of them reported no usage the proxy could read "
            "(their tokens are not counted: see the daemon's log)"
        )
    if priced:
        unpriced = sorted(
            {row.model for row, cost in zip(rows, costs, strict=True) if cost is None}
        )
        line += f", cost {sum(cost for cost in costs if cost is not None):,.4f}"
        if unpriced:
            line += f" (no price for {', '.join(unpriced)}: not counted)"
    common.echo(line)


def _since(value: str | None) -> str | None:
    """`--since` as the ledger's time format (UTC, `...Z`); bad input is a one-line error."""
    if value is None:
        return None
    from datetime import UTC, datetime

    from legion.errors import InputError

    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"--since {value!r} is not an ISO date or time (e.g. 2026-11-26 or 2026-11-26T09:30)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    try:
        return when.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    except OverflowError:  # a time the zone shifts past year 1 or 9999
        raise InputError(f"--since {value!r} is out of range") from None


def feedback(
    ctx: typer.Context,
    issue: Annotated[str, typer.Argument(help="The issue waiting for you.")],
    text: Annotated[str, typer.Argument(help="Your answer.")],
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Answer a question a worker escalated: comments and adds user-feedback-given.

    Only an issue labelled user-input-needed is waiting for an answer; any other is refused.
    """
    from legion.reconcile.humans import answer_from_person

    project, backends = common.backends(ctx)
    updated, comment = answer_from_person(project, backends.tracker, issue, text)
    common.logged(backends, updated.identifier, "feedback", f"answered in comment {comment.id}")
    if as_json:
        data = render.issue_json(updated)
        data["comment"] = render.comment_json(comment)
        common.print_json(data)
        return
    common.echo(f"{updated.identifier}: answer recorded; Legion relays it to the worker")


def status(
    ctx: typer.Context,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """The daemon, the controller, the workers, WIP, whether dispatch is paused, the judgment
    queue, and the last actions."""
    from legion.backends import open_workers
    from legion.services.swarm_status import read_status

    project, backends = common.backends(ctx)
    report = read_status(project, backends, open_workers(project, backends))
    if as_json:
        common.print_json(report.to_json(render.usage_json))
        return
    _print_status(report)


def _print_status(report: StatusReport) -> None:
    pid, beat = report.daemon_pid, report.heartbeat_age_s
    starting = ", starting: no session starts until it serves" if not report.daemon_serving else ""
    typer.echo(
        f"daemon:     {'running (pid ' + str(pid) + ')' + starting if pid else 'not running'}"
        + (f", heartbeat {beat:.0f}s ago" if beat is not None else "")
    )
    typer.echo(f"controller: {report.controller_state} ({report.controller_runtime})")
    typer.echo(f"model:      {report.model_line}")
    if report.model_held is not None:
        common.echo(f"model:      HELD: {report.model_held}")
    common.echo(f"sandbox:    {report.sandbox_line}")
    if report.egress or report.egress_refused:
        common.echo(f"egress:     {report.egress_line}")
    for refused in report.egress_refused:
        common.echo(f"  refused   {refused.line()}")
    if report.fleet_line is not None:
        common.echo(f"hosts:      {report.fleet_line}")
    pause = report.pause
    if pause.reason is not None:
        common.echo(f"dispatch:   PAUSED since {pause.paused_at}: {pause.reason}")
    if report.unknown is not None:
        common.echo(f"workers:    unknown ({report.unknown})")
    code, limit = report.code_workers, report.wip_limit
    if code is not None:
        typer.echo(
            f"WIP:        {code} code worker(s) of {'unlimited' if limit is None else limit}"
        )
    from legion.services.swarm_status import shown_state

    for view in report.workers or []:
        phases = report.usage.get(view.record.issue)
        used = total(phases.values()).total if phases else 0
        tokens = "" if not used else f"  {used:,} tokens on the issue"
        # On a fleet of more than one host, the host each worker runs on.
        host = f"on {view.record.host:10} " if report.fleet_line is not None else ""
        common.echo(
            f"  {view.record.issue:8} {view.record.mode.value:10} "
            f"{shown_state(view.state, pid is not None):8} {host}{view.record.runtime:11} "
            f"{view.record.window}{tokens}"
        )
    if report.judgments:
        typer.echo("judgment queue:")
        for item in report.judgments:
            tries = f"{item.attempts} attempt{'' if item.attempts == 1 else 's'}"
            common.echo(
                f"  {item.issue:8} {item.kind.value:18} {item.state.value:9} "
                f"since {item.created_at} ({tries}): {item.reason}"
            )
    if report.kept_workspaces:
        typer.echo("kept workspaces of Done issues (`legion workspace clean --rescue`):")
        for kept in report.kept_workspaces:
            common.echo(f"  {kept.issue:8} {kept.reason}")
    if report.last_actions:
        typer.echo("last actions:")
        for entry in report.last_actions:
            data = entry.to_json()
            common.echo(
                f"  {data['created_at']}  {entry.issue:8} {entry.action}: {data['outcome']}"
            )


def skills_install(
    ctx: typer.Context,
    scope: Annotated[
        str, typer.Option(help="user (the CLI's config dir) or project (this repository).")
    ] = "user",
    runtime: Annotated[
        str,
        typer.Option(
            help=f"The agent CLI: {' or '.join(plugins.runtime_names())} (some: user scope only)."
        ),
    ] = plugins.DEFAULT_RUNTIME,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Put Legion's skills where Claude Code (or Codex) finds them."""
    from legion import skills

    if scope not in ("user", "project"):
        raise InputError(f"unknown scope {scope!r} (known: user, project)")
    name = plugins.runtime_aliases().get(runtime, runtime)
    if name not in plugins.runtime_names():
        known = ", ".join(plugins.runtime_names())
        raise InputError(f"unknown runtime {runtime!r} (known: {known})")
    plugin = plugins.runtime_plugin(name)
    if scope == "user":
        target = plugins.load(plugin.skills_dir)(os.environ)
    elif plugin.project_skills is None:
        raise InputError(
            f"{plugin.description} reads skills from its own home only: use --scope user"
        )
    else:
        target = common.project(ctx).root / plugin.project_skills
    written = skills.install(target)
    if as_json:
        common.print_json(
            {"scope": scope, "target": str(target), "files": [str(path) for path in written]}
        )
        return
    typer.echo(f"Installed {len(written)} skill files in {target}")
