"""What a pass's steps did: typed outcomes, and the issue as observed for its backoff."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from legion.forges.base import PullRequest
from legion.store.actionlog import OutcomeKind
from legion.trackers.base import Issue


@dataclass(frozen=True, slots=True)
class Step:
    """What one step of a pass did. A step that fails raises instead."""

    kind: OutcomeKind
    detail: str = ""
    retry_after: float | None = None  # look again this soon (seconds), not a whole tick later


def done(detail: str = "") -> Step:
    return Step(OutcomeKind.DONE, detail)


def deferred(detail: str, retry_after: float | None = None) -> Step:
    return Step(OutcomeKind.DEFERRED, detail, retry_after)


@dataclass(frozen=True, slots=True)
class Outcome:
    issue: str
    action: str
    kind: OutcomeKind
    detail: str = ""
    retry_after: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "issue": self.issue,
            "action": self.action,
            "outcome": self.kind.value,
            "detail": self.detail,
        }


def observed_state(issue: Issue, pr: PullRequest | None, action: str) -> Hashable:
    """What a change of ends an issue's backoff: its status, labels, pull request and what is
    due. Not `updated_at`: Legion's own writes (a label put back after a failed move) move it."""
    review = None if pr is None else (pr.number, pr.state, pr.is_draft, pr.review, pr.checks)
    return (issue.status, issue.labels, review, action)
