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

What a connection says and how it is answered is `legion.proxy.egress_protocol`'s; how its
refusals are counted and read back, `legion.proxy.egress_refusals`'s.
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

from legion.core import egress
from legion.core.egress import Rule

from .egress_protocol import (
    CHUNK,
    HEAD_DEADLINE_S,
    Answer,
    answer,
    parse_request,
    read_head,
    shown_host,
)
from .egress_refusals import Refused

if TYPE_CHECKING:
    from legion.store import Store

logger = logging.getLogger(__name__)

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


@dataclass
class _Run:
    """What one session run (one capability) carries: its bytes so far, its rate's allowance."""

    carried: int = 0
    allowance: float = 0.0
    at: float = 0.0


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
                except Answer as refused:
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
        token, head, rest = read_head(client, time.monotonic() + self.head_deadline)
        scope = self._scope(token)
        if scope is None:
            raise Answer(
                407, "legion: this connection holds no valid capability (unknown or revoked)"
            )
        session_id, issue = scope
        run_key = hashlib.sha256(token.encode()).hexdigest()
        with self._session(session_id) as taken:
            if not taken:
                raise Answer(
                    429,
                    f"legion: this session has {self.max_per_session} egress connections open "
                    "already; retry when one has ended",
                )
            self._check_run(run_key)
            request = parse_request(head)
            host, port = request.host, request.port
            rule = egress.allowing(self.rules, host, port)
            if rule is None:
                self._refused(Refused(session_id, issue, shown_host(host), port))
                raise Answer(403, egress.refusal(shown_host(host), port))
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
                raise Answer(
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
            raise Answer(502, f"legion: {shown_host(host)} does not resolve") from None
        addresses = [(family, address) for family, _, _, _, address in found]
        allowed = [
            (family, address)
            for family, address in addresses
            if egress.address_allowed(rule, str(address[0]))
        ]
        if not allowed:
            self._refused(Refused(session_id, issue, shown_host(host), port))
            raise Answer(
                403, egress.refusal(shown_host(host), port, resolved=str(addresses[0][1][0]))
            )
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
        raise Answer(502, f"legion: {shown_host(host)}:{port} does not answer")

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
            while chunk := source.recv(CHUNK):
                self._take(run_key, len(chunk), upstream)
                target.sendall(chunk)
        except (OSError, Answer):
            for end in (source, target):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
            return
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    def _take(self, run_key: str, size: int, upstream: socket.socket) -> None:
        """Count `size` bytes to the run; wait as long as its rate asks; an Answer when the
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
            raise Answer(403, "legion: this session run's egress bytes are spent")
        if wait > 0:
            time.sleep(wait)


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
