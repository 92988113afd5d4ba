"""A scripted, Anthropic-compatible Messages API server for driving the real Claude Code CLI.

The server binds to 127.0.0.1 only.  Tests describe what the "model" answers as a `Script`:
a list of `Scenario` objects, each chosen by matching a substring (or a regex) against the
latest *human* prompt of a request, and each holding a list of turns.  A turn is a list of
content blocks (`text(...)`, `tool_use(...)`, `pause(...)`).  The turn to answer with is the
number of assistant messages that follow that prompt in the request's history, so the server
keeps no per-conversation state and `claude --resume` (which re-sends the whole history) just
works.

Requests that the CLI makes on the side (probes with `max_tokens` 1, session-title generation
and other tool-less helpers) are recognised by `classify_side_request` and get a harmless
canned answer; being stateless, the server never lets them consume a scripted turn.

Every request is recorded in memory (and, optionally, appended to a JSONL file) so tests can
check what the CLI sent.  The server also answers HTTP proxy requests (absolute-URI requests
and `CONNECT`) with 403 and records them as `kind="outbound"`; point `HTTPS_PROXY` /
`HTTP_PROXY` at the server to catch any attempt of the CLI to reach another host.

Standalone use (for tests that need the server in another process):

    python -m legion.demo.model_server --port 0 --script script.json \
        --log requests.jsonl --port-file port.txt
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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import parse_qs, urlsplit

JSON = dict[str, Any]

DEFAULT_MODEL = "claude-sonnet-4-5"
FALLBACK_TEXT = "(fake model: no scripted turn left)"
SIDE_TEXT = "ok"
REDACTED_HEADERS = frozenset({"x-api-key", "authorization", "proxy-authorization", "cookie"})

# --------------------------------------------------------------------------------------------
# Script model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextBlock:
    text: str


@dataclass(frozen=True)
class ToolUseBlock:
    name: str
    input: Mapping[str, Any]
    id: str | None = None  # generated (toolu_...) when None


@dataclass(frozen=True)
class PauseBlock:
    """Not content: the server waits `seconds` at this point of the stream (busy UI in tests)."""

    seconds: float


Block = TextBlock | ToolUseBlock | PauseBlock
Turn = Sequence[Block]


def text(value: str) -> TextBlock:
    return TextBlock(value)


def tool_use(name: str, input: Mapping[str, Any], id: str | None = None) -> ToolUseBlock:
    return ToolUseBlock(name, dict(input), id)


def pause(seconds: float) -> PauseBlock:
    return PauseBlock(seconds)


def bash(command: str, description: str = "Run a command") -> ToolUseBlock:
    """A `Bash` tool_use block (the CLI's shell tool)."""
    return tool_use("Bash", {"command": command, "description": description})


def ask_user_question(
    question: str,
    options: Sequence[str | tuple[str, str]],
    header: str = "Question",
    multi_select: bool = False,
) -> ToolUseBlock:
    """An `AskUserQuestion` tool_use block with one question (2-4 options)."""
    opts = [
        {"label": o, "description": o}
        if isinstance(o, str)
        else {"label": o[0], "description": o[1]}
        for o in options
    ]
    return tool_use(
        "AskUserQuestion",
        {
            "questions": [
                {
                    "question": question,
                    "header": header,
                    "options": opts,
                    "multiSelect": multi_select,
                }
            ]
        },
    )


@dataclass
class Scenario:
    """Turns to play when the latest human prompt matches `match`.

    `match` is a substring (case-sensitive) unless `regex` is true, in which case it is searched
    with `re.search` (pass flags inline, e.g. ``(?i)``).
    """

    match: str
    turns: Sequence[Turn]
    name: str = ""
    regex: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            self.name = self.match
        self._pattern = re.compile(self.match) if self.regex else None

    def matches(self, prompt: str) -> bool:
        if self._pattern is not None:
            return self._pattern.search(prompt) is not None
        return self.match in prompt


@dataclass
class Script:
    scenarios: list[Scenario] = field(default_factory=list)
    fallback_text: str = FALLBACK_TEXT
    side_text: str = SIDE_TEXT

    def find(self, prompt: str) -> Scenario | None:
        for scenario in self.scenarios:
            if scenario.matches(prompt):
                return scenario
        return None

    # ---- JSON form ------------------------------------------------------------------------
    # {"scenarios": [{"name": "hi", "match": "say hi", "regex": false,
    #                 "turns": [[{"type": "text", "text": "hi"}],
    #                           [{"type": "tool_use", "name": "Bash", "input": {...}}]]}],
    #  "fallback_text": "...", "side_text": "..."}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Script:
        scenarios = []
        for raw in data.get("scenarios", []):
            turns = [[_block_from_json(b) for b in turn] for turn in raw.get("turns", [])]
            scenarios.append(
                Scenario(
                    match=str(raw["match"]),
                    turns=turns,
                    name=str(raw.get("name", "")),
                    regex=bool(raw.get("regex", False)),
                )
            )
        return cls(
            scenarios=scenarios,
            fallback_text=str(data.get("fallback_text", FALLBACK_TEXT)),
            side_text=str(data.get("side_text", SIDE_TEXT)),
        )

    @classmethod
    def load(cls, path: str | Path) -> Script:
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))

    def to_json(self) -> JSON:
        return {
            "scenarios": [
                {
                    "name": s.name,
                    "match": s.match,
                    "regex": s.regex,
                    "turns": [[_block_to_json(b) for b in turn] for turn in s.turns],
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


def _block_from_json(raw: Mapping[str, Any]) -> Block:
    kind = raw.get("type")
    if kind == "text":
        return TextBlock(str(raw["text"]))
    if kind == "tool_use":
        return ToolUseBlock(str(raw["name"]), dict(raw.get("input", {})), raw.get("id"))
    if kind == "pause":
        return PauseBlock(float(raw["seconds"]))
    raise ValueError(f"unknown block type in script: {kind!r}")


def _block_to_json(block: Block) -> JSON:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, PauseBlock):
        return {"type": "pause", "seconds": block.seconds}
    out: JSON = {"type": "tool_use", "name": block.name, "input": dict(block.input)}
    if block.id is not None:
        out["id"] = block.id
    return out


# --------------------------------------------------------------------------------------------
# Reading requests
# --------------------------------------------------------------------------------------------


def _text_of(content: Any) -> list[str]:
    """All plain-text pieces of a message's content (string or block list)."""
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
    ]


def _is_human_message(message: Mapping[str, Any]) -> bool:
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if isinstance(content, str):
        return True
    if not isinstance(content, list):
        return False
    if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return False
    return any(isinstance(b, dict) and b.get("type") == "text" for b in content)


def latest_human_prompt(messages: Sequence[Mapping[str, Any]]) -> tuple[int, str] | None:
    """Index and joined text of the last user message that is a human prompt.

    A human prompt is a user message with text and no tool_result blocks.  The CLI wraps
    context in `<system-reminder>` text blocks, so all text blocks are joined.
    """
    for index in range(len(messages) - 1, -1, -1):
        if _is_human_message(messages[index]):
            return index, "\n".join(_text_of(messages[index].get("content")))
    return None


def assistant_turns_after(messages: Sequence[Mapping[str, Any]], index: int) -> int:
    """Assistant turns after `index`; consecutive assistant messages count as one turn."""
    turns = 0
    previous_was_assistant = False
    for message in messages[index + 1 :]:
        role = message.get("role")
        if role == "assistant":
            if not previous_was_assistant:
                turns += 1
            previous_was_assistant = True
        elif role == "user":
            previous_was_assistant = False
    return turns


def classify_side_request(body: Mapping[str, Any]) -> str | None:
    """Why a /v1/messages request is a side request of the CLI, or None for a main-loop request.

    What Claude Code 2.1.328 sends (docs/claude-code-cli.md): main-loop requests, sub-agent
    requests and helpers forked from the conversation carry a non-empty `tools` list, whatever
    the model (`--model haiku` main loops are haiku requests).  Side requests are probes (quota,
    model validation, API key checks: `max_tokens` 1, no tools) and helpers such as session
    title generation (`tools: []`, `output_config.format` a JSON schema).
    """
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and max_tokens <= 1:
        return "probe"
    if not body.get("tools"):
        output_config = body.get("output_config")
        if isinstance(output_config, dict) and isinstance(output_config.get("format"), dict):
            return "structured-output"
        return "no-tools"
    return None


def system_prompt_text(body: Mapping[str, Any]) -> str:
    """The request's system prompt as one string (it is a list of text blocks in 2.1.x)."""
    system = body.get("system")
    if isinstance(system, str):
        return system
    return "\n".join(_text_of(system))


# --------------------------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------------------------

Kind = Literal["scripted", "fallback", "side", "count_tokens", "other", "outbound", "not_found"]


@dataclass
class RecordedRequest:
    seq: int
    time: float
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    kind: Kind
    scenario: str | None = None
    turn: int | None = None
    prompt: str | None = None
    side_reason: str | None = None
    response: Any = None

    @property
    def messages(self) -> list[JSON]:
        if isinstance(self.body, dict):
            return list(self.body.get("messages", []))
        return []

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    def tool_results(self) -> list[JSON]:
        """tool_result blocks of the last user message (what the CLI answers to tool_use)."""
        messages = self.messages
        if not messages or messages[-1].get("role") != "user":
            return []
        content = messages[-1].get("content")
        if not isinstance(content, list):
            return []
        return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]

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
    def from_json(cls, raw: Mapping[str, Any]) -> RecordedRequest:
        fields: dict[str, Any] = {k: raw.get(k) for k in cls.__dataclass_fields__}
        return cls(**fields)


def read_request_log(path: str | Path) -> list[RecordedRequest]:
    """Requests recorded by a (standalone) server in its JSONL log."""
    file = Path(path)
    if not file.exists():
        return []
    return [
        RecordedRequest.from_json(json.loads(line))
        for line in file.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def tool_result_text(block: Mapping[str, Any]) -> str:
    """The text of a tool_result block (its content is a string or a list of text blocks)."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(_text_of(content))


# --------------------------------------------------------------------------------------------
# Responses
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


def _new_id(prefix: str) -> str:
    return f"{prefix}_fake{next(_ids):04d}{uuid.uuid4().hex[:16]}"


def _estimate_tokens(body: Any) -> int:
    return max(1, len(json.dumps(body, ensure_ascii=False)) // 4)


def build_message(model: str, blocks: Turn, input_tokens: int) -> JSON:
    """The complete assistant message for a turn.

    Pause blocks are kept out of `content`; they go to the private key `_pauses` as
    (content index to pause before, seconds) pairs, which `sse_events` turns into waits.
    """
    content: list[JSON] = []
    pauses: list[tuple[int, float]] = []
    for block in blocks:
        if isinstance(block, PauseBlock):
            pauses.append((len(content), block.seconds))
        elif isinstance(block, TextBlock):
            content.append({"type": "text", "text": block.text})
        else:
            content.append(
                {
                    "type": "tool_use",
                    "id": block.id or _new_id("toolu"),
                    "name": block.name,
                    "input": dict(block.input),
                }
            )
    has_tool = any(b["type"] == "tool_use" for b in content)
    output_tokens = max(1, _estimate_tokens(content))
    return {
        "id": _new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if has_tool else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
        "_pauses": pauses,
    }


def _chunks(value: str, size: int) -> Iterator[str]:
    for start in range(0, len(value), size):
        yield value[start : start + size]


def sse_events(
    message: Mapping[str, Any], pauses: Sequence[tuple[int, float]] = ()
) -> Iterator[tuple[str, JSON]]:
    """The streaming events for a complete message, as the Messages API emits them.

    A ("pause", {"seconds": s}) item is no event: the writer waits `s` seconds there.
    """
    usage = dict(message["usage"])
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**usage, "output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    for index, block in enumerate([*message["content"], None]):
        for at, seconds in pauses:
            if at == index:
                yield "pause", {"seconds": seconds}
        if block is None:
            break
        if block["type"] == "text":
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            for piece in _chunks(block["text"], 40) if block["text"] else [""]:
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
        else:
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": block["id"],
                        "name": block["name"],
                        "input": {},
                    },
                },
            )
            for piece in _chunks(json.dumps(block["input"]), 40):
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


# --------------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean; requests are recorded instead

    # ---- plumbing -------------------------------------------------------------------------

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
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
        self.send_header("request-id", _new_id("req"))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_sse(self, message: Mapping[str, Any], pauses: Sequence[tuple[int, float]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", _new_id("req"))
        self.end_headers()
        for event, data in sse_events(message, pauses):
            if event == "pause":
                time.sleep(float(data["seconds"]))
                continue
            payload = f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _error(self, status: int, kind: str, message: str) -> None:
        self._send_json(status, {"type": "error", "error": {"type": kind, "message": message}})

    def _record(self, kind: Kind, body: Any, **extra: Any) -> RecordedRequest:
        if kind == "outbound":
            # CONNECT host:443 or GET http://host/...: keep the whole target
            path, query = self.path, {}
        else:
            split = urlsplit(self.path)
            path, query = split.path, parse_qs(split.query)
        return self.server.fake.record(
            method=self.command,
            path=path,
            query=query,
            headers=self._headers(),
            body=body,
            kind=kind,
            **extra,
        )

    def _is_proxy_request(self) -> bool:
        return self.path.startswith(("http://", "https://"))

    # ---- verbs ----------------------------------------------------------------------------

    def do_CONNECT(self) -> None:
        self._record("outbound", None)
        self._error(403, "permission_error", "fake model server: outbound traffic is blocked")
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
        self._record("not_found", None)
        self._error(404, "not_found_error", f"Not found: {path}")

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
        if path == "/v1/messages":
            return self._messages(body)
        if path == "/v1/messages/count_tokens":
            tokens = _estimate_tokens(body)
            self._record("count_tokens", body, response={"input_tokens": tokens})
            return self._send_json(200, {"input_tokens": tokens})
        self._record("not_found", body)
        self._error(404, "not_found_error", f"Not found: {path}")

    def _messages(self, body: Any) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._record("other", body)
            return self._error(400, "invalid_request_error", "messages: field required")
        fake = self.server.fake
        message, record = fake.answer(body)
        pauses: list[tuple[int, float]] = message.pop("_pauses", [])
        self._record(record.pop("kind"), body, response=message, **record)
        if body.get("stream"):
            self._send_sse(message, pauses)
        else:
            time.sleep(sum(seconds for _, seconds in pauses))
            self._send_json(200, message)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], fake: FakeModelServer) -> None:
        self.fake = fake
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (a CLI killed mid-request) is normal here, not worth a
        traceback on the demo's terminal; anything else still gets one."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FakeModelServer:
    """The scripted server; a context manager that starts it on 127.0.0.1 and stops it."""

    def __init__(
        self,
        script: Script | Iterable[Scenario] | None = None,
        *,
        port: int = 0,
        log_path: str | Path | None = None,
        model: str | None = None,
        side_request: Callable[[Mapping[str, Any]], str | None] = classify_side_request,
    ) -> None:
        if script is None:
            script = Script()
        elif not isinstance(script, Script):
            script = Script(list(script))
        self.script = script
        self.port = port
        self.log_path = Path(log_path) if log_path else None
        self.model = model
        self.side_request = side_request
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._seq = itertools.count(1)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> Self:
        self._httpd = _HTTPServer(("127.0.0.1", self.port), self)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-model-server",
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
        self, match: str, turns: Sequence[Turn], *, name: str = "", regex: bool = False
    ) -> Scenario:
        scenario = Scenario(match=match, turns=turns, name=name, regex=regex)
        with self._lock:
            self.script.scenarios.append(scenario)
        return scenario

    def answer(self, body: Mapping[str, Any]) -> tuple[JSON, dict[str, Any]]:
        """The message to answer a /v1/messages body with, and what to record about it."""
        model = self.model or str(body.get("model") or DEFAULT_MODEL)
        tokens = _estimate_tokens(body)
        side = self.side_request(body)
        if side is not None:
            return (
                build_message(model, [TextBlock(self._side_text(body))], tokens),
                {"kind": "side", "side_reason": side},
            )
        messages = body.get("messages", [])
        found = latest_human_prompt(messages)
        if found is None:
            return build_message(model, [TextBlock(self.script.fallback_text)], tokens), {
                "kind": "fallback"
            }
        index, prompt = found
        turn = assistant_turns_after(messages, index)
        with self._lock:
            scenario = self.script.find(prompt)
        if scenario is None or turn >= len(scenario.turns):
            return build_message(model, [TextBlock(self.script.fallback_text)], tokens), {
                "kind": "fallback",
                "scenario": scenario.name if scenario else None,
                "turn": turn,
                "prompt": prompt,
            }
        return build_message(model, scenario.turns[turn], tokens), {
            "kind": "scripted",
            "scenario": scenario.name,
            "turn": turn,
            "prompt": prompt,
        }

    def _side_text(self, body: Mapping[str, Any]) -> str:
        output_config = body.get("output_config")
        fmt = output_config.get("format") if isinstance(output_config, dict) else None
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            # e.g. session titles: {"type": "object", "properties": {"title": ...}}
            return json.dumps(example_for_schema(fmt.get("schema") or {}, self.script.side_text))
        return self.script.side_text

    # ---- recording ------------------------------------------------------------------------

    def record(self, **fields: Any) -> RecordedRequest:
        with self._cond:
            request = RecordedRequest(seq=next(self._seq), time=time.time(), **fields)
            self.requests.append(request)
            self._cond.notify_all()
        self.log_to_file(request)
        return request

    def log_to_file(self, request: RecordedRequest) -> None:
        if self.log_path is None:
            return
        line = json.dumps(request.to_json(), ensure_ascii=False)
        with self._lock, self.log_path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")

    def snapshot(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self.requests)

    def message_requests(self, kind: Kind | None = None) -> list[RecordedRequest]:
        return [
            r
            for r in self.snapshot()
            if r.path == "/v1/messages" and (kind is None or r.kind == kind)
        ]

    def requests_for_scenario(self, name: str) -> list[RecordedRequest]:
        return [r for r in self.snapshot() if r.scenario == name]

    def last_request(self, scenario: str | None = None) -> RecordedRequest | None:
        for request in reversed(self.snapshot()):
            if request.path != "/v1/messages":
                continue
            if scenario is None and request.kind in ("scripted", "fallback"):
                return request
            if scenario is not None and request.scenario == scenario:
                return request
        return None

    def outbound_attempts(self) -> list[RecordedRequest]:
        """Requests that reached the server as a proxy (the CLI tried to reach another host)."""
        return [r for r in self.snapshot() if r.kind == "outbound"]

    def wait_for(
        self, predicate: Callable[[RecordedRequest], bool], timeout: float = 30.0
    ) -> RecordedRequest:
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

    def wait_for_turn(self, scenario: str, turn: int, timeout: float = 30.0) -> RecordedRequest:
        """Wait until the request that asks for turn `turn` of `scenario` arrived."""
        return self.wait_for(lambda r: r.scenario == scenario and r.turn == turn, timeout)


# --------------------------------------------------------------------------------------------
# Standalone process
# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--script", type=Path, help="JSON script (see Script.from_json)")
    parser.add_argument("--log", type=Path, help="append every request as JSONL here")
    parser.add_argument("--port-file", type=Path, help="write the bound port here once listening")
    args = parser.parse_args(argv)

    script = Script.load(args.script) if args.script else Script()
    server = FakeModelServer(script, port=args.port, log_path=args.log).start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.port_file:
        tmp = args.port_file.with_suffix(".tmp")
        tmp.write_text(str(server.port), encoding="utf-8")
        tmp.replace(args.port_file)
    print(f"listening on {server.base_url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
