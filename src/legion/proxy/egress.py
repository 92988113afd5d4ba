"""The egress proxy: the one way a confined session reaches anything besides the model, and only
the destinations `sandbox_egress` allows (`legion.core.egress`).

The daemon listens on a Unix socket in its run folder (`EGRESS_SOCKET_NAME`, beside the model
proxy's), which only its user can open and which a sandbox shows; a session's bridge
(`legion.sandbox.bridge`) carries each connection of its HTTP clients here. Each connection
starts with one line, `LEGION-EGRESS <capability>` (the session's, from the bridge's own
environment), then one ordinary proxy request:

- `CONNECT host:port` (TLS, or anything else: the bytes are carried as they come);
- an absolute-form request, `GET http://host[:port]/path` (plain HTTP): sent on with its target
  in origin form, its `Host` the target's, without its `Proxy-*` headers, with `Connection: close`.

The daemon resolves the name itself (a sandbox has no DNS), checks every address it connects to
(`legion.core.egress.address_allowed`: a name never leads to a loopback, link-local, unspecified
or multicast address; the address checked is the one connected to, so a name that resolves
differently the next time changes nothing), and connects only there. Refused: 403, with one
line that says what to set; counted by session and destination in the project store
(`egress_refusals`), each (session, host) once in the action log. A name that does not resolve,
or an address that does not answer: 502. A request it cannot read: 400.

Everything is bounded (the constants below; docs/security.md, "Egress"): the time a request's
head may take, a connection's setup, the connections at once (overall and of one session), a
session run's bytes (both ways, by capability) and their rate.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from legion.core import egress
from legion.core.egress import Rule

if TYPE_CHECKING:
    from legion.store import Store

logger = logging.getLogger(__name__)

PREAMBLE = b"LEGION-EGRESS "
# A request's preamble and head must have come whole within this long, and be no larger.
HEAD_DEADLINE_S = 10.0
MAX_HEAD_BYTES = 32 * 1024
# How long the connection to a destination may take to open.
CONNECT_TIMEOUT_S = 10.0
# A connection over which nothing passed, either way, for this long is closed.
IDLE_TIMEOUT_S = 300.0
# Connections served at once, by every session, and by one session (one more: 503, 429).
MAX_CONNECTIONS = 256
MAX_PER_SESSION = 64
# Connections at once from one sandbox (its network namespace, known from the connecting
# process before it says anything), said or not its capability: one that opens connections and
# says nothing must not take every one of `MAX_CONNECTIONS` from the others (then 429).
MAX_PER_PEER = MAX_PER_SESSION
# What one session run (one capability) may carry, both ways together: at most this many bytes
# (then its connections are closed and new ones refused), at most this fast.
MAX_BYTES_PER_RUN = 2 << 30
MAX_BYTES_PER_S = 32 << 20
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Refused:
    """A connection refused by the allow-list: whose, and where to."""

    session_id: str
    issue: str
    host: str
    port: int


@dataclass
class _Run:
    """What one session run (one capability) carries: its bytes so far, its rate's allowance."""

    carried: int = 0
    allowance: float = 0.0
    at: float = 0.0


class _Answer(Exception):
    """A request answered with an error, its status and one line."""

    def __init__(self, status: int, line: str) -> None:
        super().__init__(line)
        self.status = status
        self.line = line


_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    407: "Proxy Authentication Required",
    408: "Request Timeout",
    429: "Too Many Requests",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def answer(status: int, line: str) -> bytes:
    body = (line + "\n").encode()
    return (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\ncontent-type: text/plain; "
        f"charset=utf-8\r\nconnection: close\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body


class EgressProxy:
    """The server on `path`, for the destinations `rules` allow."""

    def __init__(
        self,
        path: Path,
        rules: Sequence[Rule],
        open_db: Callable[[], Store],
        *,
        refused: Callable[[Refused], None] = lambda refusal: None,
        max_connections: int = MAX_CONNECTIONS,
        max_per_session: int = MAX_PER_SESSION,
        max_per_peer: int = MAX_PER_PEER,
        max_bytes_per_run: int = MAX_BYTES_PER_RUN,
        max_bytes_per_s: float = MAX_BYTES_PER_S,
        head_deadline: float = HEAD_DEADLINE_S,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        idle_timeout: float = IDLE_TIMEOUT_S,
    ) -> None:
        """`open_db`: the project store, opened for each connection (where capabilities are
        looked up); `refused`: told of each connection the allow-list refused (from its
        thread), after it is counted (`record_refusal`)."""
        from legion.relay.server import prepare_folder, remove_stale

        self.path = path
        self.rules = tuple(rules)
        self.open_db = open_db
        self.refused = refused
        self.slots = threading.BoundedSemaphore(max_connections)
        self.max_per_session = max_per_session
        self.max_per_peer = max_per_peer
        self.max_bytes_per_run = max_bytes_per_run
        self.max_bytes_per_s = max_bytes_per_s
        self.head_deadline = head_deadline
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self._lock = threading.Lock()
        self._sessions: dict[str, int] = {}
        self._peers: dict[int, int] = {}
        self._runs: dict[str, _Run] = {}
        self._open: set[socket.socket] = set()
        self._stopping = False
        prepare_folder(path)
        remove_stale(path)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        path.chmod(0o600)
        self._listener.listen(64)
        self._thread = threading.Thread(target=self._serve, name="legion-egress", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(timeout=5)
        self.path.unlink(missing_ok=True)
        with self._lock:
            for connection in list(self._open):
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)

    def _serve(self) -> None:
        while not self._stopping:
            try:
                client, _ = self._listener.accept()
            except OSError as exc:
                if not self._stopping:  # else: closed by `stop`, as it should be
                    logger.error("the egress proxy stops listening: %s", exc)
                return
            peer = _peer(client)
            with self._lock:
                held = self._peers.get(peer, 0)
                if held < self.max_per_peer:
                    self._peers[peer] = held + 1
            if held >= self.max_per_peer:
                _refuse_now(
                    client,
                    429,
                    f"legion: this sandbox has {self.max_per_peer} egress connections open "
                    "already; retry when one has ended",
                )
                continue
            if not self.slots.acquire(blocking=False):
                self._release_peer(peer)
                _refuse_now(client, 503, "legion: the egress proxy serves no more connections now")
                continue
            try:
                threading.Thread(target=self._handle, args=(client, peer), daemon=True).start()
            except BaseException:
                self._release_peer(peer)
                self.slots.release()
                client.close()
                raise

    def _release_peer(self, peer: int) -> None:
        with self._lock:
            left = self._peers.get(peer, 1) - 1
            if left > 0:
                self._peers[peer] = left
            else:
                self._peers.pop(peer, None)

    # -- one connection ------------------------------------------------------------------------

    def _handle(self, client: socket.socket, peer: int) -> None:
        try:
            with client:
                self._track(client, True)
                try:
                    self._serve_one(client)
                except _Answer as refused:
                    _refuse_now(client, refused.status, refused.line)
                except OSError as exc:  # the session or the destination went away
                    logger.debug("an egress connection ended: %s", exc)
                finally:
                    self._track(client, False)
        finally:
            self._release_peer(peer)
            self.slots.release()

    def _track(self, connection: socket.socket, opened: bool) -> None:
        with self._lock:
            if opened:
                self._open.add(connection)
            else:
                self._open.discard(connection)

    def _serve_one(self, client: socket.socket) -> None:
        token, head, rest = _read_head(client, time.monotonic() + self.head_deadline)
        scope = self._scope(token)
        if scope is None:
            raise _Answer(
                407, "legion: this connection holds no valid capability (unknown or revoked)"
            )
        session_id, issue = scope
        run_key = hashlib.sha256(token.encode()).hexdigest()
        with self._session(session_id) as taken:
            if not taken:
                raise _Answer(
                    429,
                    f"legion: this session has {self.max_per_session} egress connections open "
                    "already; retry when one has ended",
                )
            self._check_run(run_key)
            request = _parse_request(head)
            host, port = request.host, request.port
            rule = egress.allowing(self.rules, host, port)
            if rule is None:
                self._refused(Refused(session_id, issue, _shown(host), port))
                raise _Answer(403, egress.refusal(_shown(host), port))
            upstream = self._connect(rule, session_id, issue, host, port)
            with upstream:
                self._track(upstream, True)
                try:
                    if request.connect:
                        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                        first = rest
                    else:
                        first = request.forwarded + rest
                    self._carry(client, upstream, first, run_key)
                finally:
                    self._track(upstream, False)

    def _scope(self, token: str) -> tuple[str, str] | None:
        from legion.relay.capabilities import Capabilities

        db = self.open_db()
        try:
            scope = Capabilities(db).lookup(token, egress=True)
        finally:
            db.close()
        return None if scope is None else (scope.session_id, scope.issue or "")

    @contextlib.contextmanager
    def _session(self, session_id: str) -> Iterator[bool]:
        with self._lock:
            running = self._sessions.get(session_id, 0)
            taken = running < self.max_per_session
            if taken:
                self._sessions[session_id] = running + 1
        try:
            yield taken
        finally:
            if taken:
                with self._lock:
                    left = self._sessions[session_id] - 1
                    if left:
                        self._sessions[session_id] = left
                    else:
                        del self._sessions[session_id]

    def _check_run(self, run_key: str) -> None:
        with self._lock:
            run = self._runs.get(run_key)
            if run is not None and run.carried >= self.max_bytes_per_run:
                raise _Answer(
                    403,
                    f"legion: this session carried {self.max_bytes_per_run} bytes through the "
                    "egress proxy already, all a session run may",
                )

    def _refused(self, refusal: Refused) -> None:
        # Counting it must not keep the answer from going.
        try:
            self.refused(refusal)
        except Exception as exc:
            logger.warning(
                "an egress refusal (%s:%d) not counted: %s",
                refusal.host,
                refusal.port,
                exc,
                extra={"issue": refusal.issue, "session": refusal.session_id},
            )

    def _connect(
        self, rule: Rule, session_id: str, issue: str, host: str, port: int
    ) -> socket.socket:
        try:
            found = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            raise _Answer(502, f"legion: {_shown(host)} does not resolve") from None
        addresses = [(family, address) for family, _, _, _, address in found]
        allowed = [
            (family, address)
            for family, address in addresses
            if egress.address_allowed(rule, str(address[0]))
        ]
        if not allowed:
            self._refused(Refused(session_id, issue, _shown(host), port))
            raise _Answer(403, egress.refusal(_shown(host), port, resolved=str(addresses[0][1][0])))
        for family, address in allowed:
            upstream = socket.socket(family, socket.SOCK_STREAM)
            upstream.settimeout(self.connect_timeout)
            try:
                upstream.connect(address)
            except OSError as exc:
                logger.debug(
                    "egress: %s does not answer: %s",
                    address[0],
                    exc,
                    extra={"issue": issue, "session": session_id},
                )
                upstream.close()
                continue
            return upstream
        raise _Answer(502, f"legion: {_shown(host)}:{port} does not answer")

    def _carry(
        self, client: socket.socket, upstream: socket.socket, first: bytes, run_key: str
    ) -> None:
        """Both ways, as the bytes come, until both ends are done or the run's bytes are
        spent."""
        for end in (client, upstream):
            end.settimeout(self.idle_timeout)
        if first:
            self._take(run_key, len(first), upstream)
            upstream.sendall(first)
        back = threading.Thread(
            target=self._pump, args=(upstream, client, run_key, upstream), daemon=True
        )
        back.start()
        self._pump(client, upstream, run_key, upstream)
        back.join()

    def _pump(
        self, source: socket.socket, target: socket.socket, run_key: str, upstream: socket.socket
    ) -> None:
        try:
            while chunk := source.recv(_CHUNK):
                self._take(run_key, len(chunk), upstream)
                target.sendall(chunk)
        except (OSError, _Answer):
            for end in (source, target):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
            return
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    def _take(self, run_key: str, size: int, upstream: socket.socket) -> None:
        """Count `size` bytes to the run; wait as long as its rate asks; an _Answer when the
        run has carried all it may."""
        with self._lock:
            now = time.monotonic()
            run = self._runs.setdefault(run_key, _Run(0, self.max_bytes_per_s, now))
            run.allowance = min(
                self.max_bytes_per_s, run.allowance + (now - run.at) * self.max_bytes_per_s
            )
            run.at = now
            run.carried += size
            run.allowance -= size
            over = run.carried > self.max_bytes_per_run
            wait = -run.allowance / self.max_bytes_per_s if run.allowance < 0 else 0.0
        if over:
            raise _Answer(403, "legion: this session run's egress bytes are spent")
        if wait > 0:
            time.sleep(wait)


@dataclass(frozen=True)
class _Request:
    connect: bool
    host: str
    port: int
    forwarded: bytes = b""  # a plain HTTP request's head as sent on


def _shown(host: str) -> str:
    return host.strip("[]").lower()


def _read_head(client: socket.socket, deadline: float) -> tuple[str, bytes, bytes]:
    """The capability of the preamble, the request's head (through its blank line) and what
    came after it."""
    data = b""
    while b"\r\n\r\n" not in data.partition(b"\n")[2]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Answer(408, "legion: the request did not come in time")
        if len(data) > MAX_HEAD_BYTES:
            raise _Answer(400, "legion: the request's head is too large")
        client.settimeout(left)
        try:
            chunk = client.recv(_CHUNK)
        except TimeoutError:
            raise _Answer(408, "legion: the request did not come in time") from None
        if not chunk:
            raise _Answer(400, "legion: the connection ended before its request")
        data += chunk
    line, _, after = data.partition(b"\n")
    if not line.startswith(PREAMBLE):
        raise _Answer(407, "legion: this connection did not say its capability")
    token = line[len(PREAMBLE) :].strip().decode("ascii", "replace")
    end = after.index(b"\r\n\r\n") + 4
    return token, after[:end], after[end:]


# Dropped from a plain HTTP request's head: the proxy's own headers, the connection's, and its
# Host (set again from the target, so the request names the host it was allowed for).
_DROPPED = ("proxy-", "connection:", "keep-alive:", "host:")


def _parse_request(head: bytes) -> _Request:
    try:
        text = head.decode("latin-1")
    except UnicodeError:  # pragma: no cover - latin-1 decodes every byte
        raise _Answer(400, "legion: the request cannot be read") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _Answer(400, "legion: the request's first line is not an HTTP/1 proxy request")
    method, target, version = parts
    if method.upper() == "CONNECT":
        host, port = _host_port(target, None)
        return _Request(True, host, port)
    split = urlsplit(target)
    if split.scheme.lower() != "http" or not split.hostname:
        raise _Answer(
            400,
            "legion: the egress proxy carries `CONNECT host:port` and plain `http://` requests "
            "in absolute form",
        )
    host, port = _host_port(split.netloc.rpartition("@")[2], 80)
    path = split.path or "/"
    if split.query:
        path += "?" + split.query
    headers = [line for line in lines[1:] if line and not line.lower().startswith(_DROPPED)]
    authority = split.netloc.rpartition("@")[2]
    first = [f"{method} {path} {version}", f"Host: {authority}"]
    forwarded = "\r\n".join([*first, *headers, "Connection: close", "", ""])
    return _Request(False, host, port, forwarded.encode("latin-1"))


def _host_port(text: str, default: int | None) -> tuple[str, int]:
    if text.startswith("["):
        close = text.find("]")
        host, rest = text[: close + 1], text[close + 1 :]
        if close < 0 or rest[:1] not in ("", ":"):
            raise _Answer(400, f"legion: {text!r} is no host and port")
        port_text = rest[1:]
    else:
        host, _, port_text = text.rpartition(":") if ":" in text else (text, "", "")
    if egress.normal_host(host) is None:
        raise _Answer(400, f"legion: {text[:100]!r} is no host")
    if not port_text:
        if default is None:
            raise _Answer(400, f"legion: {text[:100]!r} has no port")
        return host, default
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise _Answer(400, f"legion: {text[:100]!r} has no valid port")
    return host, int(port_text)


def _peer(client: socket.socket) -> int:
    """Which sandbox `client` connected from: the network namespace of the process at its
    other end (each confined session and setup has its own); 0 when that cannot be known (the
    process is gone), one key for all such."""
    try:
        found = client.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid = struct.unpack("3i", found)[0]
        return os.stat(f"/proc/{pid}/ns/net").st_ino if pid > 0 else 0
    except OSError:
        return 0


def _refuse_now(client: socket.socket, status: int, line: str) -> None:
    try:
        client.settimeout(1.0)
        client.sendall(answer(status, line))
        client.shutdown(socket.SHUT_WR)
    except OSError as exc:
        logger.debug("an egress refusal (%d) not sent: %s", status, exc)
    client.close()


def counting(open_db: Callable[[], Store]) -> Callable[[Refused], None]:
    """What the daemon does with each refusal: count it (`record_refusal`), and say a session's
    first to a host in the action log."""

    def refused(refusal: Refused) -> None:
        from legion.store.actionlog import ActionLog, OutcomeKind

        db = open_db()
        try:
            if (counted := record_refusal(db, refusal)) is not None:
                refusal = counted
                shown = f"[{refusal.host}]" if ":" in refusal.host else refusal.host
                what = (
                    f"more than {MAX_REFUSED_PER_SESSION} destinations were refused; the "
                    "others are counted together"
                    if refusal.host == OTHER_HOSTS
                    else f"{shown}:{refusal.port} is not allowed by sandbox_egress"
                )
                ActionLog(db).append(
                    refusal.issue or "-",
                    "egress_refused",
                    OutcomeKind.FAILED,
                    f"session {refusal.session_id}: {what} (counted in `legion status`)",
                )
        finally:
            db.close()

    return refused


# The destinations counted apart for one session; the refusals of a session past them (one
# that asks name after name) are counted together, under `OTHER_HOSTS`, said once in the
# action log: a session cannot fill the store or the action log with names of its making.
MAX_REFUSED_PER_SESSION = 50
OTHER_HOSTS = "(other hosts)"


def record_refusal(db: Store, refusal: Refused) -> Refused | None:
    """Count `refusal` in the store; when it is the session's first to that host (on any
    port), the refusal as counted (the action log then says so), else None. Past
    `MAX_REFUSED_PER_SESSION` destinations, the session's others are counted together
    (`OTHER_HOSTS`, port 0)."""
    from legion.store import now

    stamp = now()
    with db.write() as conn:
        known = conn.execute(
            "SELECT 1 FROM egress_refusals WHERE session_id = ? AND host = ? AND port = ?",
            (refusal.session_id, refusal.host, refusal.port),
        ).fetchone()
        if known is None:
            held = conn.execute(
                "SELECT COUNT(*) AS held FROM egress_refusals WHERE session_id = ?",
                (refusal.session_id,),
            ).fetchone()
            if int(held["held"]) >= MAX_REFUSED_PER_SESSION:
                refusal = Refused(refusal.session_id, refusal.issue, OTHER_HOSTS, 0)
        conn.execute(
            "INSERT INTO egress_refusals (session_id, issue, host, port, count, first_at, "
            "last_at) VALUES (?, ?, ?, ?, 1, ?, ?) ON CONFLICT (session_id, host, port) DO "
            "UPDATE SET count = egress_refusals.count + 1, last_at = excluded.last_at",
            (refusal.session_id, refusal.issue, refusal.host, refusal.port, stamp, stamp),
        )
        row = conn.execute(
            "SELECT SUM(count) AS total FROM egress_refusals WHERE session_id = ? AND host = ?",
            (refusal.session_id, refusal.host),
        ).fetchone()
    return refusal if int(row["total"]) == 1 else None


@dataclass(frozen=True)
class RefusalCount:
    """How often a session was refused one destination (`legion status`)."""

    session_id: str
    issue: str
    host: str
    port: int
    count: int
    last_at: str

    def to_json(self) -> dict[str, object]:
        return {
            "session_id": self.session_id,
            "issue": self.issue,
            "host": self.host,
            "port": self.port,
            "count": self.count,
            "last_at": self.last_at,
        }

    def line(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        who = self.issue or self.session_id[:8]
        times = "once" if self.count == 1 else f"{self.count} times"
        where = shown if self.host == OTHER_HOSTS else f"{shown}:{self.port}"
        return f"{who}: {where} ({times})"


def refusal_counts(db: Store, limit: int = 10, *, since: str = "") -> list[RefusalCount]:
    """The destinations most lately refused, by session; `since`: only those refused at or
    after that instant (a `legion.store.now()`)."""
    with db.read() as conn:
        rows = conn.execute(
            "SELECT session_id, issue, host, port, count, last_at FROM egress_refusals "
            "WHERE last_at >= ? ORDER BY last_at DESC, host, port LIMIT ?",
            (since, limit),
        ).fetchall()
    return [
        RefusalCount(
            str(row["session_id"]),
            str(row["issue"]),
            str(row["host"]),
            int(row["port"]),
            int(row["count"]),
            str(row["last_at"]),
        )
        for row in rows
    ]
