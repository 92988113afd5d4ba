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

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from legion.demo import script, scripted, scripted_http
from legion.demo.script import chunks, estimate_tokens, new_id

# Shared with legion.demo.responses_server, named here as before.
JSON = script.JSON
FALLBACK_TEXT = script.FALLBACK_TEXT
SIDE_TEXT = script.SIDE_TEXT
REDACTED_HEADERS = scripted_http.REDACTED_HEADERS
TextBlock = script.TextBlock
PauseBlock = script.PauseBlock
text = script.text
pause = script.pause
example_for_schema = script.example_for_schema

DEFAULT_MODEL = "claude-sonnet-4-5"

# --------------------------------------------------------------------------------------------
# Script model (`TextBlock`, `PauseBlock`, `text` and `pause` are `legion.demo.script`'s)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolUseBlock:
    name: str
    input: Mapping[str, Any]
    id: str | None = None  # generated (toolu_...) when None


Block = TextBlock | ToolUseBlock | PauseBlock
Turn = Sequence[Block]


def tool_use(name: str, input: Mapping[str, Any], id: str | None = None) -> ToolUseBlock:
    return ToolUseBlock(name, dict(input), id)


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


class Scenario(script.Scenario[ToolUseBlock]):
    """Turns to play when the latest human prompt matches `match`.

    `match` is a substring (case-sensitive) unless `regex` is true, in which case it is searched
    with `re.search` (pass flags inline, e.g. ``(?i)``).
    """


class Script(script.Script[ToolUseBlock, Scenario]):
    # JSON form: {"scenarios": [{"name": "hi", "match": "say hi", "regex": false,
    #                            "turns": [[{"type": "text", "text": "hi"}],
    #                                      [{"type": "tool_use", "name": "Bash", "input": {}}]]}],
    #             "fallback_text": "...", "side_text": "..."}

    scenario_type = Scenario

    @classmethod
    def tool_from_json(cls, kind: Any, raw: Mapping[str, Any]) -> ToolUseBlock | None:
        if kind == "tool_use":
            return ToolUseBlock(str(raw["name"]), dict(raw.get("input", {})), raw.get("id"))
        return None

    @classmethod
    def tool_to_json(cls, block: ToolUseBlock) -> JSON:
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

Kind = Literal[
    "scripted", "fallback", "side", "count_tokens", "other", "outbound", "not_found", "refused"
]


class RecordedRequest(scripted.RecordedRequest[Kind]):
    @property
    def messages(self) -> list[JSON]:
        if isinstance(self.body, dict):
            return list(self.body.get("messages", []))
        return []

    def tool_results(self) -> list[JSON]:
        """tool_result blocks of the last user message (what the CLI answers to tool_use)."""
        messages = self.messages
        if not messages or messages[-1].get("role") != "user":
            return []
        content = messages[-1].get("content")
        if not isinstance(content, list):
            return []
        return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def read_request_log(path: str | Path) -> list[RecordedRequest]:
    """Requests recorded by a (standalone) server in its JSONL log."""
    return RecordedRequest.read_log(path)


def tool_result_text(block: Mapping[str, Any]) -> str:
    """The text of a tool_result block (its content is a string or a list of text blocks)."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(_text_of(content))


# --------------------------------------------------------------------------------------------
# Responses
# --------------------------------------------------------------------------------------------


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
                    "id": block.id or new_id("toolu"),
                    "name": block.name,
                    "input": dict(block.input),
                }
            )
    has_tool = any(b["type"] == "tool_use" for b in content)
    output_tokens = max(1, estimate_tokens(content))
    return {
        "id": new_id("msg"),
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
            for piece in chunks(block["text"], 40) if block["text"] else [""]:
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
            for piece in chunks(json.dumps(block["input"]), 40):
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


class _Handler(scripted_http.ScriptedHandler):
    request_id_header = "request-id"
    server_label = "fake model server"
    not_found_type = "not_found_error"

    def _error(self, status: int, kind: str, message: str) -> None:
        self._send_json(status, {"type": "error", "error": {"type": kind, "message": message}})

    def _sse_events(
        self, response: Mapping[str, Any], pauses: Sequence[tuple[int, float]]
    ) -> Iterator[tuple[str, JSON]]:
        return sse_events(response, pauses)

    def _body_problem(self, body: Any) -> str | None:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return "messages: field required"
        return None

    def _route_post(self, path: str, body: Any) -> bool:
        if path == "/v1/messages":
            self._answer(body)
            return True
        if path == "/v1/messages/count_tokens":
            tokens = estimate_tokens(body)
            self._record("count_tokens", body, response={"input_tokens": tokens})
            self._send_json(200, {"input_tokens": tokens})
            return True
        return False


class FakeModelServer(scripted.ScriptedServer[ToolUseBlock, Scenario, RecordedRequest]):
    """The scripted server; a context manager that starts it on 127.0.0.1 and stops it."""

    handler = _Handler
    thread_name = "fake-model-server"
    default_model = DEFAULT_MODEL
    script_type = Script
    request_type = RecordedRequest

    def _default_side_request(self, body: Mapping[str, Any]) -> str | None:
        return classify_side_request(body)

    def _build(self, model: str, blocks: Turn, input_tokens: int) -> JSON:
        return build_message(model, blocks, input_tokens)

    def _prompt_and_turn(self, body: Mapping[str, Any]) -> tuple[str, int] | None:
        messages = body.get("messages", [])
        found = latest_human_prompt(messages)
        if found is None:
            return None
        index, prompt = found
        # A prompt typed after a turn that ended on a tool result (the model's answer refused,
        # the session stopped) goes out merged into that result's message: scenarios that ask
        # for it (`anywhere`) are matched against the user messages after the human prompt.
        for later in range(len(messages) - 1, index, -1):
            message = messages[later]
            if message.get("role") != "user":
                continue
            text = "\n".join(_text_of(message.get("content")))
            if text and self.script.find_anywhere(text) is not None:
                return text, assistant_turns_after(messages, later)
        return prompt, assistant_turns_after(messages, index)

    def _output_schema(self, body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        output_config = body.get("output_config")
        fmt = output_config.get("format") if isinstance(output_config, dict) else None
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            # e.g. session titles: {"type": "object", "properties": {"title": ...}}
            schema: Mapping[str, Any] = fmt.get("schema") or {}
            return schema
        return None

    def _is_model_path(self, path: str) -> bool:
        return path == "/v1/messages"


# --------------------------------------------------------------------------------------------
# Standalone process
# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    return scripted.main(argv, __doc__, Script, FakeModelServer)


if __name__ == "__main__":
    sys.exit(main())
