"""A tracker that runs a check before one workflow label goes on an issue, and writes nothing
when the check refuses.

The daemon's relay uses it in a fleet: a worker's `worker-done` is the word that moves its
issue on, possibly to another host; what the worker committed must be on the shared remote
before that word is written (`legion.daemon.checkpoint_step.BranchSender`), or a host lost
just after it takes those commits with it (docs/failure-model.md, gap 23).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from legion.core.model import Label, Status
from legion.trackers.base import Comment, Issue, Tracker


class LabelGate:
    """`tracker`, but `before(identifier)` runs first whenever `label` is being put on an
    issue; what it raises (a LegionError saying why) goes back instead, the labels unchanged."""

    def __init__(self, tracker: Tracker, label: Label, before: Callable[[str], None]) -> None:
        self.tracker = tracker
        self.label = label
        self.before = before

    def update_labels(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue:
        add, remove = list(add), list(remove)
        if any(Label.from_name(name) is self.label for name in add):
            self.before(identifier)
        return self.tracker.update_labels(identifier, add=add, remove=remove)

    # -- the rest, as the tracker has them ----------------------------------------------------

    def list_issues(self, *, status: Status | None = None, label: str | None = None) -> list[Issue]:
        return self.tracker.list_issues(status=status, label=label)

    def get_issue(self, identifier: str) -> Issue:
        return self.tracker.get_issue(identifier)

    def create_issue(
        self,
        title: str,
        *,
        body: str = "",
        status: Status = Status.TODO,
        labels: Iterable[str] = (),
        parent: str | None = None,
        blocked_by: Iterable[str] = (),
    ) -> Issue:
        return self.tracker.create_issue(
            title, body=body, status=status, labels=labels, parent=parent, blocked_by=blocked_by
        )

    def set_status(self, identifier: str, status: Status) -> Issue:
        return self.tracker.set_status(identifier, status)

    def edit_issue(
        self, identifier: str, *, title: str | None = None, body: str | None = None
    ) -> Issue:
        return self.tracker.edit_issue(identifier, title=title, body=body)

    def set_blocked_by(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue:
        return self.tracker.set_blocked_by(identifier, add=add, remove=remove)

    def add_comment(
        self, identifier: str, body: str, *, author: str, by_legion: bool = False
    ) -> Comment:
        return self.tracker.add_comment(identifier, body, author=author, by_legion=by_legion)

    def edit_comment(
        self, identifier: str, comment_id: int | str, body: str, *, author: str
    ) -> Comment:
        return self.tracker.edit_comment(identifier, comment_id, body, author=author)

    def list_comments(self, identifier: str, *, newest: int | None = None) -> list[Comment]:
        return self.tracker.list_comments(identifier, newest=newest)
