"""What the pass does for each issue the decision table gives an action: one handler per
action. Moves clear `worker-done` before the status moves; the implementer is resumed for
requested changes or failing checks; a dead worker is restarted (a human asked once it keeps
dying); a stale `worker-done` is cleared; a human's answer goes to whoever asked."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import suppress

from legion.core import epics
from legion.core.decide import Action, Decision, due_after_answer
from legion.core.decision_log import Decided
from legion.core.liveness import SessionState, finishing
from legion.core.marks import LEGION_AUTHOR
from legion.core.model import Label, Mode, Status
from legion.core.untrusted import Authored
from legion.diagnostics.faults import fault_point
from legion.diagnostics.tracing import span
from legion.errors import LegionError, NotFoundError
from legion.reconcile.humans import ask_human
from legion.reconcile.observe import IssueState
from legion.sessions import prompts
from legion.sessions.roster import WorkerView
from legion.store.actionlog import OutcomeKind
from legion.trackers.base import RECENT_COMMENTS, since_legion_wrote

from .answers import answer_in, checks_question, legion_asked, plain, restarts_question
from .context import PassContext
from .labels import answer_worker
from .outcomes import Step, deferred, done, observed_state
from .starts import Starts

# A worker that said it is done but is still finishing its last message (`core.liveness`) is
# looked at again this soon.
FINISHING_RETRY_S = 0.5
# Too many redispatches of one issue in this window means its worker keeps dying: ask a human.
REDISPATCH_LIMIT = 3
REDISPATCH_WINDOW_S = 15 * 60
# The action logged when Legion asks a human about a worker that keeps dying: restarts before
# it do not count toward the limit (an action's name, never a detail's text, is what counts).
ASKED_ABOUT_RESTARTS = "ask_human_about_restarts"
# The implementer resumed this many times for failing checks (since a human was last asked)
# and they still fail: it cannot fix them alone, and each round costs a review too. Ask.
CHECK_FIXES_LIMIT = 3
ASKED_ABOUT_CHECKS = "ask_human_about_checks"

Handler = Callable[[IssueState, Decision], Step]


class Transitions:
    """Carries out one pass's actions, issue by issue, on the workers it observed; every
    worker starts through `starts` (admission, the WIP count)."""

    def __init__(self, ctx: PassContext, views: Sequence[WorkerView], starts: Starts) -> None:
        self.ctx = ctx
        self.views = views
        self.starts = starts

    def execute(self, state: IssueState) -> None:
        """The issue's action, under the pass's guard (backing off the issue on a failure)."""
        decision = state.decision
        handler = self.handler(decision.action)
        issue, mode = state.issue.identifier, decision.mode
        observed = observed_state(state.issue, state.pr, decision.action.value)
        if decision.action is Action.REMOVE_WORKER_ACTIVE_AND_REDISPATCH:
            mode = self._latest_mode(issue, mode)  # the mode restarted, as `redispatch` does
        if self.ctx.dry_run and mode is not None:
            # A start is planned through its admission (pause, WIP limit, budget, a daemon to
            # host it), so a dry run says which workers would start now and which would wait.
            self.ctx.guard.guarded(
                issue,
                decision.action.value,
                lambda: self._plan(issue, decision.action, mode),
                plan=False,
                state=observed,
            )
            return
        decided = None
        if state.observation is not None and state.verdict is not None:
            decided = Decided(state.observation, state.verdict, self.starts.gates())
        with span(f"action: {decision.action.value}", issue):
            self.ctx.guard.guarded(
                issue,
                decision.action.value,
                lambda: handler(state, decision),
                state=observed,
                decided=decided,
            )

    def _plan(self, issue: str, action: Action, mode: Mode) -> Step:
        """A dry run of an action that starts a worker: the start through its admission. A
        move (or a stale `worker-done` cleared) is made whether or not the start waits, as
        `transition` and `remove_stale_done` make it."""
        start = self.starts.plan(issue, mode)
        target = action.target_status
        if target is None and action is not Action.REMOVE_STALE_WORKER_DONE:
            return start
        first = "clear the stale worker-done" if target is None else f"move to {target.value}"
        later = "deferred: " if start.kind is OutcomeKind.DEFERRED else ""
        return Step(OutcomeKind.PLANNED, f"{first}; then {later}{start.detail}")

    def handler(self, action: Action) -> Handler:
        handlers: dict[Action, Handler] = {
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
            Action.CLOSE_EPIC: self.close_epic,
        }
        return handlers.get(action, self.dispatch)

    def _views_of(self, issue: str) -> list[WorkerView]:
        return [view for view in self.views if view.record.issue == issue]

    def _clear_finished_workers(self, issue: str) -> Step | None:
        """Close the issue's live workers before the next mode starts; None when done, else why
        not yet (a worker that said it is done may still be finishing its last message)."""
        for view in self._views_of(issue):
            if not view.state.is_live:
                continue
            if finishing(view.state, view.last_activity, time.time()):
                return deferred(
                    f"{view.record.window} is finishing its turn", retry_after=FINISHING_RETRY_S
                )
            self.ctx.workers.retire(view)
            self.starts.closed(view.record.mode)
        return None

    def transition(self, state: IssueState, decision: Decision) -> Step:
        issue = state.issue.identifier
        tracker = self.ctx.tracker
        assert decision.mode is not None
        target = decision.action.target_status
        waiting = self._clear_finished_workers(issue)
        if waiting is not None:
            return waiting
        if target is None:
            # The finisher: nothing but its start follows from Retro + worker-done, so change
            # nothing until it can start (clearing worker-done would send Retro back to retro).
            blocked = self.starts.blocked(issue, decision.mode)
            if blocked is not None:
                return blocked
        # `worker-done` goes before the status moves: a crash between the two then runs the
        # finished mode again (workers are idempotent), where the other order would read the
        # old mode's `worker-done` as the new one's and skip a phase. A move that fails puts
        # the labels back, leaving the issue as it was.
        labels = [Label.WORKER_DONE.value, Label.WORKER_ACTIVE.value]
        with span("tracker: clear labels", issue):
            tracker.update_labels(issue, remove=labels)
        fault_point("transition_labels_cleared")
        if target is not None:
            try:
                with span("tracker: move", issue):
                    tracker.set_status(issue, target)
            except LegionError:
                with suppress(LegionError):
                    cleared = [label for label in labels if label in state.issue.labels]
                    tracker.update_labels(issue, add=cleared)
                raise
            fault_point("transition_status_moved")
        started = self.starts.start(issue, decision.mode)
        if target is None:
            return started
        # The move is done; a deferred start is picked up by the new status's dispatch row.
        later = "deferred: " if started.kind is OutcomeKind.DEFERRED else ""
        return done(f"moved to {target.value}; {later}{started.detail}")

    def close_epic(self, state: IssueState, decision: Decision) -> Step:
        """Every child of the epic is Done: sum them up in one comment and move the epic to
        Done. The comment goes first and is written once (a pass cut before the move finds
        it); the labels go last, since Done is never acted on whatever it carries."""
        issue = state.issue.identifier
        tracker = self.ctx.tracker
        waiting = self._clear_finished_workers(issue)  # the architect's window, if still open
        if waiting is not None:
            return waiting
        children = state.observation.children if state.observation is not None else ()
        # Legion's own comments only: a session's (`legion-architect`) is not the summary.
        recent = tracker.list_comments(issue, newest=RECENT_COMMENTS)
        mine = [c.body for c in recent if c.by_legion and c.author == LEGION_AUTHOR]
        if not epics.already_summed_up(mine):
            outcomes = self._child_outcomes(children)
            tracker.add_comment(
                issue, epics.summary(outcomes), author=LEGION_AUTHOR, by_legion=True
            )
        tracker.set_status(issue, Status.DONE)
        with suppress(LegionError):
            tracker.update_labels(
                issue, remove=[Label.WORKER_DONE.value, Label.WORKER_ACTIVE.value]
            )
        return done(f"closed: its children {', '.join(children)} are Done")

    def _child_outcomes(self, children: Sequence[str]) -> list[epics.ChildOutcome]:
        """What each child became, for the epic's summary: its title and status from the
        tracker, its pull request from the forge (one request; left out if it fails)."""
        try:
            prs = self.ctx.forge.prs_by_issue(list(children))
        except LegionError:
            prs = {}
        outcomes = []
        for child in children:
            try:
                found = self.ctx.tracker.get_issue(child)
            except NotFoundError:  # deleted, or not Legion's: it holds nothing up (`observe`)
                outcomes.append(epics.ChildOutcome(child, "", "gone (deleted, or not Legion's)"))
                continue
            pr = prs.get(child)
            outcomes.append(
                epics.ChildOutcome(
                    child,
                    found.title,
                    found.status.value,
                    "" if pr is None else f"#{pr.number} {pr.state.value}",
                )
            )
        return outcomes

    def dispatch(self, state: IssueState, decision: Decision) -> Step:
        assert decision.mode is not None
        return self.starts.start(state.issue.identifier, decision.mode)

    def resume_for_changes(self, state: IssueState, decision: Decision) -> Step:
        """The reviewer requested changes: resume the implementer's session with them."""
        pr = state.pr
        return self._resume_implementer(
            state.issue.identifier, lambda first: prompts.requested_changes(first, pr)
        )

    def resume_for_checks(self, state: IssueState, decision: Decision) -> Step:
        """CI fails after an approval (Needs Review), or after the retro (Retro): resume the
        implementer's session with each failing check and its log link. From Retro the issue
        goes back to Needs Review first: the fix is a new head, which the approval did not see,
        so the reviewer looks again before the finisher may merge it."""
        pr = state.pr
        assert pr is not None  # the table decides this only for a PR with failing checks
        names = ", ".join(check.name for check in pr.failing_checks)
        issue = state.issue.identifier
        fixes = self.ctx.log.count_since(
            issue, Action.RESUME_IMPLEMENTER_FOR_CHECKS.value, "", reset_by=ASKED_ABOUT_CHECKS
        )
        if fixes >= CHECK_FIXES_LIMIT:
            question = checks_question(issue, fixes, names, Label.USER_INPUT_NEEDED.value)
            ask_human(self.ctx.tracker, issue, question, author=LEGION_AUTHOR)
            # An entry of its own, which the count above starts after.
            self.ctx.guard.record(issue, ASKED_ABOUT_CHECKS, OutcomeKind.DONE, "posted for a human")
            return deferred(f"checks still fail after {fixes} fixes ({names}): asked a human")
        back = Status.NEEDS_REVIEW if state.issue.status is Status.RETRO else None
        started = self._resume_implementer(
            issue, lambda first: prompts.fix_failing_checks(first, pr), back
        )
        moved = (
            f"back to {back.value}; "
            if back is not None and started.kind is OutcomeKind.DONE
            else ""
        )
        return Step(started.kind, f"failing: {names}; {moved}{started.detail}", started.retry_after)

    def _resume_implementer(
        self, issue: str, follow_up: Callable[[str], str], back: Status | None = None
    ) -> Step:
        """Resume the implementer's session with a follow-up to its first prompt (the issue
        moved to `back` first, when given). It stops without `worker-done`
        (`completion_labels`, in Needs Review), so the next pass sends the work back to the
        reviewer; the finished worker's window goes first, and nothing is cleared while no
        worker may start."""
        waiting = self._clear_finished_workers(issue)
        if waiting is not None:
            return waiting
        blocked = self.starts.blocked(issue, Mode.IMPLEMENT)
        if blocked is not None:
            return blocked
        prompt = follow_up(self.ctx.workers.worker_prompt(issue, Mode.IMPLEMENT))
        self.ctx.tracker.update_labels(issue, remove=[Label.WORKER_DONE.value])
        if back is not None:
            # Cut here, the issue is in Retro with no label: the retro runs again (row 27),
            # and its `worker-done` brings the failing checks back to this row.
            self.ctx.tracker.set_status(issue, back)
        return self.starts.start(issue, Mode.IMPLEMENT, prompt)

    def _latest_mode(self, issue: str, fallback: Mode | None) -> Mode | None:
        """The mode of the issue's last worker: in Retro that tells finish from retro, in
        Needs Review the implementer's changes from the reviewer."""
        latest = self.ctx.workers.roster.latest_record(issue)
        return latest.mode if latest is not None else fallback

    def redispatch(self, state: IssueState, decision: Decision) -> Step:
        issue = state.issue.identifier
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - REDISPATCH_WINDOW_S))
        # Restarts before the human was last asked do not count: clearing the flag (as the
        # comment asks) gives the worker a fresh start.
        restarts = self.ctx.log.count_since(
            issue, decision.action.value, since, reset_by=ASKED_ABOUT_RESTARTS
        )
        if restarts >= REDISPATCH_LIMIT:
            question = restarts_question(
                issue, REDISPATCH_LIMIT, REDISPATCH_WINDOW_S // 60, Label.USER_INPUT_NEEDED.value
            )
            ask_human(self.ctx.tracker, issue, question, author=LEGION_AUTHOR)
            # An entry of its own, which the count above starts after.
            self.ctx.guard.record(
                issue, ASKED_ABOUT_RESTARTS, OutcomeKind.DONE, "posted for a human"
            )
            return deferred("worker keeps dying: asked a human; restarted once answered")
        mode = self._latest_mode(issue, decision.mode)
        assert mode is not None
        # Nothing changes until the worker can start: `worker-active` is what says which mode
        # to restart (without it the status's own mode would start).
        blocked = self.starts.blocked(issue, mode)
        if blocked is not None:
            return blocked
        for view in self._views_of(issue):
            if not view.state.is_live:
                self.ctx.workers.retire(view)
        self.ctx.tracker.update_labels(issue, remove=[Label.WORKER_ACTIVE.value])
        first = self.ctx.workers.worker_prompt(issue, mode)
        return self.starts.start(issue, mode, prompts.carry_on(first))

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
        self.ctx.tracker.update_labels(
            issue, remove=[Label.WORKER_DONE.value, Label.WORKER_ACTIVE.value]
        )
        started = self.starts.start(issue, decision.mode)
        later = "deferred: " if started.kind is OutcomeKind.DEFERRED else ""
        return done(
            f"worker-done was {whose}, not the {decision.mode.value} worker's: cleared; "
            f"{later}{started.detail}"
        )

    def relay_feedback(self, state: IssueState, decision: Decision) -> Step:
        """A human answered: into the question of the worker still blocked on it, else to
        the worker that asked and stopped (resumed with it), else to the worker due after a
        question Legion asked itself."""
        issue = state.issue.identifier
        tracker = self.ctx.tracker
        comments = since_legion_wrote(tracker, issue)
        answer = answer_in(comments)
        if not answer:
            tracker.add_comment(
                issue,
                "Legion found no answer after the question. Comment with the answer, then add "
                f"`{Label.USER_FEEDBACK_GIVEN.value}` again.",
                author=LEGION_AUTHOR,
                by_legion=True,
            )
            tracker.update_labels(issue, remove=[Label.USER_FEEDBACK_GIVEN.value])
            return done("no answer found in the comments; asked again")
        blocked = [
            v for v in self._views_of(issue) if v.state is SessionState.BLOCKED and v.question
        ]
        if blocked and blocked[0].question is not None:
            parts = len(blocked[0].question.items)
            answer_worker(self.ctx.workers, tracker, issue, [plain(answer)] * parts)
            result = done(f"answered the question in {blocked[0].record.window}")
        elif legion_asked(comments):
            return self._answer_legion(state, answer)
        else:
            mode = self._latest_mode(issue, decision.mode)
            assert mode is not None
            first = self.ctx.workers.worker_prompt(issue, mode)
            prompt = prompts.human_answered(first, answer, mode)
            result = self.starts.start(issue, mode, prompt)
            if result.kind is OutcomeKind.DEFERRED:
                return result
        tracker.update_labels(
            issue, remove=[Label.USER_INPUT_NEEDED.value, Label.USER_FEEDBACK_GIVEN.value]
        )
        return result

    def _answer_legion(self, state: IssueState, answer: Sequence[Authored]) -> Step:
        """A human answered a question Legion asked itself (its budget, a worker that keeps
        dying): no worker asked it, so no session is waiting for it. The labels go, and the
        worker that is due (the table's decision without them) starts with the answer in its
        prompt; deferred, the table starts it on a later pass."""
        issue = state.issue.identifier
        self.ctx.tracker.update_labels(
            issue, remove=[Label.USER_INPUT_NEEDED.value, Label.USER_FEEDBACK_GIVEN.value]
        )
        due = due_after_answer(state.observation) if state.observation is not None else None
        if due is None or not due.action.is_mechanical:
            return done("answer to Legion's question taken; nothing is due")
        with self.starts.noted(issue, prompts.answer_to_legions_question(answer)):
            step = self.handler(due.action)(state, due)
        return Step(step.kind, f"answer to Legion's question: {due.action.value}: {step.detail}")
