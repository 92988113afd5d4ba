"""Legion's own record of the children it created (`legion issue create --parent`), with who
asked: what makes an issue an epic (`legion.core.epics.splits_an_epic`), read by each pass,
`legion state` and `legion why`. Written where a person's or a session's writes are audited
(`trackers.audited`), never from what a tracker says a relation is."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from legion.core.epics import splits_an_epic
from legion.core.model import normalize_identifier
from legion.store import Store, now


class Splits:
    def __init__(self, db: Store) -> None:
        self.db = db

    def record(self, parent: str, child: str, author: str) -> None:
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO issue_splits (child, parent, author, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (child) DO NOTHING",
                (normalize_identifier(child), normalize_identifier(parent), author, now()),
            )

    def recorder(self, author: str) -> Callable[[str, str], None]:
        """What `AuditedTracker` calls with (parent, child) for each child `author` creates."""
        return lambda parent, child: self.record(parent, child, author)

    def epic_children(self) -> Mapping[str, tuple[str, ...]]:
        """Each parent's children that make it an epic, in the order they were created."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT parent, child, author FROM issue_splits ORDER BY created_at, child"
            ).fetchall()
        found: dict[str, list[str]] = {}
        for parent, child, author in rows:
            if splits_an_epic(str(author)):
                found.setdefault(str(parent), []).append(str(child))
        return {parent: tuple(children) for parent, children in found.items()}
