"""A tracker whose writes go to the action log with their author (`noted_in`): put where a
person or a session writes, never under the reconciler (whose writes are its actions, logged
with what they were decided from). The log keeps which write it was, never what was written (a
comment's body or a title: text a stranger may have chosen)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from legion.core.model import Status
from legion.errors import LegionError
from legion.store.actionlog import Note
from legion.trackers.base import Comment, Issue, Tracker

logger = logging.getLogger(__name__)


def _labels(add: Iterable[str], remove: Iterable[str]) -> str:
    """The labels asked for, as the tracker compares them (trimmed, one space between words):
    what a write asked, never a name padded to fill the log."""
    shown = [
        *(f"+{' '.join(a.split())}" for a in add),
        *(f"-{' '.join(r.split())}" for r in remove),
    ]
    return " ".join(shown)


class AuditedTracker:
    """A tracker whose writes are noted (`noted_in`); its reads are the tracker's own."""

    def __init__(
        self, inner: Tracker, note: Note, split: Callable[[str, str], None] | None = None
    ) -> None:
        """`split`: told (parent, child) of each child created (`trackers.splits`)."""
        self._inner = inner
        self._note = note
        self._split = split

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create_issue(self, title: str, **options: Any) -> Issue:
        issue = self._inner.create_issue(title, **options)
        self._note(issue.identifier, "issue_create", f"in {issue.status.value}")
        parent = options.get("parent")
        if parent and self._split is not None:
            # The issue is made: a record that cannot be kept loses the split (the child makes
            # no epic, said in the log), never the answer that it was created.
            try:
                self._split(str(parent), issue.identifier)
            except LegionError as exc:
                logger.warning("%s's parent %s is not recorded: %s", issue.identifier, parent, exc)
        return issue

    def set_status(self, identifier: str, status: Status) -> Issue:
        issue = self._inner.set_status(identifier, status)
        self._note(issue.identifier, "issue_move", f"to {status.value}")
        return issue

    def edit_issue(
        self, identifier: str, *, title: str | None = None, body: str | None = None
    ) -> Issue:
        issue = self._inner.edit_issue(identifier, title=title, body=body)
        what = [name for name, value in (("title", title), ("body", body)) if value is not None]
        self._note(issue.identifier, "issue_edit", " and ".join(what))
        return issue

    def update_labels(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue:
        add, remove = list(add), list(remove)
        issue = self._inner.update_labels(identifier, add=add, remove=remove)
        if add or remove:  # asking for nothing changes nothing: no entry
            self._note(issue.identifier, "issue_label", _labels(add, remove))
        return issue

    def set_blocked_by(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue:
        add, remove = list(add), list(remove)
        issue = self._inner.set_blocked_by(identifier, add=add, remove=remove)
        if add or remove:
            self._note(issue.identifier, "issue_block", _labels(add, remove))
        return issue

    def add_comment(
        self, identifier: str, body: str, *, author: str, by_legion: bool = False
    ) -> Comment:
        added = self._inner.add_comment(identifier, body, author=author, by_legion=by_legion)
        self._note(added.issue, "issue_comment", f"comment {added.id}")
        return added

    def edit_comment(
        self, identifier: str, comment_id: int | str, body: str, *, author: str
    ) -> Comment:
        edited = self._inner.edit_comment(identifier, comment_id, body, author=author)
        self._note(edited.issue, "comment_edit", f"comment {edited.id}")
        return edited
