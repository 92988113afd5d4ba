"""Who judges what a pass cannot: a worker blocked on its question goes to the controller's
Oracle (an `oracle` item of the judgment queue) when a controller runs, and to a human (a
comment and `user-input-needed`) when none does, or the controller did not settle it in time;
and the judgment queue is kept in step with what needs the controller."""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial

from legion.core.liveness import SessionState
from legion.core.marks import LEGION_AUTHOR
from legion.core.model import Label
from legion.reconcile.humans import ask_human, escalation_comment
from legion.reconcile.judgments import JudgmentKind, judgment_needs
from legion.reconcile.observe import Snapshot
from legion.sessions.roster import WorkerView
from legion.store.actionlog import OutcomeKind
from legion.trackers.base import Issue

from .context import PassContext
from .outcomes import Step, done, observed_state


class JudgmentRouter:
    """Routes one pass's questions and judgment needs. `oracle`: whether a controller takes
    blocked workers' questions; `oracle_timeout`: how long it has to answer or escalate one."""

    def __init__(self, ctx: PassContext, *, oracle: bool, oracle_timeout: float) -> None:
        self.ctx = ctx
        self.oracle = oracle
        self.oracle_timeout = oracle_timeout

    def route_blocked(self, views: Sequence[WorkerView], issues: dict[str, Issue]) -> None:
        """Workers waiting on a question they asked: the controller's Oracle takes them (see
        `sync_judgments`); a human gets them when no controller can, or it did not in time."""
        for view in views:
            if view.state is not SessionState.BLOCKED or view.question is None:
                continue
            issue = issues.get(view.record.issue)
            if issue is None:
                continue
            if {Label.USER_INPUT_NEEDED.value, Label.USER_FEEDBACK_GIVEN.value} & issue.labels:
                continue  # a human owns it already
            self.ctx.guard.guarded(
                issue.identifier,
                "escalate_question",
                partial(self._route, view, issue.identifier),
                plan=False,
                state=observed_state(issue, None, "escalate_question"),
            )

    def _route(self, view: WorkerView, issue: str) -> Step | None:
        assert view.question is not None
        if not self.oracle:
            note = "(No controller is running to research it, so it comes to you directly.)"
            return self._escalate(view, issue, note)
        item = self.ctx.judgments.open_item(issue, JudgmentKind.ORACLE)
        if item is None or item.ref != view.question.tool_use_id:
            return None  # new: queued for the controller at the end of the pass
        if item.handled_at is not None:
            why = "the controller ended its turn without answering or escalating it"
        elif item.age(time.time()) > self.oracle_timeout:
            why = f"the controller did not take it within {self.oracle_timeout:g} s"
        else:
            return None  # the controller has it
        note = f"(Legion's Oracle could not settle it: {why}.)"
        result = self._escalate(view, issue, note)
        closed = f"escalated to a human: {why}"
        if not self.ctx.dry_run and self.ctx.judgments.close(item.id, closed):
            self.ctx.guard.record(
                issue, "close_judgment", OutcomeKind.DONE, f"{item.kind}: {closed}"
            )
        return result

    def _escalate(self, view: WorkerView, issue: str, note: str) -> Step:
        if self.ctx.dry_run:
            return Step(OutcomeKind.PLANNED, "post the question for a human")
        assert view.question is not None
        items = [(item.question, item.options) for item in view.question.items]
        asker = f"the {view.record.mode.value} worker ({view.record.window})"
        body = escalation_comment(issue, asker, items, note)
        ask_human(self.ctx.tracker, issue, body, author=LEGION_AUTHOR)
        return done("question posted, user-input-needed added")

    def sync_judgments(self, snapshot: Snapshot, views: Sequence[WorkerView]) -> Step | None:
        """Open an item for each new need of the controller's judgment; close those whose need
        is gone. Blocked workers become `oracle` items only when a controller takes them."""
        if self.ctx.dry_run:
            return None
        needs = judgment_needs(snapshot.issues, views)
        if not self.oracle:
            needs = [need for need in needs if need.kind is not JudgmentKind.ORACLE]
        known = set(JudgmentKind)
        if snapshot.warnings:
            known.discard(JudgmentKind.INVESTIGATE_NO_PR)  # the forge did not answer
        result = self.ctx.judgments.sync(needs, known)
        for item in result.closed:
            self.ctx.guard.record(
                item.issue, "close_judgment", OutcomeKind.DONE, f"{item.kind}: {item.closed_reason}"
            )
        for item in result.opened:
            self.ctx.guard.record(
                item.issue, "queue_judgment", OutcomeKind.DONE, f"{item.kind}: {item.reason}"
            )
        return None
