"""One reconcile pass (`_Pass`) and the reconciler that runs passes under its lock."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from contextlib import suppress
from functools import partial

from legion import prompts
from legion.actionlog import ActionLog, OutcomeKind
from legion.config import Project
from legion.core import backoff
from legion.core.decide import Action, Decision, due_after_answer
from legion.core.liveness import SessionState, finishing
from legion.core.model import Label, Mode, Status
from legion.core.usage import total
from legion.errors import (
    ConfigError,
    LegionError,
    ToolMissingError,
    WorkerStartError,
)
from legion.faults import fault_point
from legion.feedback import ask_human, escalation_comment
from legion.forges.base import Forge
from legion.judgments import JudgmentKind, JudgmentQueue, judgment_needs
from legion.locking import LOCK_TIMEOUT_S, exclusive
from legion.pause import DispatchPause
from legion.sessions.roster import WorkerView
from legion.sessions.workers import WorkerManager
from legion.state import IssueState, KnownLiveWorkers, Snapshot, observe
from legion.trackers.base import Issue, Tracker
from legion.workspaces.base import Workspaces
from legion.workspaces.sweep import sweep_done

from .answers import (
    answer_in,
    budget_allowed,
    budget_question,
    legion_asked,
    restarts_question,
)
from .guard import PassGuard, Unknown
from .labels import answer_worker, resume_worker, start_worker
from .outcomes import Outcome, Step, deferred, done, observed_state

LEGION_AUTHOR = "legion"

# A worker that said it is done but is still finishing its last message (`core.liveness`) is
# looked at again this soon.
FINISHING_RETRY_S = 0.5
# Later phases first: finishing work in flight beats starting new work.
PRIORITY: tuple[Action, ...] = (
    Action.RELAY_USER_FEEDBACK,
    Action.DISPATCH_FINISHER,
    Action.TRANSITION_TO_RETRO,
    Action.RESUME_IMPLEMENTER_FOR_RETRO,
    Action.RESUME_IMPLEMENTER_FOR_CHANGES,
    Action.RESUME_IMPLEMENTER_FOR_CHECKS,
    Action.TRANSITION_TO_NEEDS_REVIEW,
    Action.DISPATCH_REVIEWER,
    Action.REMOVE_WORKER_ACTIVE_AND_REDISPATCH,
    Action.REMOVE_STALE_WORKER_DONE,
    Action.TRANSITION_TO_IN_PROGRESS,
    Action.DISPATCH_IMPLEMENTER,
    Action.TRANSITION_TO_TODO,
    Action.DISPATCH_PLANNER,
    Action.DISPATCH_ARCHITECT,
)
# Too many redispatches of one issue in this window means its worker keeps dying: ask a human.
REDISPATCH_LIMIT = 3
REDISPATCH_WINDOW_S = 15 * 60
# The action logged when Legion asks a human about a worker that keeps dying: restarts before
# it do not count toward the limit (an action's name, never a detail's text, is what counts).
ASKED_ABOUT_RESTARTS = "ask_human_about_restarts"
# What a session that cannot start raises (the CLI missing, Claude Code not set up, the process
# gone at once), as opposed to the tracker, a conflict, or tmux not answering (unknown): these
# count toward the dispatch pause.
START_FAILURES: tuple[type[LegionError], ...] = (ToolMissingError, ConfigError, WorkerStartError)
# The line tmux adds under a dead pane it keeps (remain-on-exit); it holds the time of death.
TMUX_DEAD_PANE = re.compile(r"^Pane is dead \(")


def counts_toward_wip(mode: Mode) -> bool:
    """Reviewers are short-lived and exempt; every other worker writes code or plans."""
    return mode is not Mode.REVIEW


class Reconciler:
    """Runs passes for one project.

    `oracle`: whether a controller takes blocked workers' questions (the daemon runs one). With
    it, a blocked worker becomes an `oracle` item of the judgment queue, and only goes straight to
    a human when the controller has not answered or escalated it within `oracle_timeout` seconds
    (default: the `stale_after` setting), or ended a turn after receiving it without doing
    either. Without it (no daemon), the question goes straight to a human.
    """

    def __init__(
        self,
        project: Project,
        tracker: Tracker,
        forge: Forge,
        workers: WorkerManager,
        log: ActionLog,
        *,
        oracle: bool = False,
        oracle_timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        workspaces: Workspaces | None = None,
    ) -> None:
        """`workspaces`: where Done issues' workspaces are swept from (the project's, when
        none is given)."""
        from legion.backends import open_workspaces

        self.project = project
        self.tracker = tracker
        self.forge = forge
        self.workers = workers
        self.workspaces = open_workspaces(project) if workspaces is None else workspaces
        self.log = log
        self.wip_limit = project.settings.wip_limit
        self.token_budget = project.settings.token_budget
        self.judgments = JudgmentQueue(log.db)
        self.pause = DispatchPause(log.db)
        self.oracle = oracle
        self.oracle_timeout = (
            project.settings.stale_after if oracle_timeout is None else oracle_timeout
        )
        # A tracker or forge that said "rate limited, until ..." to the pass's reads: no pass
        # before then. A step of one issue that failed holds back only that issue (`held`).
        self.quiet_until = 0.0
        self.clock = clock
        self.held: dict[str, backoff.Held] = {}

    def quiet_for(self) -> float:
        """Seconds until a rate-limited backend may be asked again (0 when it may now)."""
        return max(0.0, self.quiet_until - time.monotonic())

    def run(
        self,
        *,
        dry_run: bool = False,
        wait: float = LOCK_TIMEOUT_S,
        on_wait: Callable[[str], None] | None = None,
    ) -> list[Outcome]:
        """One pass. Another pass in progress is waited for, up to `wait` seconds (`on_wait`
        is told once whom it waits for); then ConflictError, naming the holder."""
        lock = self.project.state_dir / "reconcile.lock"
        with exclusive(lock, timeout=wait, on_wait=on_wait):
            return _Pass(self, dry_run).run()


class _Pass:
    """One reconcile pass; holds what it has observed and the WIP count as it changes."""

    def __init__(self, owner: Reconciler, dry_run: bool) -> None:
        self.o = owner
        self.dry_run = dry_run
        self.guard = PassGuard(owner, dry_run)
        self.views: list[WorkerView] = []
        self.code_workers = 0
        self.started: list[str] = []
        # A human's answer to a question Legion asked itself, for the prompt of the worker that
        # is due (by issue); taken by the start it is for.
        self.notes: dict[str, str] = {}

    def refresh(self) -> None:
        self.views = self.guard.observed("workers", self.o.workers.roster.views)
        self.code_workers = sum(
            1 for v in self.views if v.state.is_live and counts_toward_wip(v.record.mode)
        )

    def views_of(self, issue: str) -> list[WorkerView]:
        return [view for view in self.views if view.record.issue == issue]

    def wip_full(self, mode: Mode) -> bool:
        limit = self.o.wip_limit
        return limit is not None and counts_toward_wip(mode) and self.code_workers >= limit

    # -- the pass ------------------------------------------------------------------------------

    def run(self) -> list[Outcome]:
        with suppress(Unknown):
            self._run()
        return self.guard.outcomes

    def _run(self) -> None:
        self.guard.paused = self.guard.observed("the dispatch pause", self.o.pause.reason)
        self.refresh()
        listed = self.guard.observed("issues", self.o.tracker.list_issues)
        issues = {issue.identifier: issue for issue in listed}
        before = len(self.guard.outcomes)
        self.retire_finished(issues)
        self.route_blocked(issues)
        self.refresh()
        live = {view.record.issue for view in self.views if view.state.is_live}
        # The issues are read again only when retiring or routing wrote to some: on a real
        # tracker every read is a request against an hourly budget.
        fresh = None if len(self.guard.outcomes) > before else listed
        snapshot: Snapshot = self.guard.observed(
            "issues",
            lambda: observe(
                self.o.project.settings.project_id,
                self.o.tracker,
                self.o.forge,
                KnownLiveWorkers(live, self.o.workers.roster.latest_modes()),
                issues=fresh,
                opt_in=self.o.project.settings.backlog_opt_in_labels,
            ),
        )
        for error in snapshot.errors:
            self.guard.failed("-", "observe", error, "pull requests unknown: ")
        order = {action: index for index, action in enumerate(PRIORITY)}
        todo = [s for s in snapshot.issues if s.decision.action.is_mechanical]
        todo.sort(key=lambda s: (order.get(s.decision.action, len(order)), s.issue.identifier))
        for state in todo:
            self.execute(state)
        self.guard.guarded("-", "worker_start", self.collect_starts, plan=False)
        self.guard.guarded(
            "-", "judgment_queue", partial(self.sync_judgments, snapshot), plan=False
        )
        done = {s.issue.identifier for s in snapshot.issues if s.issue.status is Status.DONE}
        self.guard.guarded("-", "sweep_workspaces", partial(self.sweep, done), plan=False)

    def retire_finished(self, issues: dict[str, Issue]) -> None:
        """Close the windows of workers that are done: idle with `worker-active` gone, or whose
        issue is closed; forget dead workers whose issue no longer expects one."""
        for view in self.views:
            issue = issues.get(view.record.issue)
            active = issue is not None and Label.WORKER_ACTIVE.value in issue.labels
            closed = issue is None or issue.status is Status.DONE
            finished = view.state is SessionState.IDLE and (not active or closed)
            forgotten = view.state is SessionState.DEAD and (not active or closed)
            if finished or forgotten:
                what = f"{'finished' if finished else 'dead'}: {view.record.window}"
                self.guard.guarded(
                    view.record.issue,
                    "retire_worker",
                    partial(self._retire, view, what),
                    detail=what,
                )

    def _retire(self, view: WorkerView, what: str) -> Step:
        self.o.workers.retire(view)
        return done(what)

    # -- questions -----------------------------------------------------------------------------

    def route_blocked(self, issues: dict[str, Issue]) -> None:
        """Workers waiting on a question they asked: the controller's Oracle takes them (see
        `sync_judgments`); a human gets them when no controller can, or it did not in time."""
        for view in self.views:
            if view.state is not SessionState.BLOCKED or view.question is None:
                continue
            issue = issues.get(view.record.issue)
            if issue is None:
                continue
            if {Label.USER_INPUT_NEEDED.value, Label.USER_FEEDBACK_GIVEN.value} & issue.labels:
                continue  # a human owns it already
            self.guard.guarded(
                issue.identifier,
                "escalate_question",
                partial(self._route, view, issue.identifier),
                plan=False,
                state=observed_state(issue, None, "escalate_question"),
            )

    def _route(self, view: WorkerView, issue: str) -> Step | None:
        assert view.question is not None
        if not self.o.oracle:
            note = "(No controller is running to research it, so it comes to you directly.)"
            return self._escalate(view, issue, note)
        item = self.o.judgments.open_item(issue, JudgmentKind.ORACLE)
        if item is None or item.ref != view.question.tool_use_id:
            return None  # new: queued for the controller at the end of the pass
        if item.handled_at is not None:
            why = "the controller ended its turn without answering or escalating it"
        elif item.age(time.time()) > self.o.oracle_timeout:
            why = f"the controller did not take it within {self.o.oracle_timeout:g} s"
        else:
            return None  # the controller has it
        note = f"(Legion's Oracle could not settle it: {why}.)"
        result = self._escalate(view, issue, note)
        closed = f"escalated to a human: {why}"
        if not self.dry_run and self.o.judgments.close(item.id, closed):
            self.guard.record(issue, "close_judgment", OutcomeKind.DONE, f"{item.kind}: {closed}")
        return result

    def _escalate(self, view: WorkerView, issue: str, note: str) -> Step:
        if self.dry_run:
            return Step(OutcomeKind.PLANNED, "post the question for a human")
        assert view.question is not None
        items = [(item.question, item.options) for item in view.question.items]
        asker = f"the {view.record.mode.value} worker ({view.record.window})"
        body = escalation_comment(issue, asker, items, note)
        ask_human(self.o.tracker, issue, body, author=LEGION_AUTHOR)
        return done("question posted, user-input-needed added")

    def sync_judgments(self, snapshot: Snapshot) -> Step | None:
        """Open an item for each new need of the controller's judgment; close those whose need
        is gone. Blocked workers become `oracle` items only when a controller takes them."""
        if self.dry_run:
            return None
        needs = judgment_needs(snapshot.issues, self.views)
        if not self.o.oracle:
            needs = [need for need in needs if need.kind is not JudgmentKind.ORACLE]
        known = set(JudgmentKind)
        if snapshot.warnings:
            known.discard(JudgmentKind.INVESTIGATE_NO_PR)  # the forge did not answer
        result = self.o.judgments.sync(needs, known)
        for item in result.closed:
            self.guard.record(
                item.issue, "close_judgment", OutcomeKind.DONE, f"{item.kind}: {item.closed_reason}"
            )
        for item in result.opened:
            self.guard.record(
                item.issue, "queue_judgment", OutcomeKind.DONE, f"{item.kind}: {item.reason}"
            )
        return None

    # -- starting workers ----------------------------------------------------------------------

    def start_failed(self, cause: str, hint: str = "") -> None:
        reason = self.o.pause.start_failed(cause, hint)
        if reason is not None:
            self.guard.paused = reason
            self.guard.record("-", "pause_dispatch", OutcomeKind.FAILED, reason)

    def cannot_start(self, mode: Mode) -> Step | None:
        """Why a worker in `mode` cannot start now (deferred), or None when it can."""
        if self.guard.paused is not None:
            return deferred("dispatch paused (`legion status` says why)")
        if self.wip_full(mode):
            return deferred(f"WIP limit {self.o.wip_limit} reached")
        return None

    def blocked(self, issue: str, mode: Mode) -> Step | None:
        """Why no worker in `mode` may start on `issue` now (WIP limit, pause, or its token
        budget: a human is then asked), or None. Actions that clear labels before a start
        ask this first: the labels say which worker is due, for when it can start, and for
        whoever answers a budget question."""
        return self.cannot_start(mode) or self.over_budget(issue)

    def _start(self, issue: str, mode: Mode, prompt: str | None = None) -> Step:
        blocked = self.blocked(issue, mode)
        if blocked is not None:
            return blocked
        note = self.notes.pop(issue, None)
        if note is not None:
            prompt = prompts.with_note(prompt or self.o.workers.worker_prompt(issue, mode), note)
        # Started without waiting: the pass collects every start at its end, in parallel.
        try:
            if prompt is None:
                view = start_worker(self.o.workers, self.o.tracker, issue, mode, wait=False)
            else:
                view = resume_worker(
                    self.o.workers, self.o.tracker, issue, mode, prompt, wait=False
                )
        except START_FAILURES as exc:
            self.start_failed(str(exc))
            raise
        self.started.append(issue)
        if counts_toward_wip(mode):
            self.code_workers += 1
        return done(f"{mode.value} worker in {view.record.window}")

    def over_budget(self, issue: str) -> Step | None:
        """None while the issue's workers have used less than its token budget (a human's
        answer to a budget question allows one budget more than was used then); else no
        worker starts, and a human is asked, once."""
        budget = self.o.token_budget
        if budget is None:
            return None
        used = total(self.o.workers.roster.usage(issue).get(issue, {}).values()).total
        if used < budget:
            return None
        allowed = budget_allowed(self.o.tracker.list_comments(issue), budget)
        if used < allowed:
            return None
        if self.dry_run:
            return Step(OutcomeKind.PLANNED, f"token budget spent ({used:,} of {allowed:,})")
        found = self.o.tracker.get_issue(issue)
        if Label.USER_INPUT_NEEDED.value in found.labels:
            return deferred(f"token budget spent ({used:,} of {allowed:,}); a human decides")
        question = budget_question(issue, used, allowed, budget)
        ask_human(self.o.tracker, issue, question, author=LEGION_AUTHOR)
        return done(f"token budget spent ({used:,} of {allowed:,}): asked a human")

    def collect_starts(self) -> Step | None:
        """Wait for the workers this pass started; count their starts toward the pause."""
        if not self.started:
            return None
        failures = self.o.workers.starts.await_starts()
        failed = {issue for issue, _ in failures}
        if any(issue not in failed for issue in self.started):
            self.o.pause.start_succeeded()
        for issue, reported in failures:
            why = self._exit_line(issue) or reported
            self.guard.record(issue, "worker_start", OutcomeKind.FAILED, why)
            self.start_failed(why, f" (`legion peek {issue}` shows its last screen)")
        return None

    def _exit_line(self, issue: str) -> str | None:
        """What a worker that exited at once said last, from its dead pane (kept for `peek`),
        passing over tmux's own "Pane is dead (status …, <time>)" line."""
        try:
            _, screen = self.o.workers.roster.peek(issue, lines=60)
        except LegionError:
            return None
        said = [line.strip() for line in screen.splitlines() if line.strip()]
        said = [line for line in said if not TMUX_DEAD_PANE.match(line)]
        return f"the worker exited as it started: {said[-1]}" if said else None

    # -- actions -------------------------------------------------------------------------------

    def execute(self, state: IssueState) -> None:
        decision = state.decision
        issue = state.issue.identifier
        handler = self.handler(decision.action)
        self.guard.guarded(
            issue,
            decision.action.value,
            lambda: handler(state, decision),
            state=observed_state(state.issue, state.pr, decision.action.value),
        )

    def handler(self, action: Action) -> Callable[[IssueState, Decision], Step]:
        handlers: dict[Action, Callable[[IssueState, Decision], Step]] = {
            Action.TRANSITION_TO_TODO: self.transition,
            Action.TRANSITION_TO_IN_PROGRESS: self.transition,
            Action.TRANSITION_TO_NEEDS_REVIEW: self.transition,
            Action.TRANSITION_TO_RETRO: self.transition,
            Action.DISPATCH_FINISHER: self.transition,
            Action.RESUME_IMPLEMENTER_FOR_CHANGES: self.resume_for_changes,
            Action.RESUME_IMPLEMENTER_FOR_CHECKS: self.resume_for_checks,
            Action.RELAY_USER_FEEDBACK: self.relay_feedback,
            Action.REMOVE_WORKER_ACTIVE_AND_REDISPATCH: self.redispatch,
            Action.REMOVE_STALE_WORKER_DONE: self.remove_stale_done,
        }
        return handlers.get(action, self.dispatch)

    def _clear_finished_workers(self, issue: str) -> Step | None:
        """Close the issue's live workers before the next mode starts; None when done, else why
        not yet (a worker that said it is done may still be finishing its last message)."""
        for view in self.views_of(issue):
            if not view.state.is_live:
                continue
            if finishing(view.state, view.last_activity, time.time()):
                return deferred(
                    f"{view.record.window} is finishing its turn", retry_after=FINISHING_RETRY_S
                )
            self.o.workers.retire(view)
            if counts_toward_wip(view.record.mode):
                self.code_workers -= 1
        return None

    def transition(self, state: IssueState, decision: Decision) -> Step:
        issue = state.issue.identifier
        assert decision.mode is not None
        target = decision.action.target_status
        waiting = self._clear_finished_workers(issue)
        if waiting is not None:
            return waiting
        if target is None:
            # The finisher: nothing but its start follows from Retro + worker-done, so change
            # nothing until it can start (clearing worker-done would send Retro back to retro).
            blocked = self.blocked(issue, decision.mode)
            if blocked is not None:
                return blocked
        # `worker-done` goes before the status moves: a crash between the two then runs the
        # finished mode again (workers are idempotent), where the other order would read the
        # old mode's `worker-done` as the new one's and skip a phase. A move that fails puts
        # the labels back, leaving the issue as it was.
        labels = [Label.WORKER_DONE.value, Label.WORKER_ACTIVE.value]
        self.o.tracker.update_labels(issue, remove=labels)
        fault_point("transition_labels_cleared")
        if target is not None:
            try:
                self.o.tracker.set_status(issue, target)
            except LegionError:
                with suppress(LegionError):
                    cleared = [label for label in labels if label in state.issue.labels]
                    self.o.tracker.update_labels(issue, add=cleared)
                raise
            fault_point("transition_status_moved")
        prompt = None
        if decision.action is Action.DISPATCH_FINISHER and state.pr and state.pr.failing_checks:
            first = self.o.workers.worker_prompt(issue, decision.mode)
            prompt = prompts.finish_with_failing_checks(first, state.pr)
        started = self._start(issue, decision.mode, prompt)
        if target is None:
            return started
        # The move is done; a deferred start is picked up by the new status's dispatch row.
        later = "deferred: " if started.kind is OutcomeKind.DEFERRED else ""
        return done(f"moved to {target.value}; {later}{started.detail}")

    def dispatch(self, state: IssueState, decision: Decision) -> Step:
        assert decision.mode is not None
        return self._start(state.issue.identifier, decision.mode)

    def resume_for_changes(self, state: IssueState, decision: Decision) -> Step:
        """The reviewer requested changes: resume the implementer's session with them."""
        pr = state.pr
        return self._resume_implementer(
            state.issue.identifier, lambda first: prompts.requested_changes(first, pr)
        )

    def resume_for_checks(self, state: IssueState, decision: Decision) -> Step:
        """The reviewer approved but CI fails: resume the implementer's session with each
        failing check and its log link."""
        pr = state.pr
        assert pr is not None  # the table decides this only for a PR with failing checks
        started = self._resume_implementer(
            state.issue.identifier, lambda first: prompts.fix_failing_checks(first, pr)
        )
        names = ", ".join(check.name for check in pr.failing_checks)
        return Step(started.kind, f"failing: {names}; {started.detail}", started.retry_after)

    def _resume_implementer(self, issue: str, follow_up: Callable[[str], str]) -> Step:
        """Resume the implementer's session with a follow-up to its first prompt. It stops
        without `worker-done` (`completion_labels`), so the next pass sends the work back to
        the reviewer; the finished worker's window goes first, and nothing is cleared while
        no worker may start."""
        waiting = self._clear_finished_workers(issue)
        if waiting is not None:
            return waiting
        blocked = self.blocked(issue, Mode.IMPLEMENT)
        if blocked is not None:
            return blocked
        prompt = follow_up(self.o.workers.worker_prompt(issue, Mode.IMPLEMENT))
        self.o.tracker.update_labels(issue, remove=[Label.WORKER_DONE.value])
        return self._start(issue, Mode.IMPLEMENT, prompt)

    def _latest_mode(self, issue: str, fallback: Mode | None) -> Mode | None:
        """The mode of the issue's last worker: in Retro that tells finish from retro, in
        Needs Review the implementer's changes from the reviewer."""
        latest = self.o.workers.roster.latest_record(issue)
        return latest.mode if latest is not None else fallback

    def redispatch(self, state: IssueState, decision: Decision) -> Step:
        issue = state.issue.identifier
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - REDISPATCH_WINDOW_S))
        # Restarts before the human was last asked do not count: clearing the flag (as the
        # comment asks) gives the worker a fresh start.
        restarts = self.o.log.count_since(
            issue, decision.action.value, since, reset_by=ASKED_ABOUT_RESTARTS
        )
        if restarts >= REDISPATCH_LIMIT:
            question = restarts_question(
                issue, REDISPATCH_LIMIT, REDISPATCH_WINDOW_S // 60, Label.USER_INPUT_NEEDED.value
            )
            ask_human(self.o.tracker, issue, question, author=LEGION_AUTHOR)
            # An entry of its own, which the count above starts after.
            self.guard.record(issue, ASKED_ABOUT_RESTARTS, OutcomeKind.DONE, "posted for a human")
            return deferred("worker keeps dying: asked a human; restarted once answered")
        mode = self._latest_mode(issue, decision.mode)
        assert mode is not None
        # Nothing changes until the worker can start: `worker-active` is what says which mode
        # to restart (without it the status's own mode would start).
        blocked = self.blocked(issue, mode)
        if blocked is not None:
            return blocked
        for view in self.views_of(issue):
            if not view.state.is_live:
                self.o.workers.retire(view)
        self.o.tracker.update_labels(issue, remove=[Label.WORKER_ACTIVE.value])
        return self._start(issue, mode, prompts.carry_on(self.o.workers.worker_prompt(issue, mode)))

    def remove_stale_done(self, state: IssueState, decision: Decision) -> Step:
        """`worker-done` from a worker of another mode than the phase's: close that worker,
        clear the label (and its `worker-active`), and start the phase's worker."""
        issue = state.issue.identifier
        assert decision.mode is not None
        waiting = self._clear_finished_workers(issue)
        if waiting is not None:
            return waiting
        latest = state.observation.latest_mode if state.observation is not None else None
        whose = f"the {latest.value} worker's" if latest is not None else "another mode's"
        self.o.tracker.update_labels(
            issue, remove=[Label.WORKER_DONE.value, Label.WORKER_ACTIVE.value]
        )
        started = self._start(issue, decision.mode)
        later = "deferred: " if started.kind is OutcomeKind.DEFERRED else ""
        return done(
            f"worker-done was {whose}, not the {decision.mode.value} worker's: cleared; "
            f"{later}{started.detail}"
        )

    def relay_feedback(self, state: IssueState, decision: Decision) -> Step:
        issue = state.issue.identifier
        comments = self.o.tracker.list_comments(issue)
        answer = answer_in(comments)
        if answer is None:
            self.o.tracker.add_comment(
                issue,
                "Legion found no answer after the question. Comment with the answer, then add "
                f"`{Label.USER_FEEDBACK_GIVEN.value}` again.",
                author=LEGION_AUTHOR,
                by_legion=True,
            )
            self.o.tracker.update_labels(issue, remove=[Label.USER_FEEDBACK_GIVEN.value])
            return done("no answer found in the comments; asked again")
        blocked = [
            v for v in self.views_of(issue) if v.state is SessionState.BLOCKED and v.question
        ]
        if blocked and blocked[0].question is not None:
            parts = len(blocked[0].question.items)
            answer_worker(self.o.workers, self.o.tracker, issue, [answer] * parts)
            result = done(f"answered the question in {blocked[0].record.window}")
        elif legion_asked(comments):
            return self._answer_legion(state, answer)
        else:
            mode = self._latest_mode(issue, decision.mode)
            assert mode is not None
            first = self.o.workers.worker_prompt(issue, mode)
            prompt = prompts.human_answered(first, answer, mode)
            result = self._start(issue, mode, prompt)
            if result.kind is OutcomeKind.DEFERRED:
                return result
        self.o.tracker.update_labels(
            issue, remove=[Label.USER_INPUT_NEEDED.value, Label.USER_FEEDBACK_GIVEN.value]
        )
        return result

    def _answer_legion(self, state: IssueState, answer: str) -> Step:
        """A human answered a question Legion asked itself (its budget, a worker that keeps
        dying): no worker asked it, so no session is waiting for it. The labels go, and the
        worker that is due (the table's decision without them) starts with the answer in its
        prompt; deferred, the table starts it on a later pass."""
        issue = state.issue.identifier
        self.o.tracker.update_labels(
            issue, remove=[Label.USER_INPUT_NEEDED.value, Label.USER_FEEDBACK_GIVEN.value]
        )
        due = due_after_answer(state.observation) if state.observation is not None else None
        if due is None or not due.action.is_mechanical:
            return done("answer to Legion's question taken; nothing is due")
        self.notes[issue] = prompts.answer_to_legions_question(answer)
        try:
            step = self.handler(due.action)(state, due)
        finally:
            self.notes.pop(issue, None)
        return Step(step.kind, f"answer to Legion's question: {due.action.value}: {step.detail}")

    def sweep(self, done: set[str]) -> Step | None:
        live = {view.record.issue for view in self.views if view.state.is_live}
        results = sweep_done(
            self.o.tracker, self.o.workspaces, live, dry_run=self.dry_run, done=done
        )
        for result in results:
            if result.removed:
                kind = OutcomeKind.DONE
            else:
                kind = OutcomeKind.PLANNED if self.dry_run else OutcomeKind.DEFERRED
            self.guard.record(result.issue, "sweep_workspace", kind, result.reason)
        return None
