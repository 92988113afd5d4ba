"""A forge whose writes go to the action log with their author (`noted_in`), as
`legion.trackers.audited`'s tracker."""

from __future__ import annotations

from typing import Any

from legion.forges.base import Forge, PullRequest
from legion.store.actionlog import Note


class AuditedForge:
    """A forge whose writes are noted (`noted_in`); its reads are the forge's own."""

    def __init__(self, inner: Forge, note: Note) -> None:
        self._inner = inner
        self._note = note

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create_pr(self, issue: str, branch: str, **options: Any) -> PullRequest:
        pr = self._inner.create_pr(issue, branch, **options)
        self._note(pr.issue or issue, "pr_create", f"#{pr.number}")
        return pr

    def set_draft(self, ref: str, draft: bool) -> PullRequest:
        pr = self._inner.set_draft(ref, draft)
        self._note(pr.issue or "-", "pr_draft" if draft else "pr_ready", f"#{pr.number}")
        return pr

    def add_review(self, ref: str, outcome: str, *, body: str, author: str) -> PullRequest:
        pr = self._inner.add_review(ref, outcome, body=body, author=author)
        self._note(pr.issue or "-", "pr_review", f"#{pr.number}: {outcome}")
        return pr

    def merge(self, ref: str, *, reviewed: str | None = None) -> PullRequest:
        pr = self._inner.merge(ref, reviewed=reviewed)
        self._note(pr.issue or "-", "pr_merge", f"#{pr.number}")
        return pr
