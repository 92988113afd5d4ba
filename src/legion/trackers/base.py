"""What Legion needs from an issue tracker. Embedded, Linear and GitHub adapters implement it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from legion.core.marks import LegionQuestion
from legion.core.model import Label, Status, normalize_identifier
from legion.core.task_sync import TASKS_AUTHOR
from legion.errors import InputError

# The comments Legion reads of an issue at a look (an answer, a budget's reply): the latest
# this many, one request on Linear and GitHub, however many the issue holds.
RECENT_COMMENTS = 100


@dataclass(frozen=True, slots=True)
class Issue:
    identifier: str  # the human identifier: LEG-12, ENG-12
    title: str
    body: str
    status: Status
    labels: frozenset[str]
    parent: str | None = None
    children: tuple[str, ...] = ()
    created_at: str = ""
    updated_at: str = ""
    id: str = ""  # the backend's stable id (Linear's UUID); the identifier where it has none
    url: str = ""  # where a person opens it; "" for the embedded tracker
    backend_status: str = ""  # the backend's own name for the status ("In Review")
    # URLs of the pull requests the tracker knows are this issue's (Linear's attachments,
    # GitHub's closing references): how the forge finds a PR on a branch not named for it.
    links: tuple[str, ...] = ()
    # Identifiers of the issues that block this one (it waits until they are Done), in order.
    blocked_by: tuple[str, ...] = ()

    @property
    def workflow_labels(self) -> frozenset[Label]:
        return frozenset(label for label in map(Label.from_name, self.labels) if label is not None)


@dataclass(frozen=True, slots=True)
class Comment:
    id: int | str
    issue: str
    author: str
    body: str  # without Legion's marker
    created_at: str
    # Written by Legion or one of its workers: the marker Legion puts in every comment it
    # writes, on a comment the service says Legion's own account wrote (GitHub's
    # `viewerDidAuthor`, Linear's `isMe`; the embedded tracker has no other writer). A marker
    # anyone else wrote is text like any other: never a name string, never the text alone.
    by_legion: bool = False
    # Written by an integration (a Linear app, a GitHub bot): never a person's answer.
    by_bot: bool = False
    # Written by someone who decides for the project, as the service says: the repository's
    # owner, a member or a collaborator (GitHub's `authorAssociation`), a member of the
    # workspace who is no guest (Linear), anyone on this machine (the embedded tracker), or
    # Legion's own account. Only such a comment answers a question (`reconcile.answers`).
    by_member: bool = False
    # The question Legion asked for itself in it (its budget, a worker that keeps dying).
    asked: LegionQuestion | None = None

    @property
    def speaks(self) -> bool:
        """Legion's (or a worker's) turn in the issue's conversation: what a person's answer
        follows. Not a record Legion keeps up to date in a comment (a worker's task list)."""
        return self.by_legion and self.author not in RECORD_AUTHORS


# Legion's comments that are records, not turns of the conversation (`Comment.speaks`).
RECORD_AUTHORS = frozenset({TASKS_AUTHOR})

WORKFLOW_LABELS: tuple[str, ...] = tuple(label.value for label in Label)


def known_labels(extra: Iterable[str]) -> tuple[str, ...]:
    """The labels a tracker accepts: the workflow labels, then the project's own (`labels`)."""
    return WORKFLOW_LABELS + tuple(name for name in extra if name not in WORKFLOW_LABELS)


def check_label(name: str, known: Iterable[str]) -> str:
    """The known label `name` names, in its known spelling (any case); else a one-line error
    that lists the known ones and where to add one."""
    workflow = Label.from_name(name)
    if workflow is not None:
        return workflow.value
    listed = tuple(known)
    cleaned = name.strip().casefold()
    for label in listed:
        if label.casefold() == cleaned:
            return label
    raise InputError(
        f"unknown label {name!r} (known: {', '.join(listed)}; "
        "add your own to `labels` in .legion/config.toml)"
    )


def canonical_label(name: str, known: Iterable[str]) -> str:
    """Legion's spelling of a label it knows; any other label as the tracker has it."""
    try:
        return check_label(name, known)
    except InputError:
        return name


def blocker_change(
    identifier: str,
    add: Iterable[str],
    remove: Iterable[str],
    blocked_by: Mapping[str, Iterable[str]],
) -> tuple[list[str], list[str]]:
    """The blockers to add to and remove from `identifier` (normalized, each once, in order),
    checked against the relation as it stands (`blocked_by`: issue -> its blockers, as far as
    the tracker knows it). Refused with one line: an issue blocking itself, a blocker both added
    and removed, and an addition that would close a cycle (the new blocker is already waiting,
    through its own blockers, for `identifier`). Whether each blocker exists is the tracker's
    to check."""
    me = normalize_identifier(identifier)
    to_add = list(dict.fromkeys(normalize_identifier(name) for name in add))
    to_remove = list(dict.fromkeys(normalize_identifier(name) for name in remove))
    if me in to_add:
        raise InputError(f"{me} cannot be blocked by itself")
    both = set(to_add) & set(to_remove)
    if both:
        raise InputError(f"blocker {sorted(both)[0]} is both added and removed")
    edges = {
        normalize_identifier(k): [normalize_identifier(v) for v in vs]
        for k, vs in blocked_by.items()
    }
    for blocker in to_add:
        path = _waits_for(blocker, me, edges)
        if path is not None:
            chain = " -> ".join([me, *path])
            raise InputError(
                f"{me} cannot be blocked by {blocker}: {blocker} already waits for {me} "
                f"(blocked by: {chain}), which would make a cycle"
            )
    return to_add, to_remove


def _waits_for(start: str, target: str, edges: Mapping[str, list[str]]) -> list[str] | None:
    """The chain start -> ... -> target following blockers, or None when there is none."""
    previous: dict[str, str | None] = {start: None}
    queue = [start]
    while queue:
        current = queue.pop(0)
        if current == target:
            chain = [current]
            while (before := previous[chain[-1]]) is not None:
                chain.append(before)
            return chain[::-1]
        for blocker in edges.get(current, ()):
            if blocker not in previous:
                previous[blocker] = current
                queue.append(blocker)
    return None


class Tracker(Protocol):
    """The single path through which Legion reads and writes issues."""

    def list_issues(
        self, *, status: Status | None = None, label: str | None = None
    ) -> list[Issue]: ...

    def get_issue(self, identifier: str) -> Issue: ...

    def create_issue(
        self,
        title: str,
        *,
        body: str = "",
        status: Status = Status.TODO,
        labels: Iterable[str] = (),
        parent: str | None = None,
        blocked_by: Iterable[str] = (),
    ) -> Issue: ...

    def set_status(self, identifier: str, status: Status) -> Issue: ...

    def edit_issue(
        self, identifier: str, *, title: str | None = None, body: str | None = None
    ) -> Issue:
        """Set the issue's title and/or body (None: unchanged), checked as at creation. The
        lines Legion keeps in a body (GitHub's `Parent:` and `Blocked by`) are kept."""
        ...

    def update_labels(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue: ...

    def set_blocked_by(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue:
        """Add and remove the issues blocking `identifier`. Adding a present blocker or
        removing an absent one is a no-op; a blocker that does not exist, the issue itself and
        a cycle are refused (InputError)."""
        ...

    def add_comment(
        self, identifier: str, body: str, *, author: str, by_legion: bool = False
    ) -> Comment:
        """Comment as `author`; `by_legion` when Legion or a worker writes it (it is marked)."""
        ...

    def edit_comment(
        self, identifier: str, comment_id: int | str, body: str, *, author: str
    ) -> Comment:
        """Replace the body of a comment Legion wrote on the issue (its task list, kept in
        one comment), marked as `author`'s; NotFoundError when the comment is gone (a person
        deleted it). Only Legion edits: a session's tracker refuses."""
        ...

    def list_comments(self, identifier: str, *, newest: int | None = None) -> list[Comment]:
        """The issue's comments, oldest first; with `newest`, only that many of the latest
        (read from the end: what Legion looks for is recent, and an issue may hold thousands)."""
        ...


# How far back a look reaches when the latest comments hold none of Legion's (an issue flooded
# since it asked): ten requests at most on Linear and GitHub, then the question is out of reach
# and nothing answers it (the issue keeps waiting for a person).
THREAD_COMMENTS = 1000


def since_legion_wrote(tracker: Tracker, issue: str) -> list[Comment]:
    """The issue's latest comments, reaching back to the last one Legion (or a worker) wrote,
    where its question is: the latest `RECENT_COMMENTS` (one request), or, when none of those
    is Legion's, up to `THREAD_COMMENTS`. Oldest first."""
    comments = tracker.list_comments(issue, newest=RECENT_COMMENTS)
    if len(comments) < RECENT_COMMENTS or any(comment.speaks for comment in comments):
        return comments
    return tracker.list_comments(issue, newest=THREAD_COMMENTS)
