"""The daemon's end of the relay: a Unix socket on which sessions' `legion` commands ask for
tracker and forge calls, and the executor that answers them (with `legion.relay.operations`).

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

Besides the tracker's and the forge's operations (`legion.relay.operations.OPS`), the server answers
those it is given (`ops`): the service layer's `legion.services.session_ops`, what a session does as
itself (the bus, its wake-up context, the controller's commands).

What each request may do is `legion.relay.operations`' (the scope rules, and each
operation).
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from legion.core import roles
from legion.core.ratelimit import Bucket
from legion.daemon_link import own_short_folder
from legion.errors import (
    BackendError,
    BackendErrorKind,
    ConfigError,
    InputError,
    LegionError,
    NotPermittedError,
    ProtocolError,
)
from legion.files.private import private_folder
from legion.forges.audited import AuditedForge
from legion.forges.base import Forge
from legion.relay import fallback_folder, socket_path
from legion.relay.capabilities import Capabilities, Scope
from legion.relay.operations import OPS, Backends, Call, Deferred, Operation, internal_error
from legion.relay.protocol import (
    MAX_LINE_BYTES,
    dump_line,
    error_answer,
    load_line,
    parse_request,
    result_answer,
)
from legion.store import Store
from legion.store.actionlog import ActionLog, OutcomeKind, noted_in
from legion.trackers.audited import AuditedTracker
from legion.trackers.base import Tracker
from legion.trackers.splits import Splits

logger = logging.getLogger(__name__)


# A client has this long in all to send its whole request once connected (and as long to read
# the answer): a client that trickles its bytes is cut then, whatever its pace.
REQUEST_DEADLINE_S = 10.0
# Connections served at once; more wait in the backlog until one ends.
MAX_CONNECTIONS = 32
# How long `stop` waits for a request in progress to finish before it goes anyway.
STOP_WAIT_S = 5.0


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


@dataclass(frozen=True)
class _Audited:
    tracker: Tracker
    forge: Forge
    db: Store


def _audited(backends: Backends, scope: Scope) -> Backends | _Audited:
    """The backends a session's call runs on: its writes in the action log under its mode
    (`legion-review`, `legion-controller`). Not Legion's own passes the daemon runs for the
    controller (`roles.LEGION`: `legion reconcile`, `dispatch`, `resume`): their writes are
    the pass's actions, or the command's own entry (`dispatch by legion-controller`)."""
    if scope.mode == roles.LEGION:
        return backends
    author = f"legion-{scope.mode or 'session'}"
    note = noted_in(backends.db, author)
    split = Splits(backends.db).recorder(author)
    return _Audited(
        AuditedTracker(backends.tracker, note, split),
        AuditedForge(backends.forge, note),
        backends.db,
    )


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
                call = Call(
                    _audited(backends, scope),
                    scope,
                    op,
                    request.args,
                    request.capability,
                    self._created,
                )
                result = run(call)
            except NotPermittedError as exc:
                raise self._logged(scope, exc) from None
            if isinstance(result, Deferred):
                return self._counted(request.capability, result, op)
            return result_answer(result)
        except LegionError as exc:
            return error_answer(exc)
        except Exception as exc:
            return internal_error(op, exc)

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
        try:
            ActionLog(self.backends().db).append(
                issue, "relay_refuse", OutcomeKind.FAILED, exc.message
            )
        except LegionError as failed:  # the refusal stands; the daemon's log keeps it
            logger.warning("relay: refused (%s: %s), not in the action log: %s", issue, exc, failed)
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
