"""The embedded tracker: issues, labels and comments in the project's SQLite database."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from legion.config import Project
from legion.core.marks import mark, unmark
from legion.core.model import Status, normalize_identifier
from legion.core.pickup import EVERY_ISSUE
from legion.core.text import clean_body, clean_comment, clean_title
from legion.errors import InputError, NotFoundError
from legion.store import Connection, Row, Store, now
from legion.trackers.base import (
    Comment,
    Issue,
    blocker_change,
    check_label,
    known_labels,
)


class LocalTracker:
    def __init__(self, db: Store, *, issue_key: str, extra_labels: Iterable[str] = ()) -> None:
        self._db = db
        self.issue_key = issue_key
        self.known_labels: tuple[str, ...] = known_labels(extra_labels)

    # -- reading -------------------------------------------------------------------------------

    def list_issues(self, *, status: Status | None = None, label: str | None = None) -> list[Issue]:
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT i.*, p.identifier AS parent_identifier FROM issues i "
                "LEFT JOIN issues p ON p.id = i.parent_id ORDER BY i.number"
            ).fetchall()
            labels = _labels_by_issue(conn, None)
            children = _children_by_issue(conn)
            blockers = _blockers_by_issue(conn)
        issues = [_issue(row, labels, children, blockers) for row in rows]
        if status is not None:
            issues = [issue for issue in issues if issue.status is status]
        if label is not None:
            wanted = self._label(label)
            issues = [issue for issue in issues if wanted in issue.labels]
        return issues

    def get_issue(self, identifier: str) -> Issue:
        with self._db.read() as conn:
            return self._load(conn, self._row_id(conn, identifier))

    def list_comments(self, identifier: str, *, newest: int | None = None) -> list[Comment]:
        with self._db.read() as conn:
            issue_id = self._row_id(conn, identifier)
            query = (
                "SELECT c.*, i.identifier FROM comments c JOIN issues i ON i.id = c.issue_id "
                "WHERE c.issue_id = ? ORDER BY c.id DESC"
            )
            arguments: tuple[int, ...] = (issue_id,)
            if newest is not None:
                query, arguments = f"{query} LIMIT ?", (issue_id, max(0, newest))
            rows = conn.execute(query, arguments).fetchall()
        return [_comment(row) for row in reversed(rows)]

    # -- writing -------------------------------------------------------------------------------

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
        title = clean_title(title)
        body = clean_body(body)
        label_names = sorted({self._label(name) for name in labels})
        blockers = list(blocked_by)
        with self._db.write() as conn:
            parent_id = self._row_id(conn, parent) if parent is not None else None
            blocker_ids = [self._blocker_id(conn, name, "the new issue") for name in blockers]
            number = conn.execute("SELECT COALESCE(MAX(number), 0) + 1 FROM issues").fetchone()[0]
            stamp = now()
            issue_id = conn.execute(
                "INSERT INTO issues (number, identifier, title, body, status, parent_id, "
                "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    number,
                    f"{self.issue_key}-{number}",
                    title,
                    body,
                    status.value,
                    parent_id,
                    stamp,
                    stamp,
                ),
            ).fetchone()[0]
            conn.executemany(
                "INSERT INTO issue_labels (issue_id, label) VALUES (?, ?)",
                [(issue_id, name) for name in label_names],
            )
            conn.executemany(
                "INSERT INTO issue_blockers (issue_id, blocker_id) VALUES (?, ?) "
                "ON CONFLICT DO NOTHING",
                [(issue_id, blocker_id) for blocker_id in blocker_ids],
            )
            return self._load(conn, int(issue_id))

    def set_status(self, identifier: str, status: Status) -> Issue:
        with self._db.write() as conn:
            issue_id = self._row_id(conn, identifier)
            conn.execute(
                "UPDATE issues SET status = ?, updated_at = ? WHERE id = ? AND status != ?",
                (status.value, now(), issue_id, status.value),
            )
            return self._load(conn, issue_id)

    def edit_issue(
        self, identifier: str, *, title: str | None = None, body: str | None = None
    ) -> Issue:
        new_title = clean_title(title) if title is not None else None
        new_body = clean_body(body) if body is not None else None
        with self._db.write() as conn:
            issue_id = self._row_id(conn, identifier)
            if new_title is not None:
                conn.execute(
                    "UPDATE issues SET title = ?, updated_at = ? WHERE id = ? AND title != ?",
                    (new_title, now(), issue_id, new_title),
                )
            if new_body is not None:
                conn.execute(
                    "UPDATE issues SET body = ?, updated_at = ? WHERE id = ? AND body != ?",
                    (new_body, now(), issue_id, new_body),
                )
            return self._load(conn, issue_id)

    def update_labels(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue:
        to_add = {self._label(name) for name in add}
        to_remove = {self._label(name) for name in remove}
        both = to_add & to_remove
        if both:
            raise InputError(f"label {sorted(both)[0]!r} is both added and removed")
        with self._db.write() as conn:
            issue_id = self._row_id(conn, identifier)
            changed = conn.executemany(
                "INSERT INTO issue_labels (issue_id, label) VALUES (?, ?) ON CONFLICT DO NOTHING",
                [(issue_id, name) for name in sorted(to_add)],
            ).rowcount
            changed += conn.executemany(
                "DELETE FROM issue_labels WHERE issue_id = ? AND label = ?",
                [(issue_id, name) for name in sorted(to_remove)],
            ).rowcount
            if changed > 0:
                conn.execute("UPDATE issues SET updated_at = ? WHERE id = ?", (now(), issue_id))
            return self._load(conn, issue_id)

    def set_blocked_by(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue:
        with self._db.write() as conn:
            issue_id = self._row_id(conn, identifier)
            me = normalize_identifier(identifier)
            graph: dict[str, list[str]] = defaultdict(list)
            for row in conn.execute(
                "SELECT i.identifier, b.identifier FROM issue_blockers x "
                "JOIN issues i ON i.id = x.issue_id JOIN issues b ON b.id = x.blocker_id"
            ):
                graph[row[0]].append(row[1])
            to_add, to_remove = blocker_change(me, add, remove, graph)
            added = [self._blocker_id(conn, name, me) for name in to_add]
            removed = [self._blocker_id(conn, name, me) for name in to_remove]
            changed = conn.executemany(
                "INSERT INTO issue_blockers (issue_id, blocker_id) VALUES (?, ?) "
                "ON CONFLICT DO NOTHING",
                [(issue_id, blocker_id) for blocker_id in added],
            ).rowcount
            changed += conn.executemany(
                "DELETE FROM issue_blockers WHERE issue_id = ? AND blocker_id = ?",
                [(issue_id, blocker_id) for blocker_id in removed],
            ).rowcount
            if changed > 0:
                conn.execute("UPDATE issues SET updated_at = ? WHERE id = ?", (now(), issue_id))
            return self._load(conn, issue_id)

    def add_comment(
        self, identifier: str, body: str, *, author: str, by_legion: bool = False
    ) -> Comment:
        body = clean_comment(body)
        author = clean_title(author) if author.strip() else "unknown"
        if by_legion:
            body = mark(body, author)
        with self._db.write() as conn:
            issue_id = self._row_id(conn, identifier)
            comment_id = conn.execute(
                "INSERT INTO comments (issue_id, author, body, created_at) VALUES (?, ?, ?, ?) "
                "RETURNING id",
                (issue_id, author, body, now()),
            ).fetchone()[0]
            row = conn.execute(
                "SELECT c.*, i.identifier FROM comments c JOIN issues i ON i.id = c.issue_id "
                "WHERE c.id = ?",
                (comment_id,),
            ).fetchone()
        return _comment(row)

    def edit_comment(
        self, identifier: str, comment_id: int | str, body: str, *, author: str
    ) -> Comment:
        body = mark(clean_comment(body), clean_title(author) if author.strip() else "unknown")
        with self._db.write() as conn:
            issue_id = self._row_id(conn, identifier)
            row = conn.execute(
                "SELECT id, body FROM comments WHERE id = ? AND issue_id = ?",
                (_comment_number(comment_id), issue_id),
            ).fetchone()
            # Only a comment Legion wrote (marked): a person's, even at an id Legion once had
            # (SQLite gives a deleted last row's id again), is never overwritten.
            if row is None or unmark(row["body"]).author is None:
                raise NotFoundError(
                    f"no comment {comment_id} of Legion's on {normalize_identifier(identifier)}"
                )
            conn.execute("UPDATE comments SET body = ? WHERE id = ?", (body, row["id"]))
            conn.execute("UPDATE issues SET updated_at = ? WHERE id = ?", (now(), issue_id))
            found = conn.execute(
                "SELECT c.*, i.identifier FROM comments c JOIN issues i ON i.id = c.issue_id "
                "WHERE c.id = ?",
                (row["id"],),
            ).fetchone()
        return _comment(found)

    # -- helpers -------------------------------------------------------------------------------

    def _label(self, name: str) -> str:
        return check_label(name, self.known_labels)

    def _row_id(self, conn: Connection, identifier: str) -> int:
        normalized = normalize_identifier(identifier)
        row = conn.execute("SELECT id FROM issues WHERE identifier = ?", (normalized,)).fetchone()
        if row is None:
            raise NotFoundError(f"no issue {normalized} (see `legion issue list`)")
        return int(row[0])

    def _blocker_id(self, conn: Connection, identifier: str, blocked: str) -> int:
        """The row of a blocker; one that does not exist is bad input, not a missing issue."""
        try:
            return self._row_id(conn, identifier)
        except NotFoundError:
            raise InputError(
                f"no issue {normalize_identifier(identifier)} to block {blocked} "
                "(see `legion issue list`)"
            ) from None

    def _load(self, conn: Connection, issue_id: int) -> Issue:
        row = conn.execute(
            "SELECT i.*, p.identifier AS parent_identifier FROM issues i "
            "LEFT JOIN issues p ON p.id = i.parent_id WHERE i.id = ?",
            (issue_id,),
        ).fetchone()
        children = conn.execute(
            "SELECT identifier FROM issues WHERE parent_id = ? ORDER BY number", (issue_id,)
        ).fetchall()
        return _issue(
            row,
            _labels_by_issue(conn, issue_id),
            {issue_id: [c[0] for c in children]},
            _blockers_by_issue(conn, issue_id),
        )


def _labels_by_issue(conn: Connection, issue_id: int | None) -> dict[int, list[str]]:
    if issue_id is None:
        rows = conn.execute("SELECT issue_id, label FROM issue_labels").fetchall()
    else:
        rows = conn.execute(
            "SELECT issue_id, label FROM issue_labels WHERE issue_id = ?", (issue_id,)
        ).fetchall()
    result: dict[int, list[str]] = defaultdict(list)
    for row in rows:
        result[row[0]].append(row[1])
    return result


def _children_by_issue(conn: Connection) -> dict[int, list[str]]:
    result: dict[int, list[str]] = defaultdict(list)
    for row in conn.execute(
        "SELECT parent_id, identifier FROM issues WHERE parent_id IS NOT NULL ORDER BY number"
    ):
        result[row[0]].append(row[1])
    return result


def _blockers_by_issue(conn: Connection, issue_id: int | None = None) -> dict[int, list[str]]:
    query = (
        "SELECT x.issue_id, b.identifier FROM issue_blockers x JOIN issues b ON b.id = x.blocker_id"
    )
    rows = (
        conn.execute(query + " ORDER BY b.number")
        if issue_id is None
        else conn.execute(query + " WHERE x.issue_id = ? ORDER BY b.number", (issue_id,))
    )
    result: dict[int, list[str]] = defaultdict(list)
    for row in rows:
        result[row[0]].append(row[1])
    return result


def _issue(
    row: Row,
    labels: dict[int, list[str]],
    children: dict[int, list[str]],
    blockers: dict[int, list[str]],
) -> Issue:
    return Issue(
        identifier=row["identifier"],
        title=row["title"],
        body=row["body"],
        status=Status(row["status"]),
        labels=frozenset(labels.get(row["id"], ())),
        parent=row["parent_identifier"],
        children=tuple(children.get(row["id"], ())),
        blocked_by=tuple(blockers.get(row["id"], ())),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _comment(row: Row) -> Comment:
    body, marker, asked = unmark(row["body"])
    return Comment(
        id=row["id"],
        issue=row["identifier"],
        author=row["author"],
        body=body,
        created_at=row["created_at"],
        by_legion=marker is not None,
        asked=asked,
        # Only this machine writes here: its user's commands, and sessions through the relay,
        # whose bodies cannot carry a marker (`core.marks.defanged`).
        by_member=True,
    )


def _comment_number(comment_id: int | str) -> int:
    """An embedded comment's id (a number); -1, which no comment has, for anything else."""
    text = str(comment_id)
    return int(text) if text.isdigit() and len(text) < 19 else -1


def open_tracker(project: Project, db: Store) -> LocalTracker:
    """The registry's opener (`legion.backends`)."""
    settings = project.settings
    # The opt-in labels are a person's to add to Backlog issues, here as on any tracker.
    opt_in = tuple(name for name in settings.backlog_opt_in_labels if name != EVERY_ISSUE)
    return LocalTracker(db, issue_key=settings.issue_key, extra_labels=settings.labels + opt_in)
