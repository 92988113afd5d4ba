"""Why Legion does what it does with one issue (`legion why`): what the table decides now, from
which inputs and by which row; what the next pass would do with that through admission (a
dry run of the reconciler, the daemon's own code); and the last decision the action log kept,
with what it was decided from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from legion.core.decision_log import Decided
from legion.core.model import normalize_identifier

if TYPE_CHECKING:
    from legion.backends import Backends
    from legion.config import Project
    from legion.reconcile.observe import IssueState
    from legion.reconcile.outcomes import Outcome
    from legion.store.actionlog import Entry


@dataclass(frozen=True)
class IssueWhy:
    state: IssueState  # the issue as observed now, with the table's verdict
    next_pass: Outcome | None  # what a pass would do now (its admission included), if it acts
    last: Entry | None  # the newest decision the action log kept
    warnings: list[str]

    @property
    def now(self) -> Decided | None:
        state = self.state
        if state.observation is None or state.verdict is None:
            return None
        return Decided(state.observation, state.verdict)

    def to_json(self) -> dict[str, Any]:
        now = self.now
        last = self.last
        return {
            "issue": self.state.issue.identifier,
            "title": self.state.issue.title,
            "now": None
            if now is None
            else {**now.to_json(), "why": now.verdict.why, "note": self.state.note},
            "next_pass": None
            if self.next_pass is None
            else {"outcome": self.next_pass.kind.value, "detail": self.next_pass.detail},
            "last": None
            if last is None
            else {
                "id": last.id,
                "created_at": last.at,
                "action": last.action,
                "outcome": last.outcome.value,
                "detail": last.detail,
                "decided": None if last.decided is None else last.decided.to_json(),
            },
            "warnings": self.warnings,
        }


def why(project: Project, backends: Backends, identifier: str, *, wait: float) -> IssueWhy:
    """`identifier`'s decision now and its last one logged. NotFoundError when no such issue;
    a pass already running is waited for up to `wait` seconds (ConflictError after)."""
    from legion.backends import open_workers
    from legion.reconcile import Reconciler
    from legion.reconcile.observe import observe
    from legion.store.actionlog import ActionLog
    from legion.trackers.splits import Splits

    issue = backends.tracker.get_issue(normalize_identifier(identifier))
    workers = open_workers(project, backends)
    snapshot = observe(
        project.settings.project_id,
        backends.tracker,
        backends.forge,
        workers.roster,
        issues=[issue],
        opt_in=project.settings.backlog_opt_in_labels,
        epic_children=Splits(backends.db).epic_children(),
    )
    [state] = snapshot.issues
    log = ActionLog(backends.db)
    next_pass = None
    if state.decision.action.is_mechanical:
        # What a pass does goes through admission (the pause, a hold, the WIP limit, the
        # hosts' room, the budget): the reconciler's own dry run says it, changing nothing.
        planned = Reconciler(project, backends.tracker, backends.forge, workers, log).run(
            dry_run=True, wait=wait, only=issue.identifier
        )
        action = state.decision.action.value
        next_pass = next(
            (o for o in planned if o.issue == issue.identifier and o.action == action), None
        )
    return IssueWhy(state, next_pass, log.last_decided(issue.identifier), snapshot.warnings)
