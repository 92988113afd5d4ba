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


@dataclass(frozen=True, slots=True)
class CommentEdit:
    """How a service edits one of Legion's comments: the read of the comment by its id and
    the mutation, where each answer holds the comment, and which field of the comment's issue
    names it (`identifier` on Linear, `number` on GitHub)."""

    backend: str
    read: Document
    read_field: str  # the read's answer: {read_field: comment}
    update: Document
    update_path: tuple[str, str]  # the mutation's answer: {outer: {inner: comment}}
    owner: str
    variables: Callable[[str, str], dict[str, Any]]  # (comment id, body) -> the mutation's


def edit_legions_comment(
    api: GraphQLClient,
    how: CommentEdit,
    comment_id: str,
    body: str,
    *,
    issue: str,
    expected: str,
    by_legion: Callable[[Mapping[str, Any]], bool],
) -> Mapping[str, Any]:
    """Replace the body of Legion's comment `comment_id` on `issue` (whose `how.owner` field
    is `expected`), and the comment as edited. Read first: one that is gone, on another issue,
    or not Legion's (`by_legion`: the key's account wrote it, with Legion's marker; a person's,
    which GitHub lets a collaborator's token edit) is a NotFoundError, never edited."""
    found = _comment_request(api, how.read, {"id": comment_id}, issue, how.backend)
    comment = found.get(how.read_field)
    if not isinstance(comment, dict) or not _on(comment, how.owner, expected):
        raise NotFoundError(f"no comment of Legion's to edit on {issue} in {how.backend}")
    if not by_legion(comment):
        raise NotFoundError(f"no comment of Legion's to edit on {issue} in {how.backend}")
    data = _comment_request(api, how.update, how.variables(comment_id, body), issue, how.backend)
    outer, inner = how.update_path
    edited = (data.get(outer) or {}).get(inner)
    if not isinstance(edited, dict) or not _on(edited, how.owner, expected):
        raise BackendError(
            how.backend,
            BackendErrorKind.INVALID,
            "the comment edited is not the one read",
            operation=how.update.name,
        )
    return edited


def _on(comment: Mapping[str, Any], owner: str, expected: str) -> bool:
    """Whether `comment` (an answer's node) is one on the issue whose `owner` is `expected`."""
    issue = comment.get("issue")
    return isinstance(issue, dict) and str(issue.get(owner)) == expected


def _comment_request(
    api: GraphQLClient, doc: Document, variables: Mapping[str, Any], issue: str, backend: str
) -> dict[str, Any]:
    """A request about a comment: one that is gone (a person deleted it) is a NotFoundError
    about that comment, not the issue."""
    try:
        return api.execute(doc, variables)
    except BackendError as exc:
        if exc.kind is BackendErrorKind.NOT_FOUND:
            raise NotFoundError(f"no comment {variables['id']} on {issue} in {backend}") from None
        raise


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
