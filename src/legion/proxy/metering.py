"""What a model response used, read from the bytes as they pass through the proxy. Pure: fed
chunks in any split, it keeps no more than the line it is in the middle of.

Anthropic's Messages API streams server-sent events: `message_start` carries the model and the
input tokens (plain, cache creation, cache read) and a first output count; each
`message_delta` carries the output tokens so far. The OpenAI Responses API streams
`response.completed` with the response's whole usage. Gemini's API streams
`GenerateContentResponse` objects, the last one's `usageMetadata` the response's usage. A
response that is not a stream is one
JSON object with `usage` (and `model`). Tokens are recorded exactly as the API reported them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from legion.core.usage import Usage

# A line longer than this is not an event we read (a huge text delta): skipped, not buffered.
MAX_LINE = 1 << 20


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call a response made, whole: its id, its tool and its input."""

    id: str
    name: str
    input: Any


@dataclass(frozen=True, slots=True)
class Metered:
    """One response's usage, as the API reported it."""

    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0

    @property
    def usage(self) -> Usage:
        """The same figures in Legion's terms (`legion.core.usage`)."""
        return Usage(
            input=self.input_tokens,
            output=self.output_tokens,
            cache_read=self.cache_read_tokens,
            cache_write=self.cache_creation_tokens,
        )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


class UsageMeter:
    """Feed it a response's body as it passes (`feed`); `result` is what it used, or None when
    nothing in it reported usage (an error, a request that is not a model call); `calls`, the
    calls it made of the tools in `watched` (Anthropic's `tool_use` blocks)."""

    def __init__(self, *, streaming: bool, watched: frozenset[str] = frozenset()) -> None:
        self.streaming = streaming
        self.watched = watched
        self._calls: dict[int, tuple[str, str, list[str]]] = {}  # block index: id, name, input
        self._ended: set[int] = set()  # the calls whose block ended: whole
        self._partial = b""
        self._skipping = False  # inside a line too long to read
        self._body = bytearray()  # a whole JSON response (not a stream)
        self._model = ""
        self._usage: dict[str, int] = {}
        self._seen = False

    def feed(self, chunk: bytes) -> None:
        if not self.streaming:
            if len(self._body) + len(chunk) <= 16 * MAX_LINE:
                self._body += chunk
            return
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            if self._skipping:
                self._skipping = False  # the end of the long line
                continue
            self._line(line.rstrip(b"\r"))
        if len(self._partial) > MAX_LINE:
            self._partial = b""
            self._skipping = True

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        try:
            event = json.loads(line[5:].strip())
        except ValueError:
            return
        if isinstance(event, dict):
            self._event(event)

    def _event(self, event: dict[str, Any]) -> None:
        if "usageMetadata" in event:  # Gemini: the counts so far
            self._model = str(event.get("modelVersion") or self._model)
            self._gemini(event["usageMetadata"])
            return
        kind = event.get("type")
        if kind == "message_start":  # Anthropic
            message = event.get("message")
            if isinstance(message, dict):
                self._model = str(message.get("model") or self._model)
                self._anthropic(message.get("usage"))
        elif kind == "message_delta":  # Anthropic: the output (and input) counts so far
            self._anthropic(event.get("usage"))
        elif kind == "content_block_start" and self.watched:  # Anthropic: a tool call begins
            block = event.get("content_block")
            if isinstance(block, dict) and block.get("type") == "tool_use":
                name = str(block.get("name") or "")
                if name in self.watched:
                    self._calls[_count(event.get("index"))] = (str(block.get("id") or ""), name, [])
        elif kind == "content_block_delta" and self._calls:  # its input, in pieces
            delta = event.get("delta")
            call = self._calls.get(_count(event.get("index")))
            if call is not None and isinstance(delta, dict):
                call[2].append(str(delta.get("partial_json") or ""))
        elif kind == "content_block_stop" and self._calls:
            self._ended.add(_count(event.get("index")))
        elif kind == "response.completed":  # OpenAI Responses
            response = event.get("response")
            if isinstance(response, dict):
                self._model = str(response.get("model") or self._model)
                self._openai(response.get("usage"))

    def _anthropic(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        self._seen = True
        for key, name in (
            ("input_tokens", "input"),
            ("output_tokens", "output"),
            ("cache_creation_input_tokens", "cache_creation"),
            ("cache_read_input_tokens", "cache_read"),
        ):
            if key in usage:  # a delta's counts are cumulative: the latest stands
                self._usage[name] = _count(usage[key])

    def _openai(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        self._seen = True
        details = usage.get("input_tokens_details")
        cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else 0
        # OpenAI counts cached tokens inside input_tokens: kept apart, as Anthropic reports them.
        self._usage["input"] = max(0, _count(usage.get("input_tokens")) - cached)
        self._usage["cache_read"] = cached
        self._usage["output"] = _count(usage.get("output_tokens"))

    def _gemini(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        self._seen = True
        cached = _count(usage.get("cachedContentTokenCount"))
        # Gemini counts cached tokens inside promptTokenCount, and thinking apart from the
        # answer: kept apart, and output, as Anthropic reports them.
        self._usage["input"] = max(0, _count(usage.get("promptTokenCount")) - cached)
        self._usage["cache_read"] = cached
        self._usage["output"] = _count(usage.get("candidatesTokenCount")) + _count(
            usage.get("thoughtsTokenCount")
        )

    def calls(self) -> list[ToolCall]:
        """The watched tools' calls the response made, in order; one cut short (its block did
        not end) or whose input is not JSON is left out."""
        if not self.streaming:
            return self._body_calls()
        found = []
        for index in sorted(self._calls.keys() & self._ended):
            call_id, name, parts = self._calls[index]
            try:
                found.append(ToolCall(call_id, name, json.loads("".join(parts) or "{}")))
            except ValueError:
                continue
        return found

    def _body_calls(self) -> list[ToolCall]:
        try:
            body = json.loads(bytes(self._body))
        except ValueError:
            return []
        content = body.get("content") if isinstance(body, dict) else None
        return [
            ToolCall(str(block.get("id") or ""), str(block["name"]), block.get("input"))
            for block in (content if isinstance(content, list) else [])
            if isinstance(block, dict)
            and block.get("type") == "tool_use"
            and block.get("name") in self.watched
        ]

    def result(self) -> Metered | None:
        if not self.streaming:
            try:
                body = json.loads(bytes(self._body))
            except ValueError:
                return None
            if not isinstance(body, dict):
                return None
            self._model = str(body.get("model") or "")
            usage = body.get("usage")
            if "usageMetadata" in body:
                self._event(body)
            elif isinstance(usage, dict) and "input_tokens_details" in usage:
                self._openai(usage)
            else:
                self._anthropic(usage)
        elif self._partial and not self._skipping:
            self._line(self._partial.rstrip(b"\r"))
            self._partial = b""
        if not self._seen:
            return None
        return Metered(
            model=self._model,
            input_tokens=self._usage.get("input", 0),
            output_tokens=self._usage.get("output", 0),
            cache_creation_tokens=self._usage.get("cache_creation", 0),
            cache_read_tokens=self._usage.get("cache_read", 0),
        )
