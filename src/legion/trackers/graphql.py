"""What the trackers over a GraphQL API (Linear, GitHub Issues) do the same way: the labels
they accept (and a change of an issue's labels, checked), a write about one issue, a
comment's text, cursor paging, the cached workspace (a team's states and labels, a
repository's labels and project) and the label created once.

Each adapter keeps what is its own (documents, identifiers, how a status is stored); what is
here was written twice before."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from legion.core.marks import mark
from legion.core.text import clean_comment, clean_title
from legion.errors import BackendError, BackendErrorKind, InputError, NotFoundError
from legion.files.private import write_private
from legion.graphql_client import Document, GraphQLClient, next_cursor
from legion.trackers.base import canonical_label, check_label, known_labels

CACHE_TTL_S = 600.0  # the cached workspace is refetched after this long
RECHECK_S = 60.0  # a missing state, label or option refetches it, at most this often


class Cacheable(Protocol):
    fetched_at: float

    def to_json(self) -> dict[str, Any]: ...


Cached = TypeVar("Cached", bound=Cacheable)
Found = TypeVar("Found")


@dataclass
class WorkspaceCache(Generic[Cached]):
    """One cached record of the tracker's workspace: in memory, in a private file of the state
    folder (shared between runs), else fetched. A file that is absent, damaged, of another
    version or for other settings (`read` raises or returns None) is fetched again."""

    fetch: Callable[[float], Cached]  # asks the API, at the time given
    read: Callable[[Mapping[str, Any]], Cached | None]  # the file's JSON, or None: not ours
    path: Path | None  # None: kept in memory only
    clock: Callable[[], float]
    # Whether a record exactly `max_age` old is still fresh (Linear's reads were `<=`).
    inclusive: bool = False
    _record: Cached | None = field(default=None, repr=False)

    def get(self, max_age: float = CACHE_TTL_S) -> Cached:
        now = self.clock()
        if self._record is None:
            self._record = self._read()
        cached = self._record
        if cached is not None:
            age = now - cached.fetched_at
            if age >= 0 and (age <= max_age if self.inclusive else age < max_age):
                return cached
        self._record = self.fetch(now)
        self.save(self._record)
        return self._record

    def save(self, record: Cached) -> None:
        """Keep `record` (changed in place, e.g. a label created) in the file too."""
        self._record = record
        if self.path is not None:
            write_private(self.path, json.dumps(record.to_json(), indent=1) + "\n")

    def _read(self) -> Cached | None:
        if self.path is None:
            return None
        try:
            return self.read(json.loads(self.path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # absent, from another version, or damaged: fetched again


def found_or_refetched(
    cache: WorkspaceCache[Cached], find: Callable[[Cached], Found | None]
) -> Found | None:
    """`find` in the cached workspace, else in one refetched when it is older than a minute
    (a state or label made since)."""
    found = find(cache.get())
    return found if found is not None else find(cache.get(max_age=RECHECK_S))


def created_once(
    create: Callable[[], Found],
    cache: WorkspaceCache[Cached],
    find: Callable[[Cached], Found | None],
) -> Found:
    """`create` a label; when the API refuses it as invalid because it was created meanwhile
    (another Legion, a person: "already taken"), the one now there."""
    try:
        return create()
    except BackendError as exc:
        if exc.kind is not BackendErrorKind.INVALID:
            raise
        again = find(cache.get(max_age=0))
        if again is None:
            raise
        return again


# Pages of one connection read at most: far past any issue's comments or a project's issues.
MAX_PAGES = 1000


def paged(
    fetch: Callable[[str | None], Mapping[str, Any]], backend: str = "graphql"
) -> Iterator[dict[str, Any]]:
    """Every node of a connection: `fetch(after)` returns one page of it (nodes, pageInfo);
    a null node (an item hidden from the credential) is skipped. A server that names a cursor
    it named before (it would be asked again without end), or pages past `MAX_PAGES`, is an
    error (`backend`'s), never a loop."""
    after: str | None = None
    seen: set[str] = set()
    while True:
        page = fetch(after)
        yield from (node for node in page["nodes"] if node)
        after = next_cursor(page)
        if after is None:
            return
        if after in seen or len(seen) >= MAX_PAGES:
            why = "named a page cursor again" if after in seen else f"paged past {MAX_PAGES}"
            raise BackendError(backend, BackendErrorKind.INVALID, f"the server {why}: stopped")
        seen.add(after)


def paged_back(
    fetch: Callable[[str | None, int], Mapping[str, Any]],
    limit: int,
    page_size: int,
    backend: str = "graphql",
) -> list[dict[str, Any]]:
    """The last `limit` nodes of a connection, read from its end: `fetch(before, last)`
    returns the page of (at most) `last` nodes before cursor `before` (nodes, pageInfo with
    `hasPreviousPage` and `startCursor`). In the connection's order; null nodes skipped. A
    cursor named twice, or pages past `MAX_PAGES` (of nodes all hidden), is an error
    (`backend`'s), never a loop."""
    pages: list[list[dict[str, Any]]] = []
    count = 0
    before: str | None = None
    seen: set[str] = set()
    while count < limit:
        page = fetch(before, min(page_size, limit - count))
        nodes = [node for node in page["nodes"] if node is not None]
        pages.append(nodes)
        count += len(nodes)
        info = page.get("pageInfo") or {}
        before = info.get("startCursor") if info.get("hasPreviousPage") else None
        if before is None or not page["nodes"]:
            break
        if before in seen or len(seen) >= MAX_PAGES:
            why = "named a page cursor again" if before in seen else f"paged past {MAX_PAGES}"
            raise BackendError(backend, BackendErrorKind.INVALID, f"the server {why}: stopped")
        seen.add(before)
    found = [node for nodes in reversed(pages) for node in nodes]
    return found[-limit:] if limit > 0 else []


def edited_comment(
    api: GraphQLClient, doc: Document, variables: Mapping[str, Any], issue: str, backend: str
) -> dict[str, Any]:
    """A comment edit's answer: a comment that is gone (deleted by a person) is a
    NotFoundError about that comment, not the issue."""
    try:
        return api.execute(doc, variables)
    except BackendError as exc:
        if exc.kind is BackendErrorKind.NOT_FOUND:
            raise NotFoundError(f"no comment {variables['id']} on {issue} in {backend}") from None
        raise


def legions_comment_on(
    node: object,
    issue: str,
    backend: str,
    *,
    owner: str,
    expected: str,
    by_legion: Callable[[Any], bool],
) -> None:
    """Before an edit: the comment (as read) is on the issue whose `owner` field is `expected`,
    and Legion wrote it (`by_legion`: the service says the key's account wrote it, and it
    carries Legion's marker). Else a NotFoundError, so the caller writes a new one rather than
    overwrite a person's comment or another issue's."""
    on = node.get("issue") if isinstance(node, dict) else None
    if not isinstance(on, dict) or str(on.get(owner)) != expected or not by_legion(node):
        raise NotFoundError(f"no comment of Legion's to edit on {issue} in {backend}")


def checked_comment(
    node: object, backend: str, doc: Document, *, owner: str, expected: str
) -> Mapping[str, Any]:
    """The comment an edit answered with, when its issue's `owner` field (`identifier`,
    `number`) is `expected`: Legion edits only the comment it wrote on that issue."""
    issue = node.get("issue") if isinstance(node, dict) else None
    if not isinstance(node, dict) or not isinstance(issue, dict):
        raise BackendError(
            backend, BackendErrorKind.INVALID, "the comment was not edited", operation=doc.name
        )
    if str(issue.get(owner)) != expected:
        raise BackendError(
            backend,
            BackendErrorKind.INVALID,
            "the comment edited is another issue's",
            operation=doc.name,
        )
    return node


def comment_text(body: str, author: str, *, by_legion: bool) -> str:
    """A comment's body as written: checked, and carrying Legion's marker (with the author it
    writes as) when Legion writes it."""
    body = clean_comment(body)
    author = clean_title(author) if author.strip() else "unknown"
    return mark(body, author) if by_legion else body


class GraphQLTracker:
    """The part of a tracker over a GraphQL API that Linear's and GitHub Issues' share: the
    labels it accepts, and a request about one issue, where "not found" means that issue."""

    known_labels: tuple[str, ...]

    def _accept_labels(self, extra_labels: tuple[str, ...]) -> None:
        self.known_labels = known_labels(extra_labels)

    def _api(self) -> GraphQLClient:
        """The client (a tracker may make it at its first request)."""
        raise NotImplementedError

    def _not_found(self, identifier: str) -> NotFoundError:
        raise NotImplementedError

    def _known_label(self, name: str) -> str:
        return check_label(name, self.known_labels)

    def _canonical_label(self, name: str) -> str:
        return canonical_label(name, self.known_labels)

    def _label_change(self, add: Iterable[str], remove: Iterable[str]) -> tuple[set[str], set[str]]:
        """The known labels to add and to remove; one both added and removed is refused."""
        to_add = {self._known_label(name) for name in add}
        to_remove = {self._known_label(name) for name in remove}
        both = to_add & to_remove
        if both:
            raise InputError(f"label {sorted(both)[0]!r} is both added and removed")
        return to_add, to_remove

    def _execute_for(
        self, identifier: str, doc: Document, variables: Mapping[str, Any]
    ) -> dict[str, Any]:
        """`doc` about one issue: an unknown issue is a NotFoundError."""
        try:
            return self._api().execute(doc, variables)
        except BackendError as exc:
            if exc.kind is BackendErrorKind.NOT_FOUND:
                raise self._not_found(identifier) from None
            raise
