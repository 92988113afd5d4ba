"""What the daemon's pass last read of a service's tracker and forge (Linear's, GitHub's),
kept in the store, so that a board (the web view's, the TUI's) shows Legion's own changes
within a second of the pass that saw them, with no request of its own to a service whose rate
limit the swarm needs. Nothing announces a change made on Linear or GitHub to this machine;
the daemon's pass, which runs on each of Legion's own writes and at every tick, is the reader
that sees it.

A board uses it only while it is fresh (`FRESH_S`): older, it reads the service itself, at
most every 15 s (`legion.web.live.SLOW_S`), so a change a person made on the service shows no
later than it did before. Kept without the issues' bodies (a board shows none), as JSON read
back field by field; anything this version cannot read is not used (the service is read)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from legion.config.settings import Settings
from legion.core.model import ChecksState, Status
from legion.forges.base import Check, PrState, PullRequest, Review
from legion.plugins import EMBEDDED
from legion.store import Store
from legion.trackers.base import Comment, Issue

# How old a pass's reading may be for a board to show it rather than ask the service itself.
FRESH_S = 15.0
# A reading unchanged since the last kept is kept again (as fresh) no more often than this.
RESTAMP_S = 5.0


def on_a_service(settings: Settings) -> bool:
    """Whether the project's tracker or forge is a service's (Linear, GitHub): nothing here
    announces a change made there."""
    return settings.tracker != EMBEDDED or settings.forge != EMBEDDED


@dataclass(frozen=True, slots=True)
class Seen:
    """A pass's reading: the issues it listed, each issue's pull request as the forge gave it
    (open, else its latest), and when (seconds since the epoch)."""

    issues: tuple[Issue, ...]
    prs: Mapping[str, PullRequest]
    at: float

    def updated(self, identifier: str) -> str | None:
        """When the issue last changed, as the service said to the pass (a new comment, a
        label, a move); None when the pass did not list it."""
        for issue in self.issues:
            if issue.identifier == identifier:
                return issue.updated_at
        return None


class LastRead:
    """The store's one row of it."""

    def __init__(self, db: Store) -> None:
        self.db = db
        self._kept: tuple[str, float] | None = None  # this process's last write: digest, when

    def keep(self, issues: Iterable[Issue], prs: Mapping[str, PullRequest]) -> None:
        """Keep a pass's reading: written when it changed, or to say it is still fresh."""
        document = json.dumps(
            {
                "issues": [_issue_json(issue) for issue in issues],
                "prs": {issue: _pr_json(pr) for issue, pr in prs.items()},
            },
            sort_keys=True,
        )
        digest = hashlib.sha256(document.encode()).hexdigest()
        now = time.time()
        if self._kept is not None and self._kept[0] == digest and now - self._kept[1] < RESTAMP_S:
            return
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO last_read (id, taken_at, reading) VALUES (1, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET taken_at = excluded.taken_at, "
                "reading = excluded.reading",
                (now, document),
            )
        self._kept = (digest, now)

    def fresh(self, max_age: float = FRESH_S) -> Seen | None:
        """The last reading, when it is at most `max_age` seconds old and this version reads
        it; else None."""
        with self.db.read() as conn:
            row = conn.execute("SELECT taken_at, reading FROM last_read WHERE id = 1").fetchone()
        if row is None or time.time() - float(row[0]) > max_age:
            return None
        try:
            data = json.loads(row[1])
            issues = tuple(_issue(item) for item in data["issues"])
            prs = {str(issue): _pr(item) for issue, item in data["prs"].items()}
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError):
            return None
        return Seen(issues, prs, float(row[0]))


# An issue's comments as last asked of the service, by (issue, how many, its `updated_at` in
# the reading): asked again only when the pass saw the issue change. Bounded.
CommentCache = dict[tuple[str, int | None, str], list[Comment]]
_CACHED_AT_MOST = 1000


class SeenTracker:
    """A tracker whose listing is a pass's reading, and whose comments are asked of the
    service only when the reading shows their issue changed (with `comments`, a cache the
    caller keeps between reads); its other calls are the tracker's."""

    def __init__(self, inner: Any, seen: Seen, comments: CommentCache | None = None) -> None:
        self._inner = inner
        self._seen = seen
        self._comments = comments

    def list_comments(self, identifier: str, *, newest: int | None = None) -> list[Comment]:
        updated = self._seen.updated(identifier)
        if self._comments is None or updated is None:
            return list(self._inner.list_comments(identifier, newest=newest))
        key = (identifier, newest, updated)
        found = self._comments.get(key)
        if found is None:
            found = list(self._inner.list_comments(identifier, newest=newest))
            if len(self._comments) >= _CACHED_AT_MOST:
                self._comments.clear()
            self._comments[key] = found
        return list(found)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def list_issues(self, *, status: Status | None = None, label: str | None = None) -> list[Issue]:
        return [
            issue
            for issue in self._seen.issues
            if (status is None or issue.status is status)
            and (label is None or label in issue.labels)
        ]


class SeenForge:
    """A forge whose pull requests by issue are a pass's reading (its other calls are the
    forge's)."""

    def __init__(self, inner: Any, seen: Seen) -> None:
        self._inner = inner
        self._seen = seen

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def prs_by_issue(
        self, issues: Collection[str], links: Mapping[str, Collection[str]] | None = None
    ) -> dict[str, PullRequest]:
        known = self._seen.prs
        read = {issue.identifier for issue in self._seen.issues}
        unread = [i for i in issues if i not in read]
        found = {i: known[i] for i in issues if i in known}
        if unread:  # not in the pass's reading (a Done issue's): the forge's own answer
            found |= self._inner.prs_by_issue(unread, links=links)
        return found


def _issue_json(issue: Issue) -> dict[str, Any]:
    return {
        "identifier": issue.identifier,
        "title": issue.title,
        "status": issue.status.value,
        "labels": sorted(issue.labels),
        "parent": issue.parent,
        "children": list(issue.children),
        "created_at": issue.created_at,
        "updated_at": issue.updated_at,
        "id": issue.id,
        "url": issue.url,
        "backend_status": issue.backend_status,
        "links": list(issue.links),
        "blocked_by": list(issue.blocked_by),
    }


def _issue(data: Mapping[str, Any]) -> Issue:
    return Issue(
        identifier=_text(data["identifier"]),
        title=_text(data["title"]),
        body="",  # not kept: a board shows none
        status=Status(data["status"]),
        labels=frozenset(_texts(data["labels"])),
        parent=None if data["parent"] is None else _text(data["parent"]),
        children=_texts(data["children"]),
        created_at=_text(data["created_at"]),
        updated_at=_text(data["updated_at"]),
        id=_text(data["id"]),
        url=_text(data["url"]),
        backend_status=_text(data["backend_status"]),
        links=_texts(data["links"]),
        blocked_by=_texts(data["blocked_by"]),
    )


def _pr_json(pr: PullRequest) -> dict[str, Any]:
    return {
        "number": pr.number,
        "issue": pr.issue,
        "title": pr.title,
        "branch": pr.branch,
        "base": pr.base,
        "state": pr.state.value,
        "is_draft": pr.is_draft,
        "reviews": [[r.outcome, r.author, r.created_at, r.by_member] for r in pr.reviews],
        "merge_commit": pr.merge_commit,
        "created_at": pr.created_at,
        "updated_at": pr.updated_at,
        "url": pr.url,
        "checks": [[c.name, c.state.value, c.url] for c in pr.check_runs],
        "from_fork": pr.from_fork,
    }


def _pr(data: Mapping[str, Any]) -> PullRequest:
    number, draft, fork = data["number"], data["is_draft"], data["from_fork"]
    if not isinstance(number, int) or not isinstance(draft, bool) or not isinstance(fork, bool):
        raise ValueError("not a pull request")
    return replace(
        PullRequest(
            number=number,
            issue=_text(data["issue"]),
            title=_text(data["title"]),
            body="",
            branch=_text(data["branch"]),
            base=_text(data["base"]),
            state=PrState(data["state"]),
            is_draft=draft,
        ),
        reviews=tuple(
            Review(_text(outcome), _text(author), "", _text(at), bool(member))
            for outcome, author, at, member in data["reviews"]
        ),
        merge_commit=None if data["merge_commit"] is None else _text(data["merge_commit"]),
        created_at=_text(data["created_at"]),
        updated_at=_text(data["updated_at"]),
        url=_text(data["url"]),
        check_runs=tuple(
            Check(_text(name), ChecksState(state), _text(url))
            for name, state, url in data["checks"]
        ),
        from_fork=fork,
    )


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("not a text")
    return value


def _texts(values: object) -> tuple[str, ...]:
    if not isinstance(values, list):
        raise ValueError("not a list")
    return tuple(_text(value) for value in values)
