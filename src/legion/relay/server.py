"""The daemon's end of the relay: a Unix socket on which sessions' `legion` commands ask for
tracker and forge calls, and the scope rules each request is checked against.

The socket (`legion.relay.socket_path`) is created 0600 in a 0700 folder the server checks is
this user's, and each connection's peer is checked to be this user too (where the system
says): only this user's processes can ask. A socket file left by a killed daemon is replaced;
the daemon holds the project's lock, so the socket is its alone.

Connections are served concurrently, each in a thread of its own (at most `MAX_CONNECTIONS` at
once; more wait in the socket's backlog until one ends): each is one request and one answer,
and a client has `REQUEST_DEADLINE_S` in all to send its whole request, however it trickles it,
then it is dropped; so one slow or stuck client never holds up another session. The requests
themselves are run one at a time by one executor thread, on the server's own `Backends`, opened
(with the real openers, which read the daemon's credentials) in that thread, beside the
daemon's own (a SQLite connection stays in its thread). An operation that takes long (a
command the daemon runs for the controller) checks its scope there and returns a `Deferred`,
which the request's own connection thread finishes.

Besides the tracker's and the forge's operations (`OPS`, below), the server answers those it
is given (`ops`): the service layer's `legion.services.session_ops`, what a session does as itself
(the bus, its wake-up context, the controller's commands).

Every request carries a capability (`legion.relay.capabilities`). A `project` capability (the
controller, its Oracle) may make any call. An `issue` capability for issue X (a worker) may:

- read X, its parent and its children (`get_issue`, `list_comments`), and their pull requests
  (`get_pr`, `prs_by_issue`; the PRs it says are linked to one count only where the tracker
  links them);
- write X: `set_status`, `update_labels`, `add_comment`;
- create an issue with `parent=X` (an architect's sub-issues), or one with no parent in Triage
  (the retro's "new issue for triage", which a human sorts before anything works on it);
- set what blocks X or one of X's children (`set_blocked_by`, and `create_issue`'s
  `blocked_by`), with blockers it may read (X, its parent, its children): an architect orders
  its sub-issues and makes X wait for them;
- read the CI checks and a check's log of X's own pull request only (`pr_checks`);
- open X's pull request (`create_pr(issue=X)`), and `set_draft`, `add_review` and `merge` only a
  pull request whose issue is X, each only in its role (`legion.core.roles`: the implementer
  opens it, only a review session reviews, only a finish session marks it ready and merges);
  an approval records the head it saw (`legion.forges.reviewed.ReviewedHeads`), and a merge
  lands only that head's work (`legion.core.reviewed_head`: but for notes under
  `docs/solutions/` and a clean merge of the base);
- nothing else: listing every issue or pull request, or any call on another issue, is refused
  with one line (`NotPermittedError`, exit 2) naming what it may act on and what it asked for.

A refusal (and an unknown capability) is written to the action log, without the token.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import socket
import socketserver
import stat
import struct
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import CancelledError, Future
from pathlib import Path
from typing import Any, Protocol

from legion.core import marks, roles
from legion.core.ids import branch_for
from legion.core.model import ReviewOutcome, Status, normalize_identifier
from legion.core.ratelimit import Bucket
from legion.core.reviewed_head import no_reviewed_head
from legion.daemon_link import own_short_folder
from legion.errors import (
    BackendError,
    BackendErrorKind,
    ConfigError,
    InputError,
    LegionError,
    NotFoundError,
    NotPermittedError,
    ProtocolError,
)
from legion.files.private import private_folder
from legion.forges.base import Forge, PrState, PullRequest
from legion.forges.reviewed import ReviewedHeads
from legion.relay import fallback_folder, socket_path
from legion.relay.capabilities import Capabilities, Scope
from legion.relay.protocol import (
    MAX_LINE_BYTES,
    dump_line,
    error_answer,
    load_line,
    parse_request,
    result_answer,
)
from legion.store import Store
from legion.store.actionlog import ActionLog, OutcomeKind
from legion.trackers.base import Issue, Tracker

logger = logging.getLogger(__name__)


class Backends(Protocol):
    """What the relay answers with: the project's tracker and forge (the real ones, which hold
    the credentials) and its database (the capabilities, the action log). `legion.backends`
    opens them; the relay takes whatever it is handed."""

    @property
    def tracker(self) -> Tracker: ...
    @property
    def forge(self) -> Forge: ...
    @property
    def db(self) -> Store: ...


# A client has this long in all to send its whole request once connected (and as long to read
# the answer): a client that trickles its bytes is cut then, whatever its pace.
REQUEST_DEADLINE_S = 10.0
# Connections served at once; more wait in the backlog until one ends.
MAX_CONNECTIONS = 32
# How long `stop` waits for a request in progress to finish before it goes anyway.
STOP_WAIT_S = 5.0


def _same(a: str, b: str) -> bool:
    return _key(a) == _key(b)


def _key(identifier: str) -> str:
    try:
        return normalize_identifier(identifier)
    except InputError:
        return identifier.strip().upper()


def _looks_like_issue(ref: str) -> bool:
    try:
        normalize_identifier(ref)
    except InputError:
        return False
    return True


class Call:
    """One request being checked and run: its arguments, its scope, the backends."""

    def __init__(
        self,
        backends: Backends,
        scope: Scope,
        op: str,
        args: dict[str, Any],
        capability: str = "",
        created: dict[str, int] | None = None,
    ):
        self.backends = backends
        self.capability = capability  # the token the request came with (the session's own)
        # Issues each capability created (`legion.core.roles.CREATION_ROLES`' bound).
        self.created = {} if created is None else created
        self.tracker = backends.tracker
        self.forge = backends.forge
        self.scope = scope
        self.op = op
        self.args = args

    # -- arguments ---------------------------------------------------------------------------

    def text(self, name: str) -> str:
        value = self.args.get(name)
        if not isinstance(value, str):
            raise ProtocolError(f"{self.op}: argument {name!r} must be text")
        return value

    def optional_text(self, name: str) -> str | None:
        return None if self.args.get(name) is None else self.text(name)

    def written(self, name: str) -> str:
        """A body the session wrote, as it goes on the tracker or forge: with no marker of
        Legion's in it (`legion.core.marks.defanged`), whoever's capability it is."""
        return marks.defanged(self.text(name))

    def texts(self, name: str) -> list[str]:
        value = self.args.get(name, [])
        items = list(value) if isinstance(value, list | tuple | frozenset) else None
        if items is None or not all(isinstance(item, str) for item in items):
            raise ProtocolError(f"{self.op}: argument {name!r} must be a list of text")
        return items

    def text_lists(self, name: str) -> dict[str, list[str]]:
        """A mapping of text to lists of text; empty when the argument is absent."""
        value = self.args.get(name, {})
        if not isinstance(value, dict) or not all(
            isinstance(key, str)
            and isinstance(items, list | tuple)
            and all(isinstance(item, str) for item in items)
            for key, items in value.items()
        ):
            raise ProtocolError(f"{self.op}: argument {name!r} must map text to lists of text")
        return {key: list(items) for key, items in value.items()}

    def optional_int(self, name: str) -> int | None:
        value = self.args.get(name)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise ProtocolError(f"{self.op}: argument {name!r} must be a whole number")
        return value

    def flag(self, name: str) -> bool:
        value = self.args.get(name, False)
        if not isinstance(value, bool):
            raise ProtocolError(f"{self.op}: argument {name!r} must be true or false")
        return value

    def status(self, name: str) -> Status:
        value = self.args.get(name)
        if not isinstance(value, Status):
            raise ProtocolError(f"{self.op}: argument {name!r} must be a status")
        return value

    def optional_status(self, name: str) -> Status | None:
        return None if self.args.get(name) is None else self.status(name)

    def author(self) -> str:
        """Who a comment or review is from: a worker is its mode (`legion-review`), whatever
        it names; the controller and its Oracle name themselves."""
        if self.scope.issue is not None and self.scope.mode:
            return f"legion-{self.scope.mode}"
        return self.text("author")

    # -- scope -------------------------------------------------------------------------------

    def refuse(self, asked: str, *, reading: bool = False) -> NotPermittedError:
        assert self.scope.issue is not None
        mine = self.scope.issue
        if reading:
            return NotPermittedError(
                f"this worker may read only {mine}, its parent and its children (asked: {asked})"
            )
        return NotPermittedError(f"this worker may act only on {mine} (asked: {asked})")

    def who(self) -> str:
        """Who is asking, in the roles' tables (`legion.core.roles`): the worker's mode; for a
        project's capability the controller, or Legion's own pass run for it."""
        if self.scope.issue is not None:
            return self.scope.mode
        return roles.LEGION if self.scope.mode == roles.LEGION else roles.CONTROLLER

    def allowed(self, refusal: str | None) -> None:
        """Refuse with `refusal` (the roles' one line), unless it is None."""
        if refusal is not None:
            raise NotPermittedError(refusal)

    def in_role(self, operation: str) -> None:
        """Unless the worker's mode (or, for a project's capability, the controller) may make
        `operation` (`legion.core.roles`), refuse."""
        if self.scope.issue is None:
            why = roles.controller_refusal(operation)
        else:
            why = roles.refusal(self.scope.mode, operation)
        if why is not None:
            raise NotPermittedError(why)

    def own(self, identifier: str) -> None:
        """Unless the scope covers writing `identifier`, refuse."""
        if self.scope.issue is not None and not _same(identifier, self.scope.issue):
            raise self.refuse(identifier)

    def whole_project(self, asked: str) -> None:
        if self.scope.issue is not None:
            raise self.refuse(asked, reading=True)

    def related(self, issue: Issue) -> bool:
        """Whether `issue` is the scope's issue, its parent or one of its children."""
        mine = self.scope.issue
        if mine is None or _same(issue.identifier, mine):
            return True
        child = issue.parent is not None and _same(issue.parent, mine)
        parent = any(_same(child_id, mine) for child_id in issue.children)
        return child or parent

    def readable(self, identifier: str) -> None:
        """Unless the scope covers reading `identifier`, refuse."""
        mine = self.scope.issue
        if mine is None or _same(identifier, mine):
            return
        if not self.related(self.tracker.get_issue(identifier)):
            raise self.refuse(identifier, reading=True)

    def own_or_child(self, identifier: str) -> None:
        """Unless the scope covers writing `identifier` or one of its children (whose order
        the scope's issue sets), refuse."""
        mine = self.scope.issue
        if mine is None or _same(identifier, mine):
            return
        issue = self.tracker.get_issue(identifier)
        if issue.parent is None or not _same(issue.parent, mine):
            raise NotPermittedError(
                f"this worker may set what blocks only {mine} and its children "
                f"(asked: {identifier})"
            )

    def blockers(self, names: list[str], blocked: str) -> None:
        """Unless the scope may read every one of `names` (as blockers of `blocked`), refuse;
        one that does not exist is bad input."""
        for name in names:
            try:
                self.readable(name)
            except NotFoundError:
                raise InputError(
                    f"no issue {name} to block {blocked} (see `legion issue list`)"
                ) from None

    def own_pr(self, ref: str) -> None:
        """Unless the scope covers the pull request `ref` as its own issue's (a worker reads
        the CI checks and logs of its own PR only), refuse."""
        mine = self.scope.issue
        if mine is None:
            return
        if _looks_like_issue(ref):
            issue, asked = ref, ref
        else:
            issue = self.forge.get_pr(ref).issue  # which issue a number is for: the forge says
            asked = f"PR {ref} of {issue or 'no issue'}"
        if not _same(issue, mine):
            raise NotPermittedError(
                f"this worker may read the checks of only {mine}'s pull request (asked: {asked})"
            )

    def pr(self, ref: str, *, writing: bool) -> PullRequest | None:
        """Unless the scope covers the pull request `ref`, refuse. Returns it when it had to be
        fetched to tell (a number: which issue it is for is on the forge)."""
        mine = self.scope.issue
        if mine is None or (_looks_like_issue(ref) and _same(ref, mine)):
            return None
        if _looks_like_issue(ref):
            if writing:
                raise self.refuse(ref)
            self.readable(ref)
            return None
        pr = self.forge.get_pr(ref)
        if writing:
            self.own(pr.issue)
            # Its own pull request only: a fork's, or one on another branch whose body says
            # "Fixes" this issue, is someone else's work to review or merge.
            if pr.from_fork or pr.branch != branch_for(mine):
                where = "a fork" if pr.from_fork else pr.branch
                raise NotPermittedError(
                    f"this worker may write only its own pull request, from {branch_for(mine)} "
                    f"of this repository (PR {ref} is from {where})"
                )
        else:
            try:
                self.readable(pr.issue)
            except NotPermittedError:
                raise self.refuse(f"PR {ref} of {pr.issue}", reading=True) from None
        return pr


# -- the operations --------------------------------------------------------------------------------


def _list_issues(call: Call) -> Any:
    call.whole_project("every issue")
    return call.tracker.list_issues(
        status=call.optional_status("status"), label=call.optional_text("label")
    )


def _get_issue(call: Call) -> Any:
    identifier = call.text("identifier")
    issue = call.tracker.get_issue(identifier)
    if not call.related(issue):
        raise call.refuse(identifier, reading=True)
    return issue


def _create_issue(call: Call) -> Any:
    parent = call.optional_text("parent")
    status = call.status("status")
    labels = call.texts("labels")
    if parent is not None and call.scope.issue is not None:
        call.own(parent)
    call.allowed(
        roles.creation_refusal(
            call.who(),
            parent=parent,
            own=call.scope.issue,
            status=status,
            labels=frozenset(labels),
            created=call.created.get(call.capability, 0),
        )
    )
    blocked_by = call.texts("blocked_by")
    call.blockers(blocked_by, "the new issue")
    created = call.tracker.create_issue(
        call.text("title"),
        body=call.written("body"),
        status=status,
        labels=labels,
        parent=parent,
        blocked_by=blocked_by,
    )
    call.created[call.capability] = call.created.get(call.capability, 0) + 1
    return created


def _set_status(call: Call) -> Any:
    identifier = call.text("identifier")
    call.own(identifier)
    status = call.status("status")
    found = call.tracker.get_issue(identifier) if call.scope.issue is None else None
    call.allowed(
        roles.status_refusal(call.who(), status, found.status if found is not None else None)
    )
    return call.tracker.set_status(identifier, status)


def _update_labels(call: Call) -> Any:
    identifier = call.text("identifier")
    call.own(identifier)
    add, remove = call.texts("add"), call.texts("remove")
    found = call.tracker.get_issue(identifier) if call.scope.issue is None else None
    call.allowed(
        roles.label_refusal(
            call.who(),
            frozenset(add),
            frozenset(remove),
            frozenset(found.labels if found is not None else ()),
            found.status if found is not None else None,
        )
    )
    return call.tracker.update_labels(identifier, add=add, remove=remove)


def _set_blocked_by(call: Call) -> Any:
    identifier = call.text("identifier")
    add, remove = call.texts("add"), call.texts("remove")
    call.own_or_child(identifier)
    call.blockers(add + remove, identifier)
    return call.tracker.set_blocked_by(identifier, add=add, remove=remove)


def _add_comment(call: Call) -> Any:
    identifier = call.text("identifier")
    call.own(identifier)
    # Every caller is a session Legion started: what it writes is Legion's, whatever it says,
    # so a worker's comment is never read as a person's answer.
    return call.tracker.add_comment(
        identifier, call.written("body"), author=call.author(), by_legion=True
    )


# The most comments of one issue a session reads in one call: the latest this many. Every
# comment of an issue holding thousands would cost the daemon's token one request a hundred.
SESSION_COMMENTS = 500


def _list_comments(call: Call) -> Any:
    identifier = call.text("identifier")
    call.readable(identifier)
    newest = call.optional_int("newest")
    newest = SESSION_COMMENTS if newest is None else max(0, min(newest, SESSION_COMMENTS))
    return call.tracker.list_comments(identifier, newest=newest)


def _create_pr(call: Call) -> Any:
    issue = call.text("issue")
    call.own(issue)
    call.in_role("create_pr")
    branch = call.text("branch")
    if branch != branch_for(issue):  # another issue's work, or the base, as this one's
        raise NotPermittedError(
            f"a session opens {issue}'s pull request only from {branch_for(issue)} "
            f"(asked: {branch})"
        )
    title = call.optional_text("title")
    others = marks.foreign_references(title or "", issue)
    if others:  # a tracker links a pull request to every issue its title names
        raise NotPermittedError(
            f"a pull request's title names only its own issue, {issue} (it names {others[0]})"
        )
    return call.forge.create_pr(
        issue,
        branch,
        title=title,
        body=marks.inert_closing(call.written("body"), issue),
        draft=call.flag("draft"),
    )


def _get_pr(call: Call) -> Any:
    ref = call.text("ref")
    fetched = call.pr(ref, writing=False)
    return fetched if fetched is not None else call.forge.get_pr(ref)


def _list_prs(call: Call) -> Any:
    call.whole_project("every pull request")
    return call.forge.list_prs()


def _prs_by_issue(call: Call) -> Any:
    issues = call.texts("issues")
    for issue in issues:
        call.readable(issue)
    links = {issue: urls for issue, urls in call.text_lists("links").items() if issue in issues}
    if call.scope.issue is not None:
        # A worker's links count only where its tracker has them: a URL it names itself could
        # be any issue's pull request.
        links = {
            issue: [url for url in urls if url in call.tracker.get_issue(issue).links]
            for issue, urls in links.items()
        }
    kept = {issue: urls for issue, urls in links.items() if urls}
    return call.forge.prs_by_issue(issues, links=kept or None)


def _set_draft(call: Call) -> Any:
    ref = call.text("ref")
    call.pr(ref, writing=True)
    call.in_role("set_draft")
    return call.forge.set_draft(ref, call.flag("draft"))


def _branch_head(call: Call) -> Any:
    ref = call.text("ref")
    call.pr(ref, writing=False)
    return call.forge.branch_head(ref)


def _pr_checks(call: Call) -> Any:
    ref = call.text("ref")
    call.own_pr(ref)
    return call.forge.pr_checks(ref, log=call.optional_text("log"))


def _add_review(call: Call) -> Any:
    ref = call.text("ref")
    call.pr(ref, writing=True)
    call.in_role("add_review")
    outcome = call.text("outcome")
    # The head this approval is for, read before the review is recorded: a commit pushed
    # meanwhile is not taken as reviewed.
    head = call.forge.branch_head(ref) if outcome == "approved" else None
    pr = call.forge.add_review(ref, outcome, body=call.written("body"), author=call.author())
    heads = ReviewedHeads(call.backends.db)
    if outcome == "approved" and head is not None:
        heads.record(pr.number, pr.branch, head)
    elif outcome != "commented":
        heads.forget(pr.number)  # changes asked for (or no branch to pin): no approved head
    return pr


def _merge(call: Call) -> Any:
    ref = call.text("ref")
    call.pr(ref, writing=True)
    call.in_role("merge")
    pr = call.forge.get_pr(ref)
    if pr.state is not PrState.OPEN:
        return call.forge.merge(ref)  # merged already (done), or closed (refused there)
    if pr.review is not ReviewOutcome.APPROVED:
        # Whatever moved the issue along (its status is the worker's to write), only approved
        # work is merged by a session.
        raise NotPermittedError(
            f"PR #{pr.number} has no approving review: a review session approves it first"
        )
    # And only the work the approval saw (`legion.core.reviewed_head`): the head a review
    # session approved, from Legion's own records.
    reviewed = ReviewedHeads(call.backends.db).head(pr.number, pr.branch)
    if reviewed is None:
        raise NotPermittedError(no_reviewed_head(pr.number))
    return call.forge.merge(str(pr.number), reviewed=reviewed)


Operation = Callable[[Call], Any]


class Deferred:
    """What an operation returns to be finished outside the executor thread: `work` runs in
    the request's own connection thread (a command that takes seconds must not hold up every
    other session's requests), after the operation checked the scope in the executor's."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self.work = work

    def answer(self, op: str) -> dict[str, Any]:
        """The answer of `work`; never raises."""
        try:
            return result_answer(self.work())
        except LegionError as exc:
            return error_answer(exc)
        except Exception as exc:
            return _internal(op, exc)


def _internal(op: str, exc: Exception) -> dict[str, Any]:
    # A bug, or a backend's error it did not map: one line in the daemon's log, and the same
    # for the client, which reports an internal error.
    logger.error("relay: internal error in %s: %s: %s", op, type(exc).__name__, exc)
    return error_answer(exc)


OPS: dict[str, Operation] = {
    "tracker.list_issues": _list_issues,
    "tracker.get_issue": _get_issue,
    "tracker.create_issue": _create_issue,
    "tracker.set_status": _set_status,
    "tracker.update_labels": _update_labels,
    "tracker.set_blocked_by": _set_blocked_by,
    "tracker.add_comment": _add_comment,
    "tracker.list_comments": _list_comments,
    "forge.create_pr": _create_pr,
    "forge.get_pr": _get_pr,
    "forge.list_prs": _list_prs,
    "forge.prs_by_issue": _prs_by_issue,
    "forge.set_draft": _set_draft,
    "forge.branch_head": _branch_head,
    "forge.add_review": _add_review,
    "forge.merge": _merge,
    "forge.pr_checks": _pr_checks,
}


# -- answering a request -------------------------------------------------------------------------


# How many calls one capability may make through the relay (`legion.core.ratelimit`): a burst,
# then so many a second. A worker makes a few a minute, the controller more; a session that
# calls without end spends at most this much of the team's tracker and forge quota.
WORKER_CALLS = (60.0, 0.5)
CONTROLLER_CALLS = (240.0, 2.0)
# The buckets kept at once (one per capability seen; the oldest go first).
_MAX_BUCKETS = 4096
# Requests with an unknown capability are logged at most this often, with their count.
UNKNOWN_LOG_EVERY_S = 10.0


# Commands one capability may have the daemon run at once (`legion.run`, each in a connection
# of its own for up to its timeout): past them, one more is refused, so that one session never
# holds every connection slot.
MAX_COMMANDS_AT_ONCE = 4


class RelayExecutor:
    """Answers requests on backends it opens on first use (in the thread that calls it: a
    SQLite connection stays in its thread), again after a failed open."""

    def __init__(
        self,
        open_backends: Callable[[], Backends],
        ops: Mapping[str, Operation] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._open = open_backends
        self._backends: Backends | None = None
        # The tracker's and forge's, and what a service layer adds (the bus, Legion's records).
        self._ops = {**OPS, **(ops or {})}
        self._clock = clock
        self._buckets: dict[str, Bucket] = {}  # by capability; only the executor's thread
        self._unknown = 0  # unknown capabilities' requests not yet logged
        self._unknown_logged_at = -UNKNOWN_LOG_EVERY_S
        self._running: dict[str, int] = {}  # by capability: its deferred commands not done
        self._running_lock = threading.Lock()  # their ends are in connection threads
        self._created: dict[str, int] = {}  # issues each capability created; executor thread

    def _counted(self, capability: str, deferred: Deferred, op: str) -> Deferred:
        """`deferred`, counted against its capability's `MAX_COMMANDS_AT_ONCE` until its work
        ends; past them, refused as rate limited."""
        with self._running_lock:
            running = self._running.get(capability, 0)
            if running >= MAX_COMMANDS_AT_ONCE:
                raise BackendError(
                    "the Legion daemon",
                    BackendErrorKind.RATE_LIMITED,
                    f"this session has {running} commands running in the daemon already; "
                    "call again when one ends",
                    operation=op,
                    retry_after=1.0,
                )
            self._running[capability] = running + 1

        def work() -> Any:
            try:
                return deferred.work()
            finally:
                with self._running_lock:
                    left = self._running.pop(capability, 1) - 1
                    if left:
                        self._running[capability] = left

        return Deferred(work)

    def _within_rate(self, capability: str, scope: Scope, op: str) -> None:
        """Unless the capability has a call left (`WORKER_CALLS`, `CONTROLLER_CALLS`), refuse
        it as rate limited, saying when to call again."""
        now = self._clock()
        bucket = self._buckets.pop(capability, None)
        if bucket is None:
            capacity, per_second = WORKER_CALLS if scope.issue is not None else CONTROLLER_CALLS
            bucket = Bucket.full(capacity, per_second, now)
        bucket, wait = bucket.take(now)
        self._buckets[capability] = bucket  # the newest last
        while len(self._buckets) > _MAX_BUCKETS:
            del self._buckets[next(iter(self._buckets))]
        if wait > 0:
            raise BackendError(
                "the Legion daemon",
                BackendErrorKind.RATE_LIMITED,
                f"this session made more calls than its share ({bucket.capacity:g} at once, "
                f"then {bucket.per_second:g} a second); call again in {wait:.1f} s",
                operation=op,
                retry_after=wait,
            )

    def backends(self) -> Backends:
        if self._backends is None:
            self._backends = self._open()
        return self._backends

    def answer(self, line: bytes) -> dict[str, Any] | Deferred:
        """The answer to one request line (or what finishes it elsewhere); never raises."""
        op = "?"
        try:
            request = parse_request(load_line(line))
            op = request.op
            backends = self.backends()
            scope = Capabilities(backends.db).lookup(request.capability)
            if scope is None:
                unknown = NotPermittedError(
                    "the Legion daemon does not know this session's capability (revoked, or "
                    "from another project): the session must be started again by Legion"
                )
                raise self._logged_unknown(unknown)
            run = self._ops.get(op)
            if run is None:
                raise InputError(f"the Legion daemon has no operation {op!r}")
            self._within_rate(request.capability, scope, op)
            try:
                call = Call(backends, scope, op, request.args, request.capability, self._created)
                result = run(call)
            except NotPermittedError as exc:
                raise self._logged(scope, exc) from None
            if isinstance(result, Deferred):
                return self._counted(request.capability, result, op)
            return result_answer(result)
        except LegionError as exc:
            return error_answer(exc)
        except Exception as exc:
            return _internal(op, exc)

    def _logged_unknown(self, exc: NotPermittedError) -> NotPermittedError:
        """An unknown capability's refusal, in the action log at most once every
        `UNKNOWN_LOG_EVERY_S` (with how many came since): anyone who reaches the socket can
        send them without end, and each row would be a write."""
        self._unknown += 1
        now = self._clock()
        if now - self._unknown_logged_at >= UNKNOWN_LOG_EVERY_S:
            count, self._unknown, self._unknown_logged_at = self._unknown, 0, now
            told = exc if count == 1 else NotPermittedError(f"{exc.message} ({count} requests)")
            self._logged(None, told)
        return exc

    def _logged(self, scope: Scope | None, exc: NotPermittedError) -> NotPermittedError:
        issue = "-" if scope is None or scope.issue is None else scope.issue
        with contextlib.suppress(LegionError):
            ActionLog(self.backends().db).append(
                issue, "relay_refuse", OutcomeKind.FAILED, exc.message
            )
        return exc

    def close(self) -> None:
        if self._backends is None:
            return
        for backend in (self._backends.tracker, self._backends.forge):
            close = getattr(backend, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
        self._backends.db.close()
        self._backends = None


# -- the socket ----------------------------------------------------------------------------------


def prepare_folder(path: Path) -> None:
    """Make the socket's folder private (0700) and check it is this user's: the fallback folder
    is in /tmp, where another user could have made it first."""
    folder = path.parent
    if folder != fallback_folder():
        private_folder(folder)
        return
    try:
        own_short_folder()
    except PermissionError:
        raise ConfigError(
            f"{folder} is not a folder of this user: the Legion daemon cannot put its socket "
            "there; remove it, or set `state_dir` to a shorter path"
        ) from None


def remove_stale(path: Path) -> None:
    """A socket left by a killed daemon goes; anything else in the way is reported."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise ConfigError(f"{path} is in the way of the Legion daemon's socket: move it aside")
    path.unlink(missing_ok=True)


def _peer_uid(connection: socket.socket) -> int | None:
    """The uid of the process at the other end, where the system says (Linux)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        data = connection.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", data)
    return int(uid)


def read_request(connection: socket.socket, deadline: float) -> bytes | None:
    """One request line (up to its newline, or `MAX_LINE_BYTES + 1` bytes, or the end of the
    stream), read by `deadline` (a `time.monotonic()` instant); None when the client went or
    did not finish in time."""
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        connection.settimeout(left)
        try:
            chunk = connection.recv(min(65536, MAX_LINE_BYTES + 1 - size))
        except OSError:  # including the timeout
            return None
        if not chunk:
            return b"".join(chunks)
        newline = chunk.find(b"\n")
        if newline >= 0:
            chunks.append(chunk[: newline + 1])
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_LINE_BYTES:
            return b"".join(chunks)  # too long: the protocol says so


class _Handler(socketserver.BaseRequestHandler):
    server: _UnixServer
    request: socket.socket

    def handle(self) -> None:
        connection = self.request
        uid = _peer_uid(connection)
        if uid is not None and uid != os.getuid():
            return  # not this user's process: no answer at all
        line = read_request(connection, time.monotonic() + self.server.deadline)
        if line is None:
            return  # the client went, or did not send its request in time
        answer = self.server.run(line)
        if answer is None:
            return  # the server is stopping
        with contextlib.suppress(OSError):
            connection.settimeout(self.server.deadline)
            connection.sendall(dump_line(answer))


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """One thread per connection, at most `slots` at once."""

    daemon_threads = True
    block_on_close = False
    # Connections wait here while every slot is taken: every session may ask at once.
    request_queue_size = 128
    deadline: float
    slots: threading.BoundedSemaphore
    run: Callable[[bytes], dict[str, Any] | None]

    def process_request(self, request: Any, client_address: Any) -> None:
        # Waiting for a slot here keeps further connections in the backlog (not refused);
        # every connection ends within its deadline, so the wait is bounded.
        self.slots.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


_Job = tuple[bytes, "Future[dict[str, Any] | Deferred]"]


def _op_of(line: bytes) -> str:
    try:
        op = load_line(line).get("op")
    except ProtocolError:
        return "?"
    return op if isinstance(op, str) else "?"


class RelayServer:
    """The daemon's relay socket, from `start` to `stop`: one thread accepts, one thread per
    connection reads and answers, and one executor thread runs the requests in turn."""

    def __init__(
        self,
        path: Path,
        open_backends: Callable[[], Backends],
        *,
        request_deadline: float = REQUEST_DEADLINE_S,
        max_connections: int = MAX_CONNECTIONS,
        ops: Mapping[str, Operation] | None = None,
    ) -> None:
        self.path = path
        self.request_deadline = request_deadline
        self.max_connections = max_connections
        self._executor = RelayExecutor(open_backends, ops)
        self._server: _UnixServer | None = None
        self._thread: threading.Thread | None = None
        self._runner: threading.Thread | None = None
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._stopping = threading.Event()
        self._inode: int | None = None

    def _run(self, line: bytes) -> dict[str, Any] | None:
        """The answer to one request, from the executor thread; None once stopping."""
        if self._stopping.is_set():
            return None
        job: Future[dict[str, Any] | Deferred] = Future()
        self._jobs.put((line, job))
        while True:
            try:
                answer = job.result(timeout=0.2)
                if isinstance(answer, Deferred):
                    return answer.answer(_op_of(line))
                return answer
            except TimeoutError:
                # Stopping: a request being run is waited for (the runner has STOP_WAIT_S to
                # finish it), one not yet started gets no answer.
                if self._stopping.is_set() and not job.running():
                    return None
            except CancelledError:
                return None

    def _execute(self) -> None:
        try:
            while True:
                item = self._jobs.get()
                if item is None:
                    return
                line, job = item
                if self._stopping.is_set():
                    job.cancel()
                elif job.set_running_or_notify_cancel():
                    job.set_result(self._executor.answer(line))
        finally:
            self._executor.close()

    def start(self) -> None:
        prepare_folder(self.path)
        remove_stale(self.path)
        server = _UnixServer(str(self.path), _Handler, bind_and_activate=False)
        server.deadline = self.request_deadline
        server.slots = threading.BoundedSemaphore(self.max_connections)
        server.run = self._run
        try:
            server.server_bind()
            # The folder is 0700, so the socket's mode before this chmod is no opening.
            os.chmod(self.path, 0o600)
            self._inode = os.lstat(self.path).st_ino
            server.server_activate()
        except OSError as exc:
            server.server_close()
            raise ConfigError(f"{self.path}: cannot open the relay socket ({exc})") from None
        self._server = server
        self._stopping.clear()
        self._runner = threading.Thread(
            target=self._execute, name="legion-relay-executor", daemon=True
        )
        self._runner.start()
        self._thread = threading.Thread(target=self._serve, name="legion-relay", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        assert self._server is not None
        self._server.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        """Stop serving and remove the socket. A request in progress (a slow API call) gets
        `STOP_WAIT_S` to finish; the daemon does not wait longer on it to stop."""
        server, self._server = self._server, None
        if server is None:
            return
        stopper = threading.Thread(target=server.shutdown, daemon=True)
        stopper.start()
        stopper.join(STOP_WAIT_S)
        if self._thread is not None:
            self._thread.join(0 if stopper.is_alive() else STOP_WAIT_S)
        # The request being run finishes (within STOP_WAIT_S); those waiting get no answer.
        self._stopping.set()
        self._jobs.put(None)
        if self._runner is not None:
            self._runner.join(STOP_WAIT_S)
        server.server_close()
        with contextlib.suppress(OSError):
            if os.lstat(self.path).st_ino == self._inode:
                self.path.unlink()

    def __enter__(self) -> RelayServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def relay_server(
    project_state_dir: Path,
    open_backends: Callable[[], Backends],
    ops: Mapping[str, Operation] | None = None,
) -> RelayServer:
    """The relay server of the project with this state folder, at its one socket path, with
    the tracker's and forge's operations and `ops`."""
    return RelayServer(socket_path(project_state_dir), open_backends, ops=ops)
