"""The HTTP side of the scripted model servers (`legion.demo.scripted`): `ScriptedHandler`,
the plumbing every server's handler shares (reading bodies, JSON and SSE answers, scripted
refusals, recording each request), which refuses proxy requests (recorded as
`kind="outbound"`) and records anything it does not serve as `kind="not_found"`; and
`ScriptedHTTPServer`, the threading server on 127.0.0.1 that holds its `ScriptedServer`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qs, urlsplit

from legion.demo.script import new_id

if TYPE_CHECKING:
    from legion.demo.scripted import RecordedRequest, ScriptedServer

REDACTED_HEADERS = frozenset(
    {"x-api-key", "authorization", "proxy-authorization", "cookie", "x-goog-api-key"}
)


# The error type of a refused request, by its status (as Anthropic's API names them).
_REFUSAL_KINDS = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}


class ScriptedHandler(BaseHTTPRequestHandler):
    """The HTTP plumbing: a subclass routes its API (`_route_get`, `_route_post`) and says how
    its errors and streams look (`_error`, `_sse_events`, `_body_problem`)."""

    protocol_version = "HTTP/1.1"
    # A stream is many small writes: with Nagle's algorithm each waits for the client's
    # delayed ACK of the one before (40 ms on Linux), as a real API's server does not.
    disable_nagle_algorithm = True
    server: ScriptedHTTPServer
    request_id_header: ClassVar[str] = "request-id"
    server_label: ClassVar[str] = "fake model server"
    not_found_type: ClassVar[str] = "not_found_error"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean; requests are recorded instead

    # ---- what a subclass supplies ---------------------------------------------------------

    def _error(self, status: int, kind: str, message: str) -> None:
        raise NotImplementedError

    def _route_get(self, path: str) -> bool:
        """Answer a GET of `path` other than `/`; False when the path is not served."""
        return False

    def _route_post(self, path: str, body: Any) -> bool:
        """Answer a POST of `path`; False when the path is not served."""
        return False

    def _body_problem(self, body: Any) -> str | None:
        """Why `body` is no request the model can answer (a 400), or None."""
        return None

    def _streams(self, body: Any) -> bool:
        """Whether the answer to `body` is a stream: the body's `"stream": true` says."""
        return bool(body.get("stream"))

    def _sse_events(
        self, response: Mapping[str, Any], pauses: Sequence[tuple[int, float]]
    ) -> Iterable[tuple[str, Mapping[str, Any]]]:
        """(event, data) pairs; ("pause", {"seconds": s}) is no event but a wait."""
        raise NotImplementedError

    # ---- plumbing -------------------------------------------------------------------------

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        return self._parse_body(raw)

    def _parse_body(self, raw: bytes) -> Any:
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _headers(self) -> dict[str, str]:
        return {
            k.lower(): ("<redacted>" if k.lower() in REDACTED_HEADERS else v)
            for k, v in self.headers.items()
        }

    def _send_json(self, status: int, payload: Any, extra: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header(self.request_id_header, new_id("req"))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_sse(self, response: Mapping[str, Any], pauses: Sequence[tuple[int, float]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header(self.request_id_header, new_id("req"))
        self.end_headers()
        for event, data in self._sse_events(response, pauses):
            if event == "pause":
                time.sleep(float(data["seconds"]))
                continue
            named = f"event: {event}\n" if event else ""  # Gemini's API names no event
            payload = f"{named}data: {json.dumps(data)}\n\n".encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _record(self, kind: str, body: Any, **extra: Any) -> RecordedRequest[Any]:
        if kind == "outbound":
            # CONNECT host:443 or GET http://host/...: keep the whole target
            path, query = self.path, {}
        else:
            split = urlsplit(self.path)
            path, query = split.path, parse_qs(split.query)
        request: RecordedRequest[Any] = self.server.fake.record(
            method=self.command,
            path=path,
            query=query,
            headers=self._headers(),
            body=body,
            kind=kind,
            **extra,
        )
        return request

    def _is_proxy_request(self) -> bool:
        return self.path.startswith(("http://", "https://"))

    def _not_found(self, path: str, body: Any) -> None:
        self._record("not_found", body)
        self._error(404, self.not_found_type, f"Not found: {path}")

    def _answer(self, body: Any) -> None:
        """Answer a request for a model turn (scripted, fallback or side)."""
        problem = self._body_problem(body)
        if problem is not None:
            self._record("other", body)
            return self._error(400, "invalid_request_error", problem)
        refusal = self.server.fake.take_refusal()
        if refusal is not None:
            status, headers = refusal
            kind = _REFUSAL_KINDS.get(status, "overloaded_error")
            message = f"scripted {status}"
            if status == 401:  # as OpenAI's says it: part of the key it was sent
                message += f": incorrect API key provided: {_key_hint(self.headers)}"
            payload = {"type": "error", "error": {"type": kind, "message": message}}
            self._record("refused", body, response=payload)
            return self._send_json(status, payload, headers)
        response, record = self.server.fake.answer(body)
        pauses: list[tuple[int, float]] = response.pop("_pauses", [])
        self._record(record.pop("kind"), body, response=response, **record)
        if self._streams(body):
            self._send_sse(response, pauses)
        else:
            time.sleep(sum(seconds for _, seconds in pauses))
            self._send_json(200, response)

    # ---- verbs ----------------------------------------------------------------------------

    def do_CONNECT(self) -> None:
        self._record("outbound", None)
        self._error(403, "permission_error", f"{self.server_label}: outbound traffic is blocked")
        self.close_connection = True

    def do_HEAD(self) -> None:
        if self._is_proxy_request():
            return self.do_CONNECT()
        self._record("other", None)
        self._send_json(200, {})

    def do_GET(self) -> None:
        if self._is_proxy_request():
            return self.do_CONNECT()
        path = urlsplit(self.path).path
        if path == "/":
            self._record("other", None)
            return self._send_json(200, {"ok": True})
        if not self._route_get(path):
            self._not_found(path, None)

    def do_DELETE(self) -> None:
        self.do_GET()

    def do_PUT(self) -> None:
        self.do_POST()

    def do_POST(self) -> None:
        if self._is_proxy_request():
            self._read_body()
            return self.do_CONNECT()
        path = urlsplit(self.path).path
        body = self._read_body()
        if not self._route_post(path, body):
            self._not_found(path, body)


class ScriptedHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        fake: ScriptedServer[Any, Any, Any],
        handler: type[ScriptedHandler],
    ) -> None:
        self.fake = fake
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (a CLI killed mid-request) is normal here, not worth a
        traceback on the demo's terminal; anything else still gets one."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def _key_hint(headers: Message) -> str:
    """The part of a request's key a provider's "wrong key" message quotes."""
    key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
    return f"{key[:7]}***{key[-4:]}" if len(key) > 12 else "***"
