"""The reconciler: observe, decide, and carry out every mechanical action, idempotently.

One pass: retire workers that have finished, escalate workers blocked on a question, run the
decision table over every issue and execute what it suggests (latest phases first, within the
WIP limit), and sweep the workspaces of Done issues. Every step is safe to repeat: a pass that
fails half-way is finished by the next one, and a lock keeps two passes from overlapping.
Every action taken is appended to the action log.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from legion.actionlog import ActionLog
from legion.config import Project
from legion.core.decide import Action, Decision
from legion.core.model import Label, Mode, Status
from legion.errors import LegionError
from legion.forges.base import Forge
from legion.locking import exclusive
from legion.runtime.workers import WorkerManager, WorkerState, WorkerView
from legion.state import IssueState, KnownLiveWorkers, observe
from legion.trackers.base import Issue, Tracker
from legion.workspaces.sweep import sweep_done

LEGION_AUTHOR = "legion"
# A worker that said it is done but is still mid-turn gets this long to finish its sentence.
FINISHING_GRACE_S = 30.0
# Later phases first: finishing work in flight beats starting new work.
PRIORITY: tuple[Action, ...] = (
    Action.RELAY_USER_FEEDBACK,
    Action.DISPATCH_FINISHER,
    Action.TRANSITION_TO_RETRO,
    Action.RESUME_IMPLEMENTER_FOR_RETRO,
    Action.RESUME_IMPLEMENTER_FOR_CHANGES,
    Action.TRANSITION_TO_NEEDS_REVIEW,
    Action.DISPATCH_REVIEWER,
    Action.REMOVE_WORKER_ACTIVE_AND_REDISPATCH,
    Action.TRANSITION_TO_IN_PROGRESS,
    Action.DISPATCH_IMPLEMENTER,
    Action.TRANSITION_TO_TODO,
    Action.DISPATCH_PLANNER,
    Action.DISPATCH_ARCHITECT,
)
# Too many redispatches of one issue in this window means its worker keeps dying: ask a human.
REDISPATCH_LIMIT = 3
REDISPATCH_WINDOW_S = 15 * 60


@dataclass(frozen=True, slots=True)
class Outcome:
    issue: str
    action: str
    outcome: str  # done, deferred, failed, planned
    detail: str = ""


def counts_toward_wip(mode: Mode) -> bool:
    """Reviewers are short-lived and exempt; every other worker writes code or plans."""
    return mode is not Mode.REVIEW


class Reconciler:
    def __init__(
        self,
        project: Project,
        tracker: Tracker,
        forge: Forge,
        workers: WorkerManager,
        log: ActionLog,
    ) -> None:
        self.project = project
        self.tracker = tracker
        self.forge = forge
        self.workers = workers
        self.log = log
        self.wip_limit = project.settings.wip_limit

    def run(self, *, dry_run: bool = False) -> list[Outcome]:
        with exclusive(self.project.state_dir / "reconcile.lock"):
            return _Pass(self, dry_run).run()


class _Pass:
    """One reconcile pass; holds what it has observed and the WIP count as it changes."""

    def __init__(self, owner: Reconciler, dry_run: bool) -> None:
        self.o = owner
        self.dry_run = dry_run
        self.outcomes: list[Outcome] = []
        self.views: list[WorkerView] = []
        self.code_workers = 0

    # -- bookkeeping ---------------------------------------------------------------------------

    def record(self, issue: str, action: str, outcome: str, detail: str = "") -> None:
        result = Outcome(issue, action, outcome, detail)
        self.outcomes.append(result)
        if not self.dry_run:
            self.o.log.append(issue, action, outcome, detail)

    def refresh(self) -> None:
        self.views = self.o.workers.views()
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
        self.refresh()
        issues = {issue.identifier: issue for issue in self.o.tracker.list_issues()}
        self.retire_finished(issues)
        self.escalate_blocked()
        self.refresh()
        live = {view.record.issue for view in self.views if view.state.is_live}
        snapshot = observe(
            self.o.project.settings.project_id,
            self.o.tracker,
            self.o.forge,
            KnownLiveWorkers(live),
        )
        for warning in snapshot.warnings:
            self.record("-", "observe", "failed", warning)
        order = {action: index for index, action in enumerate(PRIORITY)}
        todo = [s for s in snapshot.issues if s.decision.action.is_mechanical]
        todo.sort(key=lambda s: (order.get(s.decision.action, len(order)), s.issue.identifier))
        for state in todo:
            self.execute(state)
        for issue, why in self.o.workers.await_starts():
            self.record(issue, "worker_start", "failed", why)
        self.sweep()
        return self.outcomes

    def retire_finished(self, issues: dict[str, Issue]) -> None:
        """Close the windows of workers that are done: idle with `worker-active` gone, or whose
        issue is closed; forget dead workers whose issue no longer expects one."""
        for view in self.views:
            issue = issues.get(view.record.issue)
            active = issue is not None and Label.WORKER_ACTIVE.value in issue.labels
            closed = issue is None or issue.status is Status.DONE
            finished = view.state is WorkerState.IDLE and (not active or closed)
            forgotten = view.state is WorkerState.DEAD and (not active or closed)
            if finished or forgotten:
                if not self.dry_run:
                    self.o.workers.retire(view)
                what = "finished" if finished else "dead"
                self.record(
                    view.record.issue, "retire_worker", self._ok(), f"{what}: {view.record.window}"
                )

    def escalate_blocked(self) -> None:
        """A worker waiting on a question it asked: post the question for a human."""
        for view in self.views:
            if view.state is not WorkerState.BLOCKED or view.question is None:
                continue
            issue = self.o.tracker.get_issue(view.record.issue)
            if {Label.USER_INPUT_NEEDED.value, Label.USER_FEEDBACK_GIVEN.value} & issue.labels:
                continue
            lines = [
                f"**Question from the {view.record.mode.value} worker** ({view.record.window}):",
                "",
            ]
            for item in view.question.items:
                lines.append(f"> {item.question}")
                if item.options:
                    lines.append(f"> Options: {', '.join(item.options)}")
            lines += [
                "",
                "Answer with a comment here and add the label "
                f"`{Label.USER_FEEDBACK_GIVEN.value}`, or directly: "
                f'`legion answer {issue.identifier} "your answer"`.',
            ]
            body = "\n".join(lines)
            self.guarded(
                issue.identifier,
                "escalate_question",
                partial(self._escalate, issue.identifier, body),
            )

    def _escalate(self, issue: str, body: str) -> str:
        self.o.tracker.add_comment(issue, body, author=LEGION_AUTHOR)
        self.o.tracker.update_labels(issue, add=[Label.USER_INPUT_NEEDED.value])
        return "question posted, user-input-needed added"

    def guarded(self, issue: str, action: str, step: Callable[[], str]) -> None:
        """Run one action; a failure is logged and leaves the issue for the next pass."""
        if self.dry_run:
            self.record(issue, action, "planned")
            return
        try:
            detail = step()
        except LegionError as exc:
            self.record(issue, action, "failed", str(exc))
            return
        outcome = "deferred" if detail.startswith("deferred") else "done"
        self.record(issue, action, outcome, detail)

    def _ok(self) -> str:
        return "planned" if self.dry_run else "done"

    # -- actions -------------------------------------------------------------------------------

    def execute(self, state: IssueState) -> None:
        decision = state.decision
        issue = state.issue.identifier
        handlers: dict[Action, Callable[[IssueState, Decision], str]] = {
            Action.TRANSITION_TO_TODO: self.transition,
            Action.TRANSITION_TO_IN_PROGRESS: self.transition,
            Action.TRANSITION_TO_NEEDS_REVIEW: self.transition,
            Action.TRANSITION_TO_RETRO: self.transition,
            Action.DISPATCH_FINISHER: self.transition,
            Action.RESUME_IMPLEMENTER_FOR_CHANGES: self.resume_for_changes,
            Action.RELAY_USER_FEEDBACK: self.relay_feedback,
            Action.REMOVE_WORKER_ACTIVE_AND_REDISPATCH: self.redispatch,
        }
        handler = handlers.get(decision.action, self.dispatch)
        self.guarded(issue, decision.action.value, lambda: handler(state, decision))

    def _start(self, issue: str, mode: Mode, prompt: str | None = None) -> str:
        if self.wip_full(mode):
            return f"deferred: WIP limit {self.o.wip_limit} reached"
        # Started without waiting: the pass collects every start at its end, in parallel.
        if prompt is None:
            view = self.o.workers.dispatch(issue, mode, wait=False)
        else:
            view = self.o.workers.resume(issue, mode, prompt, wait=False)
        if counts_toward_wip(mode):
            self.code_workers += 1
        return f"{mode.value} worker in {view.record.window}"

    def _clear_finished_workers(self, issue: str) -> str | None:
        """Close the issue's live workers before the next mode starts; None when done, else why
        not yet (a worker that said it is done may still be finishing its last message)."""
        for view in self.views_of(issue):
            if not view.state.is_live:
                continue
            recent = (
                view.last_activity is not None
                and time.time() - view.last_activity < FINISHING_GRACE_S
            )
            if view.state is WorkerState.RUNNING and recent:
                return f"deferred: {view.record.window} is finishing its turn"
            self.o.workers.retire(view)
            if counts_toward_wip(view.record.mode):
                self.code_workers -= 1
        return None

    def transition(self, state: IssueState, decision: Decision) -> str:
        issue = state.issue.identifier
        waiting = self._clear_finished_workers(issue)
        if waiting:
            return waiting
        target = decision.action.target_status
        if target is not None:
            self.o.tracker.set_status(issue, target)
        self.o.tracker.update_labels(
            issue, remove=[Label.WORKER_DONE.value, Label.WORKER_ACTIVE.value]
        )
        assert decision.mode is not None
        moved = f"moved to {target.value}; " if target is not None else ""
        return moved + self._start(issue, decision.mode)

    def dispatch(self, state: IssueState, decision: Decision) -> str:
        assert decision.mode is not None
        return self._start(state.issue.identifier, decision.mode)

    def resume_for_changes(self, state: IssueState, decision: Decision) -> str:
        issue = state.issue.identifier
        waiting = self._clear_finished_workers(issue)
        if waiting:
            return waiting
        if self.wip_full(Mode.IMPLEMENT):
            return f"deferred: WIP limit {self.o.wip_limit} reached"
        pr = state.pr
        review = (
            next((r for r in reversed(pr.reviews) if r.outcome == "changes_requested"), None)
            if pr
            else None
        )
        prompt = (
            f"/legion-worker implement mode for {issue}\n\n"
            f"The reviewer requested changes on PR #{pr.number if pr else '?'}:\n\n"
            f"{review.body if review else '(see the PR reviews)'}\n\n"
            "Address every point in this workspace and commit. Then remove worker-active and "
            "stop, without adding worker-done: Legion sends the work back to review."
        )
        self.o.tracker.update_labels(issue, remove=[Label.WORKER_DONE.value])
        return self._start(issue, Mode.IMPLEMENT, prompt)

    def _latest_mode(self, issue: str, fallback: Mode | None) -> Mode | None:
        """The mode of the issue's last worker: in Retro that tells finish from retro, in
        Needs Review the implementer's changes from the reviewer."""
        latest = self.o.workers.registry.latest(issue)
        return latest.mode if latest is not None else fallback

    def redispatch(self, state: IssueState, decision: Decision) -> str:
        issue = state.issue.identifier
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - REDISPATCH_WINDOW_S))
        if self.o.log.count_since(issue, decision.action.value, since) >= REDISPATCH_LIMIT:
            self.o.tracker.add_comment(
                issue,
                f"Legion restarted this issue's worker {REDISPATCH_LIMIT} times in "
                f"{REDISPATCH_WINDOW_S // 60} minutes and it keeps stopping. "
                f"See `legion peek {issue}`; fix the cause, then remove "
                f"`{Label.USER_INPUT_NEEDED.value}`.",
                author=LEGION_AUTHOR,
            )
            self.o.tracker.update_labels(issue, add=[Label.USER_INPUT_NEEDED.value])
            return "worker keeps dying: asked a human"
        for view in self.views_of(issue):
            if not view.state.is_live:
                self.o.workers.retire(view)
        mode = self._latest_mode(issue, decision.mode)
        assert mode is not None
        self.o.tracker.update_labels(issue, remove=[Label.WORKER_ACTIVE.value])
        return self._start(issue, mode, _continue_prompt(issue, mode))

    def relay_feedback(self, state: IssueState, decision: Decision) -> str:
        issue = state.issue.identifier
        answer = human_answer(self.o.tracker, issue)
        if answer is None:
            self.o.tracker.add_comment(
                issue,
                "Legion found no answer after the question. Comment with the answer, then add "
                f"`{Label.USER_FEEDBACK_GIVEN.value}` again.",
                author=LEGION_AUTHOR,
            )
            self.o.tracker.update_labels(issue, remove=[Label.USER_FEEDBACK_GIVEN.value])
            return "no answer found in the comments; asked again"
        blocked = [v for v in self.views_of(issue) if v.state is WorkerState.BLOCKED and v.question]
        if blocked and blocked[0].question is not None:
            parts = len(blocked[0].question.items)
            self.o.workers.answer(issue, [answer] * parts)
            detail = f"answered the question in {blocked[0].record.window}"
        else:
            mode = self._latest_mode(issue, decision.mode)
            assert mode is not None
            prompt = (
                f"/legion-worker {mode.value} mode for {issue}\n\n"
                f"A human answered your question:\n\n{answer}\n\n"
                f"Continue the {mode.value} work with this answer."
            )
            detail = self._start(issue, mode, prompt)
            if detail.startswith("deferred"):
                return detail
        self.o.tracker.update_labels(
            issue, remove=[Label.USER_INPUT_NEEDED.value, Label.USER_FEEDBACK_GIVEN.value]
        )
        return detail

    def sweep(self) -> None:
        live = {view.record.issue for view in self.views if view.state.is_live}
        try:
            results = sweep_done(
                self.o.tracker, self.o.workers.workspaces, live, dry_run=self.dry_run
            )
        except LegionError as exc:
            self.record("-", "sweep_workspaces", "failed", str(exc))
            return
        for result in results:
            outcome = "done" if result.removed else ("planned" if self.dry_run else "deferred")
            self.record(result.issue, "sweep_workspace", outcome, result.reason)


def _continue_prompt(issue: str, mode: Mode) -> str:
    return (
        f"/legion-worker {mode.value} mode for {issue}\n\n"
        "Your previous session stopped before it finished. Check where the work stands "
        "(issue comments, the workspace, the PR) and carry on."
    )


def human_answer(tracker: Tracker, issue: str) -> str | None:
    """The human's words after the last comment Legion or a worker wrote, oldest first."""
    comments = tracker.list_comments(issue)
    answer: list[str] = []
    for comment in comments:
        if comment.author == LEGION_AUTHOR or comment.author.startswith("legion-"):
            answer = []
        else:
            answer.append(comment.body.strip())
    text = "\n\n".join(part for part in answer if part)
    return text or None
