"""A scripted, OpenAI Responses-API server for driving the real Codex CLI offline.

The Codex counterpart of `legion.demo.model_server` (same design, same names): the server
binds to 127.0.0.1 only; tests describe what the "model" answers as a `Script` of `Scenario`s,
each chosen by matching a substring (or a regex) against the latest *human* prompt of a
request (the last `role: "user"` message of `input` that is not context Codex injects, such as
`<environment_context>` or the AGENTS.md instructions), and each holding a list of turns.  A
turn is a list of blocks (`text(...)`, `function_call(...)` / `exec_command(...)`,
`pause(...)`).  The turn to answer with is the number of model turns that follow the prompt in
the request's `input` (output items separated by tool outputs), so the server keeps no
per-conversation state and `codex exec resume` / `codex resume` (which re-send the whole
history) just work.

What Codex 0.169.0 sends and expects is in docs/codex-cli.md: `POST /v1/responses` with
`"stream": true`, answered with SSE events `response.created`, `response.output_item.added`,
`response.output_text.delta`, `response.function_call_arguments.delta`,
`response.output_item.done` and `response.completed` (which carries the token usage).

Every request is recorded (in memory and, optionally, in a JSONL file).  The server answers
HTTP proxy requests (absolute-URI requests and `CONNECT`) with 403 and records them as
`kind="outbound"`; point `HTTPS_PROXY` / `HTTP_PROXY` at it to catch any attempt of the CLI
to reach another host.  Anything else it does not know is recorded as `kind="not_found"`.

Standalone use:

    python -m legion.demo.responses_server --port 0 --script script.json \
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

from legion.demo.model_server import example_for_schema

JSON = dict[str, Any]

# A model of Codex 0.169.0's bundled catalog (an unknown one gets a "model metadata not found"
# warning) whose tools come as a plain `tools` list with `exec_command` (the gpt-6 models get a
# JavaScript "code mode" `exec` tool in an `additional_tools` input item instead).  Its catalog
# entry offers an upgrade, so `codex_config_toml` marks that migration as seen.
DEFAULT_MODEL = "gpt-5.5"
MIGRATION_TARGET = "gpt-6-sol"
FALLBACK_TEXT = "(fake model: no scripted turn left)"
SIDE_TEXT = "ok"
REDACTED_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key"})

# The shell tool of Codex 0.169.0 (unified exec): `exec_command {"cmd": ...}`.
SHELL_TOOL = "exec_command"

# User-role messages Codex injects as context, which are not what the human typed.  The first
# two were seen in every request; the others are the forms the binary can also produce.
CONTEXT_PREFIXES = (
    "<environment_context>",
    "# AGENTS.md instructions for ",
    "<user_instructions>",
    "<user_shell_command>",
    "<turn_aborted>",
    "<skill>",
    # after a compaction, the summary comes back as a user message starting so
    "Another language model started to solve this problem",
)

# The compaction request (`/compact`, or automatic) ends with a user message starting so.
COMPACTION_PROMPT_PREFIX = "You are performing a CONTEXT CHECKPOINT COMPACTION"
# The interactive CLI's thread-title request (a side request) starts its user message so.
TITLE_PROMPT_PREFIX = "Generate a concise, single-line task title"

# Items of `input` that the model produced (one model turn is a run of them).
OUTPUT_ITEM_TYPES = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "reasoning",
        "tool_search_call",
        "image_generation_call",
    }
)
# Items that answer a model turn (the next turn follows them).
TOOL_OUTPUT_TYPES = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "tool_search_output",
    }
)

# --------------------------------------------------------------------------------------------
# Script model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextBlock:
    text: str


@dataclass(frozen=True)
class FunctionCallBlock:
    name: str
    arguments: Mapping[str, Any]
    call_id: str | None = None  # generated (call_...) when None


@dataclass(frozen=True)
class PauseBlock:
    """Not content: the server waits `seconds` at this point of the stream (busy UI in tests)."""

    seconds: float


Block = TextBlock | FunctionCallBlock | PauseBlock
Turn = Sequence[Block]


def text(value: str) -> TextBlock:
    return TextBlock(value)


def function_call(
    name: str, arguments: Mapping[str, Any], call_id: str | None = None
) -> FunctionCallBlock:
    return FunctionCallBlock(name, dict(arguments), call_id)


# The model_server name, so scripts for both servers read the same.
tool_use = function_call


def pause(seconds: float) -> PauseBlock:
    return PauseBlock(seconds)


def exec_command(cmd: str, **extra: Any) -> FunctionCallBlock:
    """An `exec_command` call (Codex's shell tool); `extra` e.g. workdir=, yield_time_ms=."""
    return function_call(SHELL_TOOL, {"cmd": cmd, **extra})


def bash(command: str, description: str = "") -> FunctionCallBlock:
    """The shell tool call, named as in model_server (`description` is not sent: Codex's tool
    has no such argument)."""
    del description
    return exec_command(command)


@dataclass
class Scenario:
    """Turns to play when the latest human prompt matches `match` (substring, or `re.search`
    when `regex`)."""

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
    #                           [{"type": "function_call", "name": "exec_command",
    #                             "arguments": {"cmd": "ls"}}]]}],
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
    if kind in ("function_call", "tool_use"):
        arguments = raw.get("arguments", raw.get("input", {}))
        if isinstance(arguments, str):
            arguments = json.loads(arguments)
        return FunctionCallBlock(
            str(raw["name"]), dict(arguments), raw.get("call_id", raw.get("id"))
        )
    if kind == "pause":
        return PauseBlock(float(raw["seconds"]))
    raise ValueError(f"unknown block type in script: {kind!r}")


def _block_to_json(block: Block) -> JSON:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, PauseBlock):
        return {"type": "pause", "seconds": block.seconds}
    out: JSON = {"type": "function_call", "name": block.name, "arguments": dict(block.arguments)}
    if block.call_id is not None:
        out["call_id"] = block.call_id
    return out


# --------------------------------------------------------------------------------------------
# Reading requests
# --------------------------------------------------------------------------------------------


def item_text(item: Mapping[str, Any]) -> str:
    """The text of a message item (`content` is a string or a list of input/output_text)."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        str(part.get("text", ""))
        for part in content
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text", "text")
    )


def _is_message(item: Mapping[str, Any], role: str) -> bool:
    return item.get("type", "message") == "message" and item.get("role") == role


def is_context_message(item: Mapping[str, Any]) -> bool:
    """A user-role message Codex injected (environment, AGENTS.md, ...), not a human prompt."""
    return item_text(item).lstrip().startswith(CONTEXT_PREFIXES)


def is_human_message(item: Mapping[str, Any]) -> bool:
    return _is_message(item, "user") and not is_context_message(item)


def latest_human_prompt(items: Sequence[Mapping[str, Any]]) -> tuple[int, str] | None:
    """Index and text of the last user message of `input` that is a human prompt."""
    for index in range(len(items) - 1, -1, -1):
        if is_human_message(items[index]):
            return index, item_text(items[index])
    return None


def _is_output_item(item: Mapping[str, Any]) -> bool:
    return item.get("type") in OUTPUT_ITEM_TYPES or _is_message(item, "assistant")


def assistant_turns_after(items: Sequence[Mapping[str, Any]], index: int) -> int:
    """Model turns after `index`: runs of output items (assistant messages, function calls,
    reasoning) between tool outputs and user messages; developer messages are ignored."""
    turns = 0
    previous_was_output = False
    for item in items[index + 1 :]:
        if _is_output_item(item):
            if not previous_was_output:
                turns += 1
            previous_was_output = True
        elif item.get("type") in TOOL_OUTPUT_TYPES or _is_message(item, "user"):
            previous_was_output = False
    return turns


def structured_output_schema(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JSON schema of `text.format` when the request asks for structured output."""
    fmt = body.get("text", {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = fmt.get("schema")
        return schema if isinstance(schema, dict) else {}
    return None


def _has_tools(body: Mapping[str, Any]) -> bool:
    if body.get("tools"):
        return True
    items = body.get("input")
    return isinstance(items, list) and any(
        isinstance(i, dict) and i.get("type") == "additional_tools" and i.get("tools")
        for i in items
    )


def classify_side_request(body: Mapping[str, Any]) -> str | None:
    """Why a /v1/responses request is not a main-loop request, or None.

    What Codex 0.169.0 sends (docs/codex-cli.md): main-loop and compaction requests carry its
    tools (a `tools` list, or an `additional_tools` input item for the gpt-6 models).  The TUI
    also names the thread, in a thread of its own, with a request whose last user message starts
    with `TITLE_PROMPT_PREFIX` and whose `text.format` is a JSON schema (`{"title": ...}`); it
    carries the tools with gpt-5.5 and none with gpt-6-sol.  That is "title"; any other
    tool-less request is "structured-output" (with a schema) or "no-tools".  The compaction
    request (tool-less, its last user message starting with `COMPACTION_PROMPT_PREFIX`) is
    "compaction"; its answer (`Script.side_text`) becomes the summary."""
    items = body.get("input")
    if isinstance(items, list):
        found = latest_human_prompt([i for i in items if isinstance(i, dict)])
        if found is not None and found[1].startswith(TITLE_PROMPT_PREFIX):
            return "title"
        last = next((i for i in reversed(items) if isinstance(i, dict)), None)
        if (
            last is not None
            and _is_message(last, "user")
            and item_text(last).startswith(COMPACTION_PROMPT_PREFIX)
        ):
            return "compaction"
    if structured_output_schema(body) is not None and not body.get("tools"):
        return "structured-output"
    if not _has_tools(body):
        return "no-tools"
    return None


def function_call_outputs(items: Sequence[Mapping[str, Any]]) -> list[JSON]:
    """The tool outputs at the end of `input` (what Codex answers to the last function calls)."""
    out: list[JSON] = []
    for item in reversed(items):
        if item.get("type") in TOOL_OUTPUT_TYPES:
            out.append(dict(item))
        elif _is_output_item(item):
            break
    return list(reversed(out))


def output_text(item: Mapping[str, Any]) -> str:
    """The text of a function_call_output (`output` is a string or a list of content parts)."""
    output = item.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(
            str(p.get("text", "")) for p in output if isinstance(p, dict) and "text" in p
        )
    if isinstance(output, dict):
        return str(output.get("content", ""))
    return ""


# --------------------------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------------------------

Kind = Literal["scripted", "fallback", "side", "models", "other", "outbound", "not_found"]


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
    def input(self) -> list[JSON]:
        if isinstance(self.body, dict) and isinstance(self.body.get("input"), list):
            return list(self.body["input"])
        return []

    # The model_server name, so tests read the same.
    @property
    def messages(self) -> list[JSON]:
        return self.input

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def session_id(self) -> str | None:
        """Codex's session (thread) id, from the `session-id` header."""
        return self.headers.get("session-id")

    def tool_names(self) -> list[str]:
        tools = self.body.get("tools", []) if isinstance(self.body, dict) else []
        return [str(t.get("name", t.get("type"))) for t in tools if isinstance(t, dict)]

    def user_prompts(self) -> list[str]:
        """The human prompts of the history, oldest first."""
        return [item_text(i) for i in self.input if is_human_message(i)]

    def tool_results(self) -> list[JSON]:
        """The function_call_output items at the end of `input`."""
        return function_call_outputs(self.input)

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


# The model_server name.
tool_result_text = output_text

# --------------------------------------------------------------------------------------------
# Responses
# --------------------------------------------------------------------------------------------

_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}_fake{next(_ids):04d}{uuid.uuid4().hex[:16]}"


def _estimate_tokens(body: Any) -> int:
    return max(1, len(json.dumps(body, ensure_ascii=False)) // 4)


def build_response(model: str, blocks: Turn, input_tokens: int) -> JSON:
    """The complete `response` object for a turn.

    Pause blocks are kept out of `output`; they go to the private key `_pauses` as
    (output index to pause before, seconds) pairs, which `sse_events` turns into waits.
    Consecutive text blocks become one assistant message.
    """
    output: list[JSON] = []
    pauses: list[tuple[int, float]] = []
    for block in blocks:
        if isinstance(block, PauseBlock):
            pauses.append((len(output), block.seconds))
        elif isinstance(block, TextBlock):
            output.append(
                {
                    "type": "message",
                    "id": _new_id("msg"),
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": block.text, "annotations": []}],
                }
            )
        else:
            output.append(
                {
                    "type": "function_call",
                    "id": _new_id("fc"),
                    "status": "completed",
                    "call_id": block.call_id or _new_id("call"),
                    "name": block.name,
                    "arguments": json.dumps(dict(block.arguments)),
                }
            )
    output_tokens = max(1, _estimate_tokens(output))
    return {
        "id": _new_id("resp"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": model,
        "output": output,
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
        "_pauses": pauses,
    }


def _chunks(value: str, size: int) -> Iterator[str]:
    for start in range(0, len(value), size):
        yield value[start : start + size]


def sse_events(
    response: Mapping[str, Any], pauses: Sequence[tuple[int, float]] = ()
) -> Iterator[JSON]:
    """The streaming events of a complete response, as the Responses API emits them.

    A {"type": "pause", "seconds": s} item is no event: the writer waits `s` seconds there.
    """
    seq = itertools.count()
    start = {**response, "status": "in_progress", "output": [], "usage": None}
    yield {"type": "response.created", "sequence_number": next(seq), "response": start}
    yield {"type": "response.in_progress", "sequence_number": next(seq), "response": start}
    for index, item in enumerate([*response["output"], None]):
        for at, seconds in pauses:
            if at == index:
                yield {"type": "pause", "seconds": seconds}
        if item is None:
            break
        added = {**item, "status": "in_progress"}
        if item["type"] == "message":
            added["content"] = []
        else:
            added["arguments"] = ""
        yield {
            "type": "response.output_item.added",
            "sequence_number": next(seq),
            "output_index": index,
            "item": added,
        }
        if item["type"] == "message":
            for part_index, part in enumerate(item["content"]):
                common = {"item_id": item["id"], "output_index": index, "content_index": part_index}
                yield {
                    "type": "response.content_part.added",
                    "sequence_number": next(seq),
                    **common,
                    "part": {**part, "text": ""},
                }
                for piece in _chunks(part["text"], 40):
                    yield {
                        "type": "response.output_text.delta",
                        "sequence_number": next(seq),
                        **common,
                        "delta": piece,
                    }
                yield {
                    "type": "response.output_text.done",
                    "sequence_number": next(seq),
                    **common,
                    "text": part["text"],
                }
                yield {
                    "type": "response.content_part.done",
                    "sequence_number": next(seq),
                    **common,
                    "part": part,
                }
        else:
            common = {"item_id": item["id"], "output_index": index}
            for piece in _chunks(item["arguments"], 40):
                yield {
                    "type": "response.function_call_arguments.delta",
                    "sequence_number": next(seq),
                    **common,
                    "delta": piece,
                }
            yield {
                "type": "response.function_call_arguments.done",
                "sequence_number": next(seq),
                **common,
                "arguments": item["arguments"],
            }
        yield {
            "type": "response.output_item.done",
            "sequence_number": next(seq),
            "output_index": index,
            "item": item,
        }
    yield {"type": "response.completed", "sequence_number": next(seq), "response": dict(response)}


def models_list(model: str) -> JSON:
    """What `GET /v1/models` answers (the OpenAI list shape); Codex 0.169.0 did not ask."""
    return {
        "object": "list",
        "data": [{"id": model, "object": "model", "created": 0, "owned_by": "legion-fake"}],
        "models": [],
    }


# --------------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are recorded instead

    # ---- plumbing -------------------------------------------------------------------------

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        if encoding == "zstd":  # pragma: no cover - Codex sends zstd only to OpenAI itself
            return {"_undecoded": encoding, "length": len(raw)}
        if encoding in ("gzip", "deflate"):
            import zlib

            raw = zlib.decompress(raw, 16 + zlib.MAX_WBITS if encoding == "gzip" else 0)
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _headers(self) -> dict[str, str]:
        return {
            k.lower(): ("<redacted>" if k.lower() in REDACTED_HEADERS else v)
            for k, v in self.headers.items()
        }

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", _new_id("req"))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_sse(self, response: Mapping[str, Any], pauses: Sequence[tuple[int, float]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", _new_id("req"))
        self.end_headers()
        for event in sse_events(response, pauses):
            if event["type"] == "pause":
                time.sleep(float(event["seconds"]))
                continue
            payload = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _error(self, status: int, kind: str, message: str) -> None:
        self._send_json(status, {"error": {"type": kind, "message": message, "code": kind}})

    def _record(self, kind: Kind, body: Any, **extra: Any) -> RecordedRequest:
        if kind == "outbound":
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
        self._error(403, "permission_error", "fake responses server: outbound traffic is blocked")
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
        if path in ("/v1/models", "/models"):
            payload = models_list(self.server.fake.model or DEFAULT_MODEL)
            self._record("models", None, response=payload)
            return self._send_json(200, payload)
        self._record("not_found", None)
        self._error(404, "not_found", f"Not found: {path}")

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
        if path in ("/v1/responses", "/responses"):
            return self._responses(body)
        self._record("not_found", body)
        self._error(404, "not_found", f"Not found: {path}")

    def _responses(self, body: Any) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("input"), list | str):
            self._record("other", body)
            return self._error(400, "invalid_request_error", "input: field required")
        response, record = self.server.fake.answer(body)
        pauses: list[tuple[int, float]] = response.pop("_pauses", [])
        self._record(record.pop("kind"), body, response=response, **record)
        if body.get("stream"):
            self._send_sse(response, pauses)
        else:
            time.sleep(sum(seconds for _, seconds in pauses))
            self._send_json(200, response)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], fake: FakeResponsesServer) -> None:
        self.fake = fake
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (a CLI killed mid-request) is normal here."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FakeResponsesServer:
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
            name="fake-responses-server",
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
        """The server's root; a Codex provider's `base_url` is this plus `/v1`."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base_url(self) -> str:
        return f"{self.base_url}/v1"

    # ---- scripting ------------------------------------------------------------------------

    def add_scenario(
        self, match: str, turns: Sequence[Turn], *, name: str = "", regex: bool = False
    ) -> Scenario:
        scenario = Scenario(match=match, turns=turns, name=name, regex=regex)
        with self._lock:
            self.script.scenarios.append(scenario)
        return scenario

    def answer(self, body: Mapping[str, Any]) -> tuple[JSON, dict[str, Any]]:
        """The response to answer a /v1/responses body with, and what to record about it."""
        model = self.model or str(body.get("model") or DEFAULT_MODEL)
        tokens = _estimate_tokens(body)
        side = self.side_request(body)
        if side is not None:
            return (
                build_response(model, [TextBlock(self._side_text(body))], tokens),
                {"kind": "side", "side_reason": side},
            )
        raw_input = body.get("input", [])
        items: list[Mapping[str, Any]] = (
            [{"type": "message", "role": "user", "content": raw_input}]
            if isinstance(raw_input, str)
            else [i for i in raw_input if isinstance(i, dict)]
        )
        found = latest_human_prompt(items)
        if found is None:
            return build_response(model, [TextBlock(self.script.fallback_text)], tokens), {
                "kind": "fallback"
            }
        index, prompt = found
        turn = assistant_turns_after(items, index)
        with self._lock:
            scenario = self.script.find(prompt)
        if scenario is None or turn >= len(scenario.turns):
            return build_response(model, [TextBlock(self.script.fallback_text)], tokens), {
                "kind": "fallback",
                "scenario": scenario.name if scenario else None,
                "turn": turn,
                "prompt": prompt,
            }
        return build_response(model, scenario.turns[turn], tokens), {
            "kind": "scripted",
            "scenario": scenario.name,
            "turn": turn,
            "prompt": prompt,
        }

    def _side_text(self, body: Mapping[str, Any]) -> str:
        schema = structured_output_schema(body)
        if schema is not None:  # e.g. thread titles: {"title": ...}
            return json.dumps(example_for_schema(schema, self.script.side_text))
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

    def response_requests(self, kind: Kind | None = None) -> list[RecordedRequest]:
        return [
            r
            for r in self.snapshot()
            if r.path.endswith("/responses") and (kind is None or r.kind == kind)
        ]

    # The model_server name.
    message_requests = response_requests

    def requests_for_scenario(self, name: str) -> list[RecordedRequest]:
        return [r for r in self.snapshot() if r.scenario == name]

    def last_request(self, scenario: str | None = None) -> RecordedRequest | None:
        for request in reversed(self.snapshot()):
            if not request.path.endswith("/responses"):
                continue
            if scenario is None and request.kind in ("scripted", "fallback"):
                return request
            if scenario is not None and request.scenario == scenario:
                return request
        return None

    def outbound_attempts(self) -> list[RecordedRequest]:
        """Requests that reached the server as a proxy (the CLI tried to reach another host)."""
        return [r for r in self.snapshot() if r.kind == "outbound"]

    def unknown_requests(self) -> list[RecordedRequest]:
        """Requests to paths the server does not serve."""
        return [r for r in self.snapshot() if r.kind == "not_found"]

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
# Codex configuration
# --------------------------------------------------------------------------------------------

PROVIDER_ID = "legion_fake"
API_KEY_ENV = "LEGION_FAKE_OPENAI_KEY"


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def codex_config_toml(
    base_url: str,
    *,
    model: str = DEFAULT_MODEL,
    notify: Sequence[str] | None = None,
    trusted_dirs: Iterable[str | Path] = (),
    extra: str = "",
) -> str:
    """A `$CODEX_HOME/config.toml` that sends Codex's model traffic to `base_url` (the server's
    root, e.g. `FakeResponsesServer.base_url`) and switches off what would reach the internet
    (analytics and the plugin marketplace sync; verified in docs/codex-cli.md)."""
    lines = [
        f"model = {_toml_string(model)}",
        f"model_provider = {_toml_string(PROVIDER_ID)}",
        "check_for_update_on_startup = false",
    ]
    if notify is not None:
        lines.append(f"notify = [{', '.join(_toml_string(a) for a in notify)}]")
    if extra:
        lines.append(extra.strip())
    lines += [
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[feedback]",
        "enabled = false",
        "",
        "[tui]",
        "show_tooltips = false",
        "",
        "[notice]",
        "hide_full_access_warning = true",
        "",
        "[notice.model_migrations]",
        f"{_toml_string(DEFAULT_MODEL)} = {_toml_string(MIGRATION_TARGET)}",
        "",
        "[features]",
        "plugins = false",
        # the TUI would otherwise start a shared app-server daemon (one per user, outliving the
        # session, with a copy of the 300 MB binary under CODEX_HOME/packages)
        "daemon_auto_start = false",
        "",
        f"[model_providers.{PROVIDER_ID}]",
        'name = "Legion fake Responses API"',
        f"base_url = {_toml_string(base_url.rstrip('/') + '/v1')}",
        f"env_key = {_toml_string(API_KEY_ENV)}",
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
    ]
    for directory in trusted_dirs:
        lines += ["", f"[projects.{_toml_string(str(directory))}]", 'trust_level = "trusted"']
    return "\n".join(lines) + "\n"


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
    server = FakeResponsesServer(script, port=args.port, log_path=args.log).start()
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
