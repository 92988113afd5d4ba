"""A session's end of the relay: a Tracker and a Forge that ask the Legion daemon.

`legion.backends.open_backends` hands out `RelayTracker` and `RelayForge` instead of the real
ones when the process has a capability in its environment (it is a session Legion started) and
the project's tracker or forge is a remote one. Each call is one connection to the daemon's
socket: one request, one answer, its error re-raised here as the same `LegionError`.

When the daemon is not answering (no socket, or nobody listening: it is starting, restarting,
or stopped), a call waits for it up to `WAIT_S` seconds, saying so once on stderr, then fails
with one line that says to start it. Once sent, a request gets `REQUEST_TIMEOUT_S` for its
answer: the daemon makes the API call (which may wait out a rate limit) and runs one request
at a time (it reads them all at once: a slow client holds up nobody else). A request that got
no answer may still have been carried out: the error says so, and is transient (a reconciler
retries it).
"""

from __future__ import annotations

import contextlib
import socket
import sys
import time
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO, TypeVar

from legion.core.model import Status
from legion.errors import (
    BackendError,
    BackendErrorKind,
    LegionError,
    NotPermittedError,
    ProtocolError,
    RelayUnavailableError,
)
from legion.forges.base import PrChecks, PullRequest
from legion.relay import CAPABILITY_ENV, SOCKET_ENV, socket_path
from legion.relay.protocol import MAX_LINE_BYTES, answer_value, dump_line, load_line, request
from legion.trackers.base import Comment, Issue

# How long a call waits for a daemon that is not answering; `LEGION_RELAY_WAIT` (seconds)
# changes it (tests use a short one).
WAIT_S = 30.0
WAIT_ENV = "LEGION_RELAY_WAIT"
REQUEST_TIMEOUT_S = 120.0
CONNECT_TIMEOUT_S = 5.0
RETRY_EVERY_S = 0.2
DAEMON = "the Legion daemon"

T = TypeVar("T")


class RelayClient:
    def __init__(
        self,
        path: Path,
        capability: str,
        *,
        wait: float = WAIT_S,
        timeout: float = REQUEST_TIMEOUT_S,
        stderr: TextIO | None = None,
    ) -> None:
        self.path = path
        self.capability = capability
        self.wait = wait
        self.timeout = timeout
        self._stderr = stderr
        self._said_waiting = False

    def call(self, op: str, **args: Any) -> Any:
        """The result of `op` on the daemon's backends, or its error raised."""
        message = request(self.capability, op, args)
        with self._connect() as connection:
            try:
                connection.settimeout(self.timeout)
                connection.sendall(dump_line(message))
                with connection.makefile("rb") as answers:
                    line = answers.readline(MAX_LINE_BYTES + 1)
            except TimeoutError:
                raise self._lost(op, f"no answer within {self.timeout:g} s") from None
            except OSError as exc:
                raise self._lost(op, f"the connection failed ({exc.strerror or exc})") from None
        if not line:
            raise self._lost(op, "it closed the connection without answering (did it stop?)")
        try:
            return answer_value(load_line(line))
        except ProtocolError as exc:
            raise LegionError(
                f"{DAEMON} sent an answer this `legion` cannot read ({exc}); "
                "is the daemon running the same Legion version?"
            ) from None

    def _lost(self, op: str, why: str) -> BackendError:
        return BackendError(
            DAEMON,
            BackendErrorKind.TRANSIENT,
            f"{why}; the request may have been carried out: check before repeating it",
            operation=op,
        )

    def _connect(self) -> socket.socket:
        deadline = time.monotonic() + self.wait
        busy = False
        while True:
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                connection.settimeout(CONNECT_TIMEOUT_S)
                connection.connect(str(self.path))
                return connection
            except (FileNotFoundError, ConnectionRefusedError):
                connection.close()  # not there (yet)
            except (TimeoutError, BlockingIOError):
                connection.close()  # there, with its queue of waiting connections full
                busy = True
            except OSError as exc:
                connection.close()
                raise RelayUnavailableError(
                    f"cannot reach {DAEMON} at {self.path}: {exc.strerror or exc}"
                ) from None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if busy:
                    raise RelayUnavailableError(
                        f"{DAEMON} is too busy to take the request (waited {self.wait:g} s); "
                        "try again"
                    )
                raise RelayUnavailableError(
                    f"{DAEMON} is not running: start it with `legion start`"
                )
            self._say_waiting()
            time.sleep(min(RETRY_EVERY_S, remaining))

    def _say_waiting(self) -> None:
        if self._said_waiting:
            return
        self._said_waiting = True
        out = self._stderr or sys.stderr
        with contextlib.suppress(OSError, ValueError):
            print(f"legion: waiting for {DAEMON} (up to {self.wait:g} s) ...", file=out, flush=True)


def _one(value: Any, cls: type[T]) -> T:
    if not isinstance(value, cls):
        raise LegionError(f"{DAEMON} answered with {type(value).__name__}, not {cls.__name__}")
    return value


def _list_of(value: Any, cls: type[T]) -> list[T]:
    if not isinstance(value, list):
        raise LegionError(f"{DAEMON} answered with {type(value).__name__}, not a list")
    return [_one(item, cls) for item in value]


class RelayTracker:
    """The Tracker protocol, through the daemon."""

    def __init__(self, client: RelayClient) -> None:
        self._client = client

    def list_issues(self, *, status: Status | None = None, label: str | None = None) -> list[Issue]:
        return _list_of(self._client.call("tracker.list_issues", status=status, label=label), Issue)

    def get_issue(self, identifier: str) -> Issue:
        return _one(self._client.call("tracker.get_issue", identifier=identifier), Issue)

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
        answer = self._client.call(
            "tracker.create_issue",
            title=title,
            body=body,
            status=status,
            labels=list(labels),
            parent=parent,
            blocked_by=list(blocked_by),
        )
        return _one(answer, Issue)

    def set_status(self, identifier: str, status: Status) -> Issue:
        answer = self._client.call("tracker.set_status", identifier=identifier, status=status)
        return _one(answer, Issue)

    def edit_issue(
        self, identifier: str, *, title: str | None = None, body: str | None = None
    ) -> Issue:
        """A session does not rewrite an issue's title or body (what it was asked to do): it
        comments instead. Refused here, before the daemon is asked."""
        raise NotPermittedError(
            f"a Legion session does not edit {identifier}'s title or body: comment instead "
            "(`legion issue comment`)"
        )

    def update_labels(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue:
        answer = self._client.call(
            "tracker.update_labels", identifier=identifier, add=list(add), remove=list(remove)
        )
        return _one(answer, Issue)

    def set_blocked_by(
        self, identifier: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Issue:
        answer = self._client.call(
            "tracker.set_blocked_by", identifier=identifier, add=list(add), remove=list(remove)
        )
        return _one(answer, Issue)

    def add_comment(
        self, identifier: str, body: str, *, author: str, by_legion: bool = False
    ) -> Comment:
        answer = self._client.call(
            "tracker.add_comment",
            identifier=identifier,
            body=body,
            author=author,
            by_legion=by_legion,
        )
        return _one(answer, Comment)

    def edit_comment(
        self, identifier: str, comment_id: int | str, body: str, *, author: str
    ) -> Comment:
        """A session edits no comment (Legion's task list is the daemon's to keep)."""
        raise NotPermittedError("a session cannot edit a comment: post a new one")

    def list_comments(self, identifier: str, *, newest: int | None = None) -> list[Comment]:
        """The daemon reads a session at most its latest `SESSION_COMMENTS`, whatever it asks."""
        answer = self._client.call("tracker.list_comments", identifier=identifier, newest=newest)
        return _list_of(answer, Comment)


class RelayForge:
    """The Forge protocol, through the daemon."""

    def __init__(self, client: RelayClient) -> None:
        self._client = client

    def create_pr(
        self,
        issue: str,
        branch: str,
        *,
        title: str | None = None,
        body: str = "",
        draft: bool = False,
    ) -> PullRequest:
        answer = self._client.call(
            "forge.create_pr", issue=issue, branch=branch, title=title, body=body, draft=draft
        )
        return _one(answer, PullRequest)

    def get_pr(self, ref: str) -> PullRequest:
        return _one(self._client.call("forge.get_pr", ref=ref), PullRequest)

    def list_prs(self) -> list[PullRequest]:
        return _list_of(self._client.call("forge.list_prs"), PullRequest)

    def prs_by_issue(
        self, issues: Collection[str], links: Mapping[str, Collection[str]] | None = None
    ) -> dict[str, PullRequest]:
        arguments: dict[str, Any] = {"issues": list(issues)}
        if links:
            arguments["links"] = {issue: list(urls) for issue, urls in links.items()}
        answer = self._client.call("forge.prs_by_issue", **arguments)
        if not isinstance(answer, dict):
            raise LegionError(f"{DAEMON} answered with {type(answer).__name__}, not a mapping")
        return {_one(key, str): _one(pr, PullRequest) for key, pr in answer.items()}

    def set_draft(self, ref: str, draft: bool) -> PullRequest:
        return _one(self._client.call("forge.set_draft", ref=ref, draft=draft), PullRequest)

    def add_review(self, ref: str, outcome: str, *, body: str, author: str) -> PullRequest:
        answer = self._client.call(
            "forge.add_review", ref=ref, outcome=outcome, body=body, author=author
        )
        return _one(answer, PullRequest)

    def branch_head(self, ref: str) -> str | None:
        answer = self._client.call("forge.branch_head", ref=ref)
        return None if answer is None else _one(answer, str)

    def pr_checks(self, ref: str, *, log: str | None = None) -> PrChecks:
        return _one(self._client.call("forge.pr_checks", ref=ref, log=log), PrChecks)

    def merge(self, ref: str, *, reviewed: str | None = None) -> PullRequest:
        # The daemon merges only the head a review session's approval recorded, taken from its
        # own records: what a session says it reviewed is never sent.
        del reviewed
        return _one(self._client.call("forge.merge", ref=ref), PullRequest)


def relay_wait(env: Mapping[str, str]) -> float:
    """`LEGION_RELAY_WAIT` seconds when it is a number from 0 to an hour, else `WAIT_S`."""
    try:
        wait = float(env.get(WAIT_ENV, ""))
    except ValueError:
        return WAIT_S
    return wait if 0 <= wait <= 3600 else WAIT_S


def relay_client(env: Mapping[str, str], state_dir: Path) -> RelayClient:
    """The client of a session Legion started: its capability, and the socket it was given
    (else the project's, which is the same path)."""
    given = env.get(SOCKET_ENV)
    path = Path(given) if given else socket_path(state_dir)
    return RelayClient(path, env.get(CAPABILITY_ENV, ""), wait=relay_wait(env))


def session_client(env: Mapping[str, str]) -> RelayClient | None:
    """The relay client of the session this runs in, when Legion gave it one (its capability
    and the socket in its environment): then the bus and Legion's records are the daemon's to
    reach (`legion.services.session_ops`); None for anyone else."""
    given, capability = env.get(SOCKET_ENV), env.get(CAPABILITY_ENV)
    if not (given and capability):
        return None
    return RelayClient(Path(given), capability, wait=relay_wait(env))


def fetch_wake_up(env: Mapping[str, str], why: str, compaction: str | None) -> str | None:
    """The session's wake-up context, from the daemon (`session.context`)."""
    client = session_client(env)
    if client is None:
        return None
    text = client.call("session.context", why=why, compaction=compaction)
    return text if isinstance(text, str) else None
