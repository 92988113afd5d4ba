"""A pass's worker starts: the facts admission weighs (`legion.core.admission`: the dispatch
pause, the WIP limit, the issue's token budget, ...), a human asked once a budget is spent, each
start without waiting, and, at the pass's end, every start collected at once, failed ones
counted toward the pause."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager

from legion.core.admission import Load, Reason, StartFacts, counts_toward_wip, refusal
from legion.core.budget import Spent, over_issue_budget
from legion.core.decision_log import Gates
from legion.core.marks import LEGION_AUTHOR
from legion.core.model import Label, Mode
from legion.core.usage import total
from legion.errors import (
    ConfigError,
    LegionError,
    NoRoomError,
    ToolMissingError,
    WorkerStartError,
)
from legion.proxy.budget import Allowances
from legion.reconcile.humans import ask_human
from legion.sessions import prompts
from legion.sessions.pause import DispatchPause
from legion.sessions.roster import WorkerRoster, WorkerView
from legion.store.actionlog import ActionLog, OutcomeKind
from legion.trackers.base import Tracker, since_legion_wrote
from legion.workspaces.setup import SetupPendingError

from .answers import budget_allowed, budget_question
from .context import PassContext
from .labels import resume_worker, start_worker
from .outcomes import Step, deferred, done

# What a session that cannot start raises (the CLI missing, Claude Code not set up, the process
# gone at once), as opposed to the tracker, a conflict, or tmux not answering (unknown): these
# count toward the dispatch pause.
START_FAILURES: tuple[type[LegionError], ...] = (ToolMissingError, ConfigError, WorkerStartError)
# The line tmux adds under a dead pane it keeps (remain-on-exit); it holds the time of death.
TMUX_DEAD_PANE = re.compile(r"^Pane is dead \(")


class Starts:
    """One pass's worker starts: the WIP count as workers start and close, the issues started,
    and a note for a start that is due (a human's answer to a question Legion asked itself)."""

    def __init__(
        self,
        ctx: PassContext,
        views: Sequence[WorkerView],
        *,
        wip_limit: int | None,
        token_budget: int | None,
        model_held: str | None = None,
        hosted: bool = True,
        await_starts: bool = True,
        capacity: int | None = None,
        draining: bool = False,
        known: Collection[str] = (),
    ) -> None:
        """`model_held`: why no model request may go now (`legion.proxy.limits.why_held`),
        which holds every start. `hosted`: whether a daemon runs to host the sessions started
        (none starts without one: `SessionSupervisor.require_daemon`). `await_starts`: whether
        `collect` waits for the pass's starts (off in the daemon, which follows them up between
        its ticks). `capacity`: how many sessions this host runs at once (`max_sessions`);
        `draining`: this host takes no new issue (`legion host drain`) but finishes those in
        `known` (the issues that ever had a worker)."""
        self.ctx = ctx
        self.await_starts = await_starts
        self.wip_limit = wip_limit
        self.token_budget = token_budget
        self.model_held = model_held
        self.hosted = hosted
        self.code_workers = sum(
            1 for v in views if v.state.is_live and counts_toward_wip(v.record.mode)
        )
        self.capacity = capacity
        self.sessions = sum(1 for v in views if v.state.is_live)
        self.draining = draining
        self.known = frozenset(known)
        self.started: list[str] = []
        self._notes: dict[str, str] = {}  # by issue; taken by the start it is for

    def closed(self, mode: Mode) -> None:
        """A live worker in `mode` was closed during the pass: its place counts no more."""
        self.sessions -= 1
        if counts_toward_wip(mode):
            self.code_workers -= 1

    @contextmanager
    def noted(self, issue: str, note: str) -> Iterator[None]:
        """Within, the issue's next start carries `note` in its prompt."""
        self._notes[issue] = note
        try:
            yield
        finally:
            self._notes.pop(issue, None)

    def load(self) -> Load:
        """The sessions running now against the WIP limit and the hosts' capacity."""
        return Load(
            code_workers=self.code_workers,
            sessions=self.sessions,
            wip_limit=self.wip_limit,
            capacity=self.capacity,
            in_fleet=self.ctx.workers.in_fleet,
        )

    def gates(self) -> Gates:
        """What this pass's admission sees now, kept with each action it carries out."""
        return Gates(
            paused=self.ctx.guard.paused,
            model_held=self.model_held,
            code_workers=self.code_workers,
            wip_limit=self.wip_limit,
            sessions=self.sessions,
            capacity=self.capacity,
            draining=self.draining,
        )

    def blocked(self, issue: str, mode: Mode) -> Step | None:
        """Why no worker in `mode` may start on `issue` now (`legion.core.admission`, on the
        pass's facts: the pause, a hold, the WIP limit, capacity, a drain, the issue's token
        budget, a daemon to host it), or None. A spent budget asks a human, once. Actions that
        clear labels before a start ask this first: the labels say which worker is due, for
        when it can start, and for whoever answers a budget question."""
        facts = StartFacts(
            issue=issue,
            mode=mode,
            paused=self.ctx.guard.paused is not None,
            model_held=self.model_held,
            load=self.load(),
            draining=self.draining and issue not in self.known,
            budget_spent=self.budget_spent(issue),
            hosted=self.hosted,
        )
        found = refusal(facts)
        if found is None:
            return None
        if found.reason is Reason.BUDGET and facts.budget_spent is not None:
            return self.ask_about_budget(facts.budget_spent, found.detail)
        return deferred(found.detail)

    def plan(self, issue: str, mode: Mode) -> Step:
        """A dry run's start: what `start` would do, changing nothing but the pass's own count
        (a planned worker takes its place toward the WIP limit, as a started one would)."""
        blocked = self.blocked(issue, mode)
        if blocked is not None:
            return blocked
        waits = self.ctx.workers.setup.waits(issue)
        if waits is not None:
            return deferred(waits)
        self.sessions += 1
        if counts_toward_wip(mode):
            self.code_workers += 1
        return Step(OutcomeKind.PLANNED, f"{mode.value} worker")

    def start(self, issue: str, mode: Mode, prompt: str | None = None) -> Step:
        """Start `mode`'s worker on `issue` (its session resumed with `prompt`, when given)
        unless `blocked`; the pass collects it at its end (`collect`)."""
        blocked = self.blocked(issue, mode)
        if blocked is not None:
            return blocked
        workers, tracker = self.ctx.workers, self.ctx.tracker
        note = self._notes.pop(issue, None)
        if note is not None:
            prompt = prompts.with_note(prompt or workers.worker_prompt(issue, mode), note)
        # Started without waiting: the pass collects every start at its end, in parallel.
        try:
            if prompt is None:
                view = start_worker(workers, tracker, issue, mode, wait=False)
            else:
                view = resume_worker(workers, tracker, issue, mode, prompt, wait=False)
        except (NoRoomError, SetupPendingError) as exc:
            return deferred(str(exc))
        except START_FAILURES as exc:
            self._start_failed(str(exc))
            raise
        self.started.append(issue)
        self.sessions += 1
        if counts_toward_wip(mode):
            self.code_workers += 1
        return done(f"{mode.value} worker in {view.record.window}")

    def budget_spent(self, issue: str) -> Spent | None:
        """The issue's spend once its workers used its token budget (a human's answer to a
        budget question allows one budget more than was used then), else None. What the answer
        allowed is written down for the model proxy, which refuses the issue's requests past
        it."""
        budget = self.token_budget
        if budget is None:
            return None
        used = total(self.ctx.workers.roster.usage(issue).get(issue, {}).values()).total
        if used < budget:
            return None
        allowed = budget_allowed(since_legion_wrote(self.ctx.tracker, issue), budget)
        if allowed > budget and not self.ctx.dry_run:
            Allowances(self.ctx.log.db).set(issue, allowed)
        return over_issue_budget(issue, used, budget, allowed)

    def ask_about_budget(self, spent: Spent, detail: str) -> Step:
        """No worker starts on an issue whose budget is spent, and a human is asked, once."""
        if self.ctx.dry_run:
            return Step(OutcomeKind.PLANNED, detail)
        if self.token_budget is None or not ask_about_budget(
            self.ctx.tracker, spent, self.token_budget
        ):
            return deferred(f"{detail}; a human decides")
        return done(f"{detail}: asked a human")

    def collect(self) -> Step | None:
        """Wait for the workers this pass started, and count their starts toward the pause;
        when the pass does not wait (`await_starts` off: the daemon follows them up between
        its ticks, `legion.daemon.start_followup_step`), only leave them watched."""
        if not self.started or not self.await_starts:
            return None
        failures = self.ctx.workers.starts.await_starts()
        failed = {issue for issue, _ in failures}
        begun = [issue for issue in self.started if issue not in failed]
        paused = settle_starts(
            self.ctx.pause, self.ctx.workers.roster, self.ctx.guard.record, begun, failures
        )
        if paused is not None:
            self.ctx.guard.paused = paused
        return None

    def _start_failed(self, cause: str) -> None:
        reason = count_failed_start(self.ctx.pause, self.ctx.guard.record, cause)
        if reason is not None:
            self.ctx.guard.paused = reason


def ask_about_budget(tracker: Tracker, spent: Spent, budget: int) -> bool:
    """Ask a human, once, whether the issue may spend more; False when a human is asked
    already (the question stands until answered)."""
    issue = spent.issue
    if Label.USER_INPUT_NEEDED.value in tracker.get_issue(issue).labels:
        return False
    question = budget_question(issue, spent.used, spent.allowed, budget)
    ask_human(tracker, issue, question, author=LEGION_AUTHOR)
    return True


# Where an outcome goes: a pass's guard (its outcomes and the action log), or the log alone.
Record = Callable[[str, str, OutcomeKind, str], None]


def log_record(log: ActionLog) -> Record:
    """A `Record` into the action log alone (a daemon step, outside any pass)."""

    def record(issue: str, action: str, kind: OutcomeKind, detail: str) -> None:
        log.append(issue, action, kind, detail)

    return record


def settle_starts(
    pause: DispatchPause,
    roster: WorkerRoster,
    record: Record,
    begun: Sequence[str],
    failures: Sequence[tuple[str, str]],
) -> str | None:
    """What follows once starts are seen through: a worker that began breaks the streak of
    failed starts; each that died is logged with its last words and counted toward the
    pause. Returns the pause line when these failures paused dispatch."""
    if begun:
        pause.start_succeeded()
    paused = None
    for issue, reported in failures:
        why = exit_line(roster, issue) or reported
        record(issue, "worker_start", OutcomeKind.FAILED, why)
        hint = f" (`legion peek {issue}` shows its last screen)"
        paused = count_failed_start(pause, record, why, hint) or paused
    return paused


# What to check when a session's CLI could not reach the model though a credential was found
# (a key refused, a login expired).
CREDENTIAL_HINT = "check the key `legion start` runs with, or your CLI's login: `legion doctor`"


def hold_unreachable(pause: DispatchPause, record: Record, why: str, fix: str) -> str | None:
    """A session's CLI could not reach the model (`why`, its words): that does not mend itself
    (a key or login to fix), so dispatch pauses at once, as for a credential a tracker refused,
    with how to fix it; the pause line, logged, when this paused it."""
    reason = pause.hold(
        f"dispatch paused: {why} ({fix}); once fixed, start Legion again "
        "(`legion stop`, `legion start`)"
    )
    if reason is not None:
        record("-", "pause_dispatch", OutcomeKind.FAILED, reason)
    return reason


def count_failed_start(
    pause: DispatchPause, record: Record, cause: str, hint: str = ""
) -> str | None:
    """Count a start that failed toward the pause; the pause line, logged, when it paused."""
    reason = pause.start_failed(cause, hint)
    if reason is not None:
        record("-", "pause_dispatch", OutcomeKind.FAILED, reason)
    return reason


def exit_line(roster: WorkerRoster, issue: str) -> str | None:
    """What a worker that exited at once said last, from its dead pane (kept for `peek`),
    passing over tmux's own "Pane is dead (status …, <time>)" line."""
    try:
        _, screen = roster.peek(issue, lines=60)
    except LegionError:
        return None
    said = [line.strip() for line in screen.splitlines() if line.strip()]
    said = [line for line in said if not TMUX_DEAD_PANE.match(line)]
    return f"the worker exited as it started: {said[-1]}" if said else None
