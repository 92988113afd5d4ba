"""What the scripted model servers share (`legion.demo.model_server` for the Claude Code CLI,
`legion.demo.responses_server` for the Codex CLI).

Each server describes what the "model" answers as a `Script` of `Scenario`s; the two differ only
in their tool-call block (`T` below) and its JSON form, so `Scenario` and `Script` are generic
in it and a server's `Script` subclass supplies the codec.  `RecordedRequest` is what is known
of a request; `ScriptedServer` records requests, waits for them and runs the HTTP server on
127.0.0.1, whose `ScriptedHandler` refuses proxy requests (recorded as `kind="outbound"`) and
records anything it does not serve as `kind="not_found"`.  `main` is the standalone process.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import re
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar, cast
from urllib.parse import parse_qs, urlsplit

JSON = dict[str, Any]

FALLBACK_TEXT = "(fake model: no scripted turn left)"
SIDE_TEXT = "ok"
REDACTED_HEADERS = frozenset(
    {"x-api-key", "authorization", "proxy-authorization", "cookie", "x-goog-api-key"}
)

T = TypeVar("T")  # a server's tool-call block
K = TypeVar("K", bound=str)  # a server's request kinds (a Literal of strings)
S = TypeVar("S", bound="Scenario[Any]")  # a server's Scenario class
R = TypeVar("R", bound="RecordedRequest[Any]")  # a server's RecordedRequest class

# --------------------------------------------------------------------------------------------
# Script model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextBlock:
    text: str


@dataclass(frozen=True)
class PauseBlock:
    """Not content: the server waits `seconds` at this point of the stream (busy UI in tests)."""

    seconds: float


def text(value: str) -> TextBlock:
    return TextBlock(value)


def pause(seconds: float) -> PauseBlock:
    return PauseBlock(seconds)


@dataclass
class Scenario(Generic[T]):
    """Turns to play when the latest human prompt matches `match`.

    `match` is a substring (case-sensitive) unless `regex` is true, in which case it is searched
    with `re.search` (pass flags inline, e.g. ``(?i)``).
    """

    match: str
    turns: Sequence[Sequence[TextBlock | T | PauseBlock]]
    name: str = ""
    regex: bool = False
    # Also matched against the text of a user message that holds tool results (a prompt the
    # CLI merged into the result's message): see the Anthropic server's `_prompt_and_turn`.
    anywhere: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            self.name = self.match
        self._pattern = re.compile(self.match) if self.regex else None

    def matches(self, prompt: str) -> bool:
        if self._pattern is not None:
            return self._pattern.search(prompt) is not None
        return self.match in prompt


@dataclass
class Script(Generic[T, S]):
    """The scenarios of a server; a subclass names its `Scenario` class (`scenario_type`, which
    `from_json` builds) and its tool block's JSON codec (`tool_from_json`, `tool_to_json`)."""

    scenarios: list[S] = field(default_factory=list)
    fallback_text: str = FALLBACK_TEXT
    side_text: str = SIDE_TEXT

    scenario_type: ClassVar[Callable[..., Any]] = Scenario

    def find(self, prompt: str) -> S | None:
        for scenario in self.scenarios:
            if scenario.matches(prompt):
                return scenario
        return None

    def find_anywhere(self, text: str) -> S | None:
        """The first scenario matched anywhere (`Scenario.anywhere`) that `text` matches."""
        for scenario in self.scenarios:
            if scenario.anywhere and scenario.matches(text):
                return scenario
        return None

    # ---- the tool block's JSON form (a subclass's) ----------------------------------------

    @classmethod
    def tool_from_json(cls, kind: Any, raw: Mapping[str, Any]) -> T | None:
        """The tool block a JSON block of type `kind` stands for, or None if it is none."""
        return None

    @classmethod
    def tool_to_json(cls, block: T) -> JSON:
        raise NotImplementedError

    # ---- JSON form ------------------------------------------------------------------------
    # {"scenarios": [{"name": "hi", "match": "say hi", "regex": false,
    #                 "turns": [[{"type": "text", "text": "hi"}],
    #                           [<a tool block, see the subclass>]]}],
    #  "fallback_text": "...", "side_text": "..."}

    @classmethod
    def block_from_json(cls, raw: Mapping[str, Any]) -> TextBlock | T | PauseBlock:
        kind = raw.get("type")
        if kind == "text":
            return TextBlock(str(raw["text"]))
        if kind == "pause":
            return PauseBlock(float(raw["seconds"]))
        tool = cls.tool_from_json(kind, raw)
        if tool is None:
            raise ValueError(f"unknown block type in script: {kind!r}")
        return tool

    @classmethod
    def block_to_json(cls, block: TextBlock | T | PauseBlock) -> JSON:
        if isinstance(block, TextBlock):
            return {"type": "text", "text": block.text}
        if isinstance(block, PauseBlock):
            return {"type": "pause", "seconds": block.seconds}
        return cls.tool_to_json(block)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        scenarios = []
        for raw in data.get("scenarios", []):
            turns = [[cls.block_from_json(b) for b in turn] for turn in raw.get("turns", [])]
            scenarios.append(
                cls.scenario_type(
                    match=str(raw["match"]),
                    turns=turns,
                    name=str(raw.get("name", "")),
                    regex=bool(raw.get("regex", False)),
                    anywhere=bool(raw.get("anywhere", False)),
                )
            )
        return cls(
            scenarios=scenarios,
            fallback_text=str(data.get("fallback_text", FALLBACK_TEXT)),
            side_text=str(data.get("side_text", SIDE_TEXT)),
        )

    @classmethod
    def load(cls, path: str | Path) -> Self:
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))

    def to_json(self) -> JSON:
        return {
            "scenarios": [
                {
                    "name": s.name,
                    "match": s.match,
                    "regex": s.regex,
                    "anywhere": s.anywhere,
                    "turns": [[self.block_to_json(b) for b in turn] for turn in s.turns],
                }
                for s in self.scenarios
            ],
            "fallback_text": self.fallback_text,
            "side_text": self.side_text,
        }

    def dump(self, path: str | Path) -> Path:
        out = Path(path)
        out.write_text(json.dumps(self.to_json(), indent=2), encoding="utf-8")
        return out


# --------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------


def example_for_schema(schema: Mapping[str, Any], text_value: str = SIDE_TEXT) -> Any:
    """A small value that satisfies a (simple) JSON schema, for structured-output requests."""
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for combinator in ("anyOf", "oneOf", "allOf"):
        if schema.get(combinator):
            return example_for_schema(schema[combinator][0], text_value)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {name: example_for_schema(props.get(name) or {}, text_value) for name in props}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return text_value


_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}_fake{next(_ids):04d}{uuid.uuid4().hex[:16]}"


def estimate_tokens(body: Any) -> int:
    return max(1, len(json.dumps(body, ensure_ascii=False)) // 4)


def chunks(value: str, size: int) -> Iterator[str]:
    for start in range(0, len(value), size):
        yield value[start : start + size]


# --------------------------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------------------------


@dataclass
class RecordedRequest(Generic[K]):
    seq: int
    time: float
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    kind: K
    scenario: str | None = None
    turn: int | None = None
    prompt: str | None = None
    side_reason: str | None = None
    response: Any = None

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    def to_json(self) -> JSON:
        return {
            "seq": self.seq,
            "time": self.time,
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "headers": self.headers,
            "body": self.body,
            "kind": self.kind,
            "scenario": self.scenario,
            "turn": self.turn,
            "prompt": self.prompt,
            "side_reason": self.side_reason,
            "response": self.response,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Self:
        fields: dict[str, Any] = {k: raw.get(k) for k in cls.__dataclass_fields__}
        return cls(**fields)

    @classmethod
    def read_log(cls, path: str | Path) -> list[Self]:
        """Requests recorded by a (standalone) server in its JSONL log."""
        file = Path(path)
        if not file.exists():
            return []
        return [
            cls.from_json(json.loads(line))
            for line in file.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]


# --------------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------------


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


class ScriptedServer(Generic[T, S, R]):
    """The scripted server; a context manager that starts it on 127.0.0.1 and stops it.

    A subclass names its handler, its thread, its default model and its `Script` and
    `RecordedRequest` classes; it tells side requests (`_default_side_request`, unless the
    caller passes `side_request`), builds its answers (`_build`), finds the prompt and turn of
    a request (`_prompt_and_turn`) and the JSON schema of a structured-output request
    (`_output_schema`), and says which paths ask for a model turn (`_is_model_path`).
    """

    handler: ClassVar[type[ScriptedHandler]] = ScriptedHandler
    thread_name: ClassVar[str] = "fake-model-server"
    default_model: ClassVar[str] = ""
    script_type: ClassVar[type[Script[Any, Any]]] = Script
    request_type: ClassVar[type[RecordedRequest[Any]]] = RecordedRequest

    def __init__(
        self,
        script: Script[T, S] | Iterable[S] | None = None,
        *,
        port: int = 0,
        log_path: str | Path | None = None,
        model: str | None = None,
        side_request: Callable[[Mapping[str, Any]], str | None] | None = None,
    ) -> None:
        script_type = self.script_type
        self.script: Script[T, S]
        if script is None:
            self.script = script_type()
        elif isinstance(script, script_type):
            self.script = script
        else:
            self.script = script_type(list(cast("Iterable[S]", script)))
        self.port = port
        self.log_path = Path(log_path) if log_path else None
        self.model = model
        self.side_request = side_request or self._default_side_request
        self.requests: list[R] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._seq = itertools.count(1)
        self._httpd: ScriptedHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._refusals: list[tuple[int, dict[str, str]]] = []

    # ---- what a subclass supplies ---------------------------------------------------------

    def _default_side_request(self, body: Mapping[str, Any]) -> str | None:
        """Why a request is a side request of the CLI (`side_request`'s default), or None."""
        return None

    def _build(
        self, model: str, blocks: Sequence[TextBlock | T | PauseBlock], input_tokens: int
    ) -> JSON:
        """The complete answer for a turn (pauses under the private key `_pauses`)."""
        raise NotImplementedError

    def _prompt_and_turn(self, body: Mapping[str, Any]) -> tuple[str, int] | None:
        """The latest human prompt of a request and the number of its turn to answer with."""
        raise NotImplementedError

    def _output_schema(self, body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The JSON schema the answer must follow (structured output), or None."""
        return None

    def _is_model_path(self, path: str) -> bool:
        raise NotImplementedError

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> Self:
        self._httpd = ScriptedHTTPServer(("127.0.0.1", self.port), self, self.handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=self.thread_name,
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---- scripting ------------------------------------------------------------------------

    def add_scenario(
        self,
        match: str,
        turns: Sequence[Sequence[TextBlock | T | PauseBlock]],
        *,
        name: str = "",
        regex: bool = False,
    ) -> S:
        scenario: S = self.script.scenario_type(match=match, turns=turns, name=name, regex=regex)
        with self._lock:
            self.script.scenarios.append(scenario)
        return scenario

    def refuse_next(
        self, status: int, count: int = 1, headers: Mapping[str, str] | None = None
    ) -> None:
        """Answer the next `count` model requests with `status` (401: the key refused, 429:
        rate limited, 529: overloaded) and `headers` (`retry-after`, a provider's reset)
        instead of a turn."""
        with self._lock:
            self._refusals += [(status, dict(headers or {}))] * count

    def take_refusal(self) -> tuple[int, dict[str, str]] | None:
        with self._lock:
            return self._refusals.pop(0) if self._refusals else None

    def answer(self, body: Mapping[str, Any]) -> tuple[JSON, dict[str, Any]]:
        """The answer to a request for a model turn, and what to record about it."""
        model = self.model or str(body.get("model") or self.default_model)
        tokens = estimate_tokens(body)
        side = self.side_request(body)
        if side is not None:
            return (
                self._build(model, [TextBlock(self._side_text(body))], tokens),
                {"kind": "side", "side_reason": side},
            )
        found = self._prompt_and_turn(body)
        if found is None:
            return self._build(model, [TextBlock(self.script.fallback_text)], tokens), {
                "kind": "fallback"
            }
        prompt, turn = found
        with self._lock:
            scenario = self.script.find(prompt)
        if scenario is None or turn >= len(scenario.turns):
            return self._build(model, [TextBlock(self.script.fallback_text)], tokens), {
                "kind": "fallback",
                "scenario": scenario.name if scenario else None,
                "turn": turn,
                "prompt": prompt,
            }
        return self._build(model, scenario.turns[turn], tokens), {
            "kind": "scripted",
            "scenario": scenario.name,
            "turn": turn,
            "prompt": prompt,
        }

    def _side_text(self, body: Mapping[str, Any]) -> str:
        schema = self._output_schema(body)
        if schema is not None:  # e.g. session titles: {"title": ...}
            return json.dumps(example_for_schema(schema, self.script.side_text))
        return self.script.side_text

    # ---- recording ------------------------------------------------------------------------

    def record(self, **fields: Any) -> R:
        with self._cond:
            request = cast(R, self.request_type(seq=next(self._seq), time=time.time(), **fields))
            self.requests.append(request)
            self._cond.notify_all()
        self.log_to_file(request)
        return request

    def log_to_file(self, request: R) -> None:
        if self.log_path is None:
            return
        line = json.dumps(request.to_json(), ensure_ascii=False)
        with self._lock, self.log_path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")

    def snapshot(self) -> list[R]:
        with self._lock:
            return list(self.requests)

    def message_requests(self, kind: str | None = None) -> list[R]:
        """Requests for a model turn (of `kind`, if given)."""
        return [
            r
            for r in self.snapshot()
            if self._is_model_path(r.path) and (kind is None or r.kind == kind)
        ]

    def requests_for_scenario(self, name: str) -> list[R]:
        return [r for r in self.snapshot() if r.scenario == name]

    def last_request(self, scenario: str | None = None) -> R | None:
        for request in self.snapshot()[::-1]:
            if not self._is_model_path(request.path):
                continue
            if scenario is None and request.kind in ("scripted", "fallback"):
                return request
            if scenario is not None and request.scenario == scenario:
                return request
        return None

    def outbound_attempts(self) -> list[R]:
        """Requests that reached the server as a proxy (the CLI tried to reach another host)."""
        return [r for r in self.snapshot() if r.kind == "outbound"]

    def unknown_requests(self) -> list[R]:
        """Requests to paths the server does not serve."""
        return [r for r in self.snapshot() if r.kind == "not_found"]

    def wait_for(self, predicate: Callable[[R], bool], timeout: float = 30.0) -> R:
        """Block until a recorded request satisfies `predicate`; return it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for request in self.requests:
                    if predicate(request):
                        return request
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    seen = [(r.path, r.kind, r.scenario, r.turn) for r in self.requests]
                    raise TimeoutError(f"no matching request within {timeout}s; saw {seen}")
                self._cond.wait(remaining)

    def wait_for_turn(self, scenario: str, turn: int, timeout: float = 30.0) -> R:
        """Wait until the request that asks for turn `turn` of `scenario` arrived."""
        return self.wait_for(lambda r: r.scenario == scenario and r.turn == turn, timeout)


# --------------------------------------------------------------------------------------------
# Standalone process
# --------------------------------------------------------------------------------------------


def main(
    argv: Sequence[str] | None,
    doc: str | None,
    script_type: type[Script[Any, Any]],
    server: Callable[..., ScriptedServer[Any, Any, Any]],
) -> int:
    """Serve `script_type.load(--script)` with `server(script, port=, log_path=)` until a
    SIGTERM or SIGINT; `doc` is the module's docstring (its first line describes it)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--script", type=Path, help="JSON script (see Script.from_json)")
    parser.add_argument("--log", type=Path, help="append every request as JSONL here")
    parser.add_argument("--port-file", type=Path, help="write the bound port here once listening")
    args = parser.parse_args(argv)

    script = script_type.load(args.script) if args.script else script_type()
    running = server(script, port=args.port, log_path=args.log).start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.port_file:
        tmp = args.port_file.with_suffix(".tmp")
        tmp.write_text(str(running.port), encoding="utf-8")
        tmp.replace(args.port_file)
    print(f"listening on {running.base_url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    running.stop()
    return 0


def _key_hint(headers: Message) -> str:
    """The part of a request's key a provider's "wrong key" message quotes."""
    key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
    return f"{key[:7]}***{key[-4:]}" if len(key) > 12 else "***"
