"""The model proxy: an HTTP server on 127.0.0.1 in the daemon, between each session's CLI and
the model API.

Each runtime the registry gives a `ModelRoute` (`legion.plugins`) is served under its own path
(Claude Code's at the root, Codex's under `/codex`): a request is forwarded to that runtime's
real endpoint, as the daemon's environment gives it (Claude Code's `ANTHROPIC_BASE_URL`, else
Anthropic's), as it came, if its route table entry (`legion.proxy.routes.APIS`) allows it, and
the answer streamed back unbuffered, chunk by chunk, while its usage is read off it
(`legion.proxy.metering`) and recorded in the ledger (`legion.proxy.ledger`) when it ends.

Who asks: when the daemon holds a runtime's model credential (for Claude Code
`ANTHROPIC_API_KEY`, `ANTHROPIC_AUTH_TOKEN` or `CLAUDE_CODE_OAUTH_TOKEN` in its environment), a
session holds none: its CLI sends the session's capability (`legion.relay.capabilities`) where
the key would be, the proxy looks it up by its hash, refuses an unknown or revoked one (401),
and forwards with the real credential. When the daemon holds none (the user logged the CLI in
itself) and the runtime's own login passes through (`ModelRoute.own_login`), the session's own
credential passes through, and the session is known by the session id its CLI sends
(`Api.session_header`): metered, not contained.

Where each runtime's requests go is `legion.proxy.upstreams`'s; the connections' bounds (how
many at once, the idle timeout, a request's deadlines) are `legion.proxy.connections`'s; what an
answer leaves behind (its usage in the ledger, the session's question) is
`legion.proxy.accounting`'s.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from legion.core.budget import Limits, Spent
from legion.plugins import proxied_runtimes

from .accounting import forget_question, keep_question, main_loop, record_usage, whose
from .budget import REFUSED_STATUS, REFUSED_TYPE, refusal_message, spent_limit
from .connections import (
    BODY_DEADLINE_S,
    HEAD_DEADLINE_S,
    MAX_CONNECTIONS,
    MIN_BODY_RATE,
    DeadlineHandler,
    TcpServer,
    UnixServer,
)
from .ledger import CONTROLLER, Spender, UsageLedger
from .limits import HELD_STATUSES, ModelHold
from .metering import UsageMeter
from .questions import QUESTION_TOOLS
from .routes import (
    CREDENTIAL_HEADERS,
    Api,
    Forward,
    Refusal,
    body_length,
    body_refusal,
    forward,
    forwarded_headers,
    runtime_refusal,
    upstream_key_refusal,
)
from .upstreams import Mount, Upstream, mounts, under

if TYPE_CHECKING:
    import httpx

    from legion.store import Store

logger = logging.getLogger(__name__)

NO_LIMITS = Limits()
# Headers that belong to one connection, never forwarded (RFC 9110, 7.6.1), and the ones the
# proxy sets itself.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
    }
)
# A session's model calls forwarded at once (its subagents run side by side); one more is told
# 429 (the CLI retries). Usage is counted as each answer ends, so this bounds how far past a
# budget one session's parallel requests can go before the next is refused.
MAX_IN_FLIGHT = 8


def _token(headers: Mapping[str, str]) -> str:
    key = headers.get("x-api-key", "") or headers.get("x-goog-api-key", "")
    if key:
        return key
    authorization = headers.get("authorization", "")
    scheme, _, value = authorization.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


class ModelProxy:
    """The proxy's server and what it needs to know whose each request is."""

    def __init__(
        self,
        upstreams: Mapping[str, Upstream],
        open_db: Callable[[], Store],
        *,
        workers: Callable[[Store, str], Spender | None] = lambda db, sid: None,
        controller_runtime: str = "",
        limits: Limits = NO_LIMITS,
        refused: Callable[[Spender, Spent], None] = lambda spender, spent: None,
        port: int = 0,
        unix_socket: Path | None = None,
        max_connections: int = MAX_CONNECTIONS,
        max_in_flight: int = MAX_IN_FLIGHT,
        head_deadline: float = HEAD_DEADLINE_S,
        body_deadline: float = BODY_DEADLINE_S,
        min_body_rate: float = MIN_BODY_RATE,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """`open_db`: the project database, opened for each request (a connection belongs to
        one thread, and each request is served by its own). `upstreams`: each runtime served, by
        name, and its upstream (`upstreams_from`), each under its `ModelRoute.mount`; a runtime
        not in it is not proxied. `workers`: the worker Legion
        started as a session id, from that database (None: none it knows). `limits`: the
        budgets enforced before a request goes; `refused`: told of each request refused for
        one (from the request's thread), so that its session is stopped. `unix_socket`: where
        it also listens, for sessions confined to a network of their own (`legion.sandbox`:
        each one's bridge carries its connections here). `max_connections`: how many
        connections it serves at once, over both; `max_in_flight`: how many of one session's
        model calls it forwards at once. `head_deadline`, `body_deadline`, `min_body_rate`: by
        when a request's head and body must have come (`HEAD_DEADLINE_S`). `clock`: the time
        the day's budget counts from (its day begins at 00:00 UTC; a test gives another)."""
        self.mounts = mounts(upstreams)
        self.open_db = open_db
        self.workers = workers
        self.controller_runtime = controller_runtime
        self.limits = limits
        self.refused = refused
        self.clock = clock
        self.hold = ModelHold(open_db)
        self.slots = threading.BoundedSemaphore(max_connections)
        self.max_in_flight = max_in_flight
        self.head_deadline = head_deadline
        self.body_deadline = body_deadline
        self.min_body_rate = min_body_rate
        self._in_flight: dict[str, int] = {}  # by session id ("": sessions Legion cannot name)
        self._in_flight_lock = threading.Lock()
        self._client: httpx.Client | None = None
        self._server = TcpServer(("127.0.0.1", port), _Handler, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="legion-model-proxy", daemon=True
        )
        self.unix_socket = unix_socket
        self._unix: UnixServer | None = None
        if unix_socket is not None:
            from legion.relay.server import prepare_folder, remove_stale

            prepare_folder(unix_socket)
            remove_stale(unix_socket)
            self._unix = UnixServer(str(unix_socket), _UnixHandler, self)
            os.chmod(unix_socket, 0o600)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def send(self, request: httpx.Request) -> httpx.Response:
        """`request` to the real API, its answer streamed."""
        assert self._client is not None, "the proxy is not started"
        return self._client.send(request, stream=True)

    def route(self, target: str) -> tuple[Mount, str] | Refusal:
        """Where a request for `target` is served (its runtime's mount: the upstream, and what
        its CLI may send there: `legion.proxy.routes`), and its target there; refused under the
        path of a runtime the proxy does not serve (one whose key the daemon does not hold)."""
        for plugin in proxied_runtimes():
            mount_path = plugin.model.mount if plugin.model is not None else ""
            served = any(mount.runtime == plugin.name for mount in self.mounts)
            if mount_path and not served and under(target, mount_path):
                return Refusal(404, "not_found_error", f"{plugin.description} is not served here")
        for mount in self.mounts:
            if under(target, mount.path):
                return mount, target[len(mount.path) :]
        return Refusal(404, "not_found_error", "no runtime is served here")

    def build(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> httpx.Request:
        assert self._client is not None, "the proxy is not started"
        return self._client.build_request(method, url, headers=dict(headers), content=body)

    def start(self) -> None:
        import httpx

        # No read timeout: a model's stream may pause for minutes between events.
        self._client = httpx.Client(
            timeout=httpx.Timeout(None, connect=30.0), follow_redirects=False
        )
        self._thread.start()
        if self._unix is not None:
            threading.Thread(
                target=self._unix.serve_forever, name="legion-model-proxy-unix", daemon=True
            ).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._unix is not None:
            self._unix.shutdown()
            self._unix.server_close()
            if self.unix_socket is not None:
                self.unix_socket.unlink(missing_ok=True)
        if self._client is not None:
            self._client.close()

    @contextlib.contextmanager
    def in_flight(self, session_id: str) -> Iterator[bool]:
        """Whether one more of the session's model calls may go now (`max_in_flight`), counted
        while it runs."""
        with self._in_flight_lock:
            running = self._in_flight.get(session_id, 0)
            taken = running < self.max_in_flight
            if taken:
                self._in_flight[session_id] = running + 1
        try:
            yield taken
        finally:
            if taken:
                with self._in_flight_lock:
                    left = self._in_flight[session_id] - 1
                    if left:
                        self._in_flight[session_id] = left
                    else:
                        del self._in_flight[session_id]

    # -- whose request ------------------------------------------------------------------------

    def spender(self, db: Store, headers: Mapping[str, str], mount: Mount) -> Spender | None:
        """Whose request this is; None when it must be refused (a credential-holding upstream
        and no valid capability)."""
        from legion.relay.capabilities import Capabilities

        if mount.upstream.holds_credential:
            scope = Capabilities(db).lookup(_token(headers))
            if scope is None:
                return None
            return self._spender(db, scope.session_id, scope.issue or "", scope.mode)
        session_id = headers.get(mount.api.session_header, "") if mount.api.session_header else ""
        return self._spender(db, session_id, "", "")

    def _spender(self, db: Store, session_id: str, issue: str, mode: str) -> Spender:
        worker = self.workers(db, session_id) if session_id else None
        if worker is not None:
            return worker
        if mode == CONTROLLER or (session_id and not issue):
            return Spender(session_id, issue, mode or CONTROLLER, self.controller_runtime)
        return Spender(session_id, issue, mode, "")


class _Handler(DeadlineHandler):
    """A request forwarded to its runtime's API, if everything its head says allows it (its
    connection's bounds are `DeadlineHandler`'s)."""

    # Every method is answered in the API's error shape; only a route's own is forwarded.
    def do_GET(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def do_HEAD(self) -> None:
        self._forward()

    def do_PUT(self) -> None:
        self._forward()

    def do_PATCH(self) -> None:
        self._forward()

    def do_DELETE(self) -> None:
        self._forward()

    def do_OPTIONS(self) -> None:
        self._forward()

    def _send_held(
        self, proxy: ModelProxy, url: str, headers: Mapping[str, str], body: bytes
    ) -> httpx.Response | None:
        """The API's answer, sent once no hold is in force; a 429 or 529 holds every request
        (`legion.proxy.limits`) and this one is sent again after the wait, so that the session
        sees a slow answer, not the error. None when the answer could not be had (the session
        was told) or the session went away while it waited."""
        while True:
            if not proxy.hold.wait(gone=self._asker_gone):
                self.close_connection = True
                return None
            try:
                response = proxy.send(proxy.build(self.command, url, headers, body))
            except Exception as exc:  # httpx.HTTPError, an OSError: the upstream is unreachable
                reason = _without_credentials(f"{type(exc).__name__}: {exc}", headers)
                logger.warning("the model API cannot be reached: %s", reason)
                self._refuse(
                    502, "api_error", f"Legion's model proxy could not reach the API: {reason}"
                )
                return None
            if response.status_code not in HELD_STATUSES:
                proxy.hold.passed()
                return response
            try:
                response.read()
            finally:
                response.close()
            proxy.hold.hold(
                response.status_code, {k.lower(): v for k, v in response.headers.items()}
            )

    def _asker_gone(self) -> bool:
        """Whether the session's CLI closed its connection (it gave up waiting)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _refuse(self, status: int, kind: str, message: str) -> None:
        body = json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _refuse_for(self, refusal: Refusal) -> None:
        logger.warning(
            "model proxy refused %s %r: %s", self.command, self.path[:200], refusal.message
        )
        self._refuse(refusal.status, refusal.kind, refusal.message)

    def _forward(self) -> None:
        """Everything the request's head says is checked before its body is read (a refused
        request's body is never read: its connection is closed instead)."""
        proxy = self.server.proxy
        length = body_length(
            self.headers.get("content-length"), self.headers.get("transfer-encoding")
        )
        if isinstance(length, Refusal):
            self._refuse_unread(length)
            return
        routed = proxy.route(self.path)
        if isinstance(routed, Refusal):
            self._refuse_unread(routed)
            return
        mount, target = routed
        upstream, api = mount.upstream, mount.api
        allowed = forward(api, upstream.base_url, self.command, target)
        if isinstance(allowed, Refusal):
            self._refuse_unread(allowed)
            return
        incoming = {key.lower(): value for key, value in self.headers.items()}
        try:
            db = proxy.open_db()
        except Exception as exc:  # the database cannot be opened: nothing can be checked
            logger.warning("model proxy: the store cannot be opened, request refused: %s", exc)
            self.close_connection = True
            self._refuse(503, "api_error", f"Legion's model proxy: {exc}")
            return
        try:
            spender = proxy.spender(db, incoming, mount)
            if spender is None:
                # Never the token itself: it may be a live session's, or a key sent by mistake.
                logger.warning(
                    "model proxy refused %s %r: unknown or revoked capability",
                    self.command,
                    self.path[:200],
                )
                self.close_connection = True
                self._refuse(
                    401,
                    "authentication_error",
                    "Legion's model proxy: this session's capability is unknown or revoked "
                    "(the session was retired or started again)",
                )
                return
            wrong = runtime_refusal(mount.runtime, spender.runtime)
            if wrong is not None:
                self._refuse_unread(wrong)
                return
            self._reading.by = time.monotonic() + proxy.body_deadline + length / proxy.min_body_rate
            body = self.rfile.read(length) if length else b""
            self._reading.by = None
            who = whose(spender)
            if len(body) < length:  # the sender went away mid-body
                logger.debug("a request's sender went away mid-body", extra=who)
                self.close_connection = True
                return
            with proxy.in_flight(spender.session_id) as taken:
                if not taken:
                    logger.debug(
                        "a model call refused: %d run already", proxy.max_in_flight, extra=who
                    )
                    self._refuse(
                        429,
                        "rate_limit_error",
                        f"Legion's model proxy: this session has {proxy.max_in_flight} "
                        "requests running already; retry when one has ended",
                    )
                    return
                self._forward_as(db, proxy, upstream, api, allowed, spender, body, incoming)
        finally:
            db.close()

    def _refuse_unread(self, refusal: Refusal) -> None:
        self.close_connection = True  # its body, unread, would be taken for a request
        self._refuse_for(refusal)

    def _forward_as(
        self,
        db: Store,
        proxy: ModelProxy,
        upstream: Upstream,
        api: Api,
        allowed: Forward,
        spender: Spender,
        body: bytes,
        incoming: dict[str, str],
    ) -> None:
        request = _json_body(body)
        refused = body_refusal(api, request)
        if refused is not None:
            self._refuse_for(refused)
            return
        # Every route is a model call: within the budgets, or not sent at all.
        spent = spent_limit(db, proxy.limits, spender.issue, proxy.clock())
        if spent is not None:
            # The daemon is told first: whoever has the answer finds the daemon knowing.
            proxy.refused(spender, spent)
            self._refuse(REFUSED_STATUS, REFUSED_TYPE, refusal_message(spender, spent))
            return
        if spender.session_id and main_loop(request):
            forget_question(db, spender.session_id)  # asked again: answered, or left
        headers = forwarded_headers(api, incoming, upstream.headers)
        streams = allowed.route.streams
        streaming = request.get("stream") is True if streams is None else streams
        response = self._send_held(proxy, allowed.url, headers, body)
        if response is None:
            return
        key_refused = upstream_key_refusal(response.status_code)
        if key_refused is not None:
            response.close()  # its body, unread, may quote the key
            self._refuse_for(key_refused)
            return
        meter = UsageMeter(streaming=streaming, watched=QUESTION_TOOLS)
        ledger = UsageLedger(db)
        # A model's answer reports its usage; one that does not is recorded as unread.
        reports = allowed.route.metered and 200 <= response.status_code < 300
        recorded = False
        try:
            self.send_response(response.status_code)
            for key, value in response.headers.multi_items():
                if key.lower() not in _HOP_BY_HOP and key.lower() != "content-encoding":
                    self.send_header(key, value)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for chunk in response.iter_raw():
                if not chunk:
                    continue
                meter.feed(chunk)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            # Recorded before the answer ends: whoever has the whole answer finds its usage,
            # and its question.
            recorded = True
            record_usage(ledger, spender, meter, reports, allowed.route.path)
            keep_question(db, spender, meter)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            logger.debug("the CLI went away mid-answer", extra=whose(spender))
            self.close_connection = True  # the CLI went away: what passed is still recorded
        finally:
            response.close()
            if not recorded:  # cut short: what passed is still recorded
                record_usage(ledger, spender, meter, reports, allowed.route.path)


class _UnixHandler(_Handler):
    disable_nagle_algorithm = False  # no TCP here

    def address_string(self) -> str:
        return "unix"


def _json_body(body: bytes) -> dict[str, Any]:
    """A request's JSON body, read once; {} when it is none."""
    try:
        request = json.loads(body) if body else None
    except ValueError:
        return {}
    return request if isinstance(request, dict) else {}


def _without_credentials(text: str, headers: Mapping[str, str]) -> str:
    """`text` with the credential a request's `headers` carry masked, wherever it shows (an
    error's text may quote a URL or a header)."""
    for name in CREDENTIAL_HEADERS:
        value = headers.get(name, "").strip()
        # Stripped: a key with a stray line end is quoted by the error it causes.
        for secret in (value, value.removeprefix("Bearer ").strip()):
            if len(secret) >= 8:
                text = text.replace(secret, "***")
    return text
