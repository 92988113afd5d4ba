"""Observe every issue, run the decision table, and report: the engine of `legion state`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from legion.core.decide import (
    PR_PHASES,
    Decision,
    Observation,
    Verdict,
    explain,
    is_picked_up,
    why_waiting,
)
from legion.core.ids import session_id
from legion.core.model import ChecksState, Mode, ReviewOutcome, Status
from legion.core.pickup import DEFAULT_BACKLOG_OPT_IN, opted_in
from legion.errors import LegionError, NotFoundError
from legion.forges.base import Forge, PrState, PullRequest
from legion.trackers.base import Issue, Tracker


class LiveWorkers(Protocol):
    def live_issues(self) -> set[str]:
        """Identifiers of the issues that have a live worker right now."""
        ...

    def latest_modes(self) -> Mapping[str, Mode]:
        """The mode of each issue's most recently started worker (whose `worker-done` the
        label can be)."""
        ...


class KnownLiveWorkers:
    """Live workers already observed by the caller (a reconcile pass looks only once), and,
    when the caller knows them, the issues' latest workers' modes."""

    def __init__(self, issues: set[str], latest: Mapping[str, Mode] | None = None) -> None:
        self._issues = issues
        self._latest = dict(latest or {})

    def live_issues(self) -> set[str]:
        return self._issues

    def latest_modes(self) -> Mapping[str, Mode]:
        return self._latest


@dataclass(frozen=True)
class IssueState:
    issue: Issue
    pr: PullRequest | None
    pr_review: ReviewOutcome
    has_live_worker: bool
    decision: Decision
    session_id: str | None
    observation: Observation | None = None  # what the table was given
    opted_in: bool = False  # carries an opt-in label (`backlog_opt_in_labels`)
    open_blockers: tuple[str, ...] = ()  # the issues blocking it that are not Done
    checks: ChecksState = ChecksState.NONE  # the PR's CI checks as the table saw them
    # Its latest PR when that was closed unmerged: no PR to the table (the work needs a new
    # one), shown as `#3 closed` where a person reads the board.
    closed_pr: PullRequest | None = None
    # The row of the table that chose `decision` (the action log keeps it with `observation`).
    verdict: Verdict | None = None

    @property
    def waiting(self) -> str | None:
        """Why the table waits on an issue whose worker finished (`checks pending`), or None."""
        if self.observation is None:
            return None
        return why_waiting(self.observation, self.decision)

    @property
    def note(self) -> str | None:
        """Why Legion leaves the issue as it is, in a few words a person reads beside the
        decision (`legion state`, the boards): no opt-in label, what blocks it, what it waits
        for; None when nothing needs saying."""
        from legion.core.text import for_display

        if self.left_alone:
            return "no opt-in label"  # `backlog_opt_in_labels`
        if self.decision.action.value != "skip":
            return self.waiting
        if self.open_blockers:
            return f"blocked by {for_display(', '.join(self.open_blockers))}"
        if self.observation is not None and self.observation.open_children:
            return (
                f"waits for its children {for_display(', '.join(self.observation.open_children))}"
            )
        return self.waiting  # e.g. checks pending

    @property
    def left_alone(self) -> bool:
        """A Backlog issue nobody opted in: Legion does nothing with it."""
        return self.issue.status is Status.BACKLOG and not self.opted_in

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.issue.title,
            "status": self.issue.status.value,
            "labels": sorted(self.issue.labels),
            # The review outcome as the table saw it (`unknown` when the forge did not answer),
            # and the pull request itself, in `legion pr view --json`'s words.
            "review": self.pr_review.value,
            # The PR's CI checks as the table saw them: passing, failing, pending, none (no
            # checks, or no PR) or unknown (the forge did not answer).
            "checks": self.checks.value,
            "pr": None
            if self.pr is None
            else {
                "number": self.pr.number,
                "is_draft": self.pr.is_draft,
                "review": self.pr.review.value,
            },
            "has_live_worker": self.has_live_worker,
            "suggested_action": self.decision.action.value,
            "waiting": self.waiting,  # why a finished worker's issue waits, e.g. checks pending
            "mode": None if self.decision.mode is None else self.decision.mode.value,
            "session_id": self.session_id,
            "opted_in": self.opted_in,
            # The issues blocking it that are not Done (the table skips it while there are).
            "blocked_by": list(self.open_blockers),
            # An epic's children not Done (read in Backlog only; it waits for them).
            "open_children": []
            if self.observation is None
            else list(self.observation.open_children),
            # The row of `docs/state-machine.md`'s table that chose the action.
            "row": None if self.verdict is None else self.verdict.row,
        }


@dataclass(frozen=True)
class Snapshot:
    issues: list[IssueState]
    warnings: list[str]
    errors: list[LegionError] = field(default_factory=list)  # what the warnings came from

    def to_json(self) -> dict[str, Any]:
        return {
            "issues": {state.issue.identifier: state.to_json() for state in self.issues},
            "warnings": self.warnings,
        }


# How many blockers absent from the listing one pass looks up by themselves (on GitHub, issues
# closed before the listing's most recently closed ones): a bounded cost per pass.
BLOCKER_LOOKUPS = 10


class _Blockers:
    """Which blockers are not Done: read from the listing; one absent from it is looked up
    (at most `BLOCKER_LOOKUPS` per pass, each once). A blocker that does not exist or is not
    Legion's blocks nothing; one that cannot be read, or is past the lookups, counts as open."""

    def __init__(self, tracker: Tracker, issues: list[Issue], warnings: list[str]) -> None:
        self._tracker = tracker
        # blocker -> whether it holds nothing up (Done, or gone)
        self._cleared: dict[str, bool] = {i.identifier: i.status is Status.DONE for i in issues}
        self._warnings = warnings
        self._lookups = 0

    def open(self, issue: Issue) -> tuple[str, ...]:
        return self.not_done(issue.blocked_by, issue.identifier)

    def not_done(self, identifiers: Sequence[str], waiting: str) -> tuple[str, ...]:
        """Those of `identifiers` (the blockers or the children of `waiting`) not Done."""
        return tuple(i for i in identifiers if not self._is_cleared(i, waiting))

    def _is_cleared(self, blocker: str, blocked: str) -> bool:
        if blocker not in self._cleared:
            self._cleared[blocker] = self._look_up(blocker, blocked)
        return self._cleared[blocker]

    def _look_up(self, blocker: str, blocked: str) -> bool:
        if self._lookups >= BLOCKER_LOOKUPS:
            self._warnings.append(
                f"{blocked} waits for {blocker}, not looked up this pass (at most "
                f"{BLOCKER_LOOKUPS} blockers outside the listing are): counted as not Done"
            )
            return False
        self._lookups += 1
        try:
            return self._tracker.get_issue(blocker).status is Status.DONE
        except NotFoundError:
            return True  # deleted, Canceled, not Legion's: holds nothing up
        except LegionError as exc:
            self._warnings.append(
                f"{blocked} waits for {blocker}, which could not be read ({exc}): counted as "
                "not Done"
            )
            return False


def observe(
    project_id: str,
    tracker: Tracker,
    forge: Forge,
    workers: LiveWorkers,
    *,
    issues: list[Issue] | None = None,
    opt_in: Sequence[str] = DEFAULT_BACKLOG_OPT_IN,
    epic_children: Mapping[str, Sequence[str]],
) -> Snapshot:
    """One consistent pass over the tracker, the forge and the workers (`issues`: the tracker's
    issues when the caller has just read them; `opt_in`: the `backlog_opt_in_labels` setting;
    `epic_children`: the children that make each parent an epic, `trackers.splits`'s record).
    An issue's open blockers and children come from the same listing (`_Blockers` for one
    outside it).

    A forge that cannot be read makes every review outcome and checks state `unknown` (so
    nothing transitions on a guess); a tracker that cannot be read fails the whole pass.
    """
    warnings: list[str] = []
    errors: list[LegionError] = []
    if issues is None:
        issues = tracker.list_issues()
    prs: dict[str, PullRequest] | None
    in_pr_phase = [i for i in issues if i.status in PR_PHASES]
    try:
        prs = forge.prs_by_issue(
            [i.identifier for i in in_pr_phase],
            links={i.identifier: i.links for i in in_pr_phase if i.links},
        )
    except LegionError as exc:
        prs = None
        warnings.append(f"pull requests could not be read: {exc}")
        errors.append(exc)
    live = workers.live_issues()
    latest = workers.latest_modes()
    blockers = _Blockers(tracker, issues, warnings)
    states = []
    for issue in issues:
        pr = None if prs is None else prs.get(issue.identifier)
        closed = None
        if pr is not None and pr.state is PrState.CLOSED:
            pr, closed = None, pr  # a closed PR is no PR: the work needs a new one
        review = ReviewOutcome.UNKNOWN if prs is None else (pr.review if pr else ReviewOutcome.NONE)
        checks = ChecksState.UNKNOWN if prs is None else (pr.checks if pr else ChecksState.NONE)
        chosen = opted_in(issue.labels, opt_in)
        # Only where the table reads them: an issue Legion leaves alone costs no lookup, and
        # children are read only in Backlog (where they make an epic).
        picked = is_picked_up(issue.status, chosen)
        blocked_by = blockers.open(issue) if picked else ()
        children = tuple(epic_children.get(issue.identifier, ())) if picked else ()
        children = children if issue.status is Status.BACKLOG else ()
        open_children = blockers.not_done(children, issue.identifier) if children else ()
        observation = Observation(
            status=issue.status,
            labels=issue.workflow_labels,
            has_live_worker=issue.identifier in live,
            has_pr=pr is not None,
            pr_review=review,
            latest_mode=latest.get(issue.identifier),
            opted_in=chosen,
            open_blockers=blocked_by,
            checks=checks,
            children=children,
            open_children=open_children,
        )
        verdict = explain(observation)
        decision = verdict.decision
        sid = None
        if decision.session_mode is not None:
            sid = session_id(project_id, issue.identifier, decision.session_mode)
        states.append(
            IssueState(
                issue,
                pr,
                review,
                issue.identifier in live,
                decision,
                sid,
                observation,
                chosen,
                blocked_by,
                checks,
                closed,
                verdict,
            )
        )
    return Snapshot(states, warnings, errors)
