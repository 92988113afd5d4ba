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

What a request says is read by `legion.demo.responses_requests`; the Codex CLI's config.toml
that points it here is `legion.demo.codex_config`'s.

Standalone use:

    python -m legion.demo.responses_server --port 0 --script script.json \
        --log requests.jsonl --port-file port.txt
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from legion.demo import script, scripted, scripted_http
from legion.demo.codex_config import DEFAULT_MODEL
from legion.demo.responses_requests import (
    assistant_turns_after,
    classify_side_request,
    function_call_outputs,
    is_human_message,
    item_text,
    latest_human_prompt,
    output_text,
    structured_output_schema,
)
from legion.demo.script import chunks, estimate_tokens, new_id

# Shared with legion.demo.model_server, named here as before.
JSON = script.JSON
FALLBACK_TEXT = script.FALLBACK_TEXT
SIDE_TEXT = script.SIDE_TEXT
REDACTED_HEADERS = scripted_http.REDACTED_HEADERS
TextBlock = script.TextBlock
PauseBlock = script.PauseBlock
text = script.text
pause = script.pause
example_for_schema = script.example_for_schema

# The shell tool of Codex 0.169.0 (unified exec): `exec_command {"cmd": ...}`.
SHELL_TOOL = "exec_command"

# --------------------------------------------------------------------------------------------
# Script model (`TextBlock`, `PauseBlock`, `text` and `pause` are `legion.demo.script`'s)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FunctionCallBlock:
    name: str
    arguments: Mapping[str, Any]
    call_id: str | None = None  # generated (call_...) when None


Block = TextBlock | FunctionCallBlock | PauseBlock
Turn = Sequence[Block]


def function_call(
    name: str, arguments: Mapping[str, Any], call_id: str | None = None
) -> FunctionCallBlock:
    return FunctionCallBlock(name, dict(arguments), call_id)


# The model_server name, so scripts for both servers read the same.
tool_use = function_call


def exec_command(cmd: str, **extra: Any) -> FunctionCallBlock:
    """An `exec_command` call (Codex's shell tool); `extra` e.g. workdir=, yield_time_ms=."""
    return function_call(SHELL_TOOL, {"cmd": cmd, **extra})


def bash(command: str, description: str = "") -> FunctionCallBlock:
    """The shell tool call, named as in model_server (`description` is not sent: Codex's tool
    has no such argument)."""
    del description
    return exec_command(command)


class Scenario(script.Scenario[FunctionCallBlock]):
    """Turns to play when the latest human prompt matches `match` (substring, or `re.search`
    when `regex`)."""


class Script(script.Script[FunctionCallBlock, Scenario]):
    # JSON form: {"scenarios": [{"name": "hi", "match": "say hi", "regex": false,
    #                            "turns": [[{"type": "text", "text": "hi"}],
    #                                      [{"type": "function_call", "name": "exec_command",
    #                                        "arguments": {"cmd": "ls"}}]]}],
    #             "fallback_text": "...", "side_text": "..."}
    # (a model_server "tool_use" block, `input` and `id`, is read as a function_call too)

    scenario_type = Scenario

    @classmethod
    def tool_from_json(cls, kind: Any, raw: Mapping[str, Any]) -> FunctionCallBlock | None:
        if kind not in ("function_call", "tool_use"):
            return None
        arguments = raw.get("arguments", raw.get("input", {}))
        if isinstance(arguments, str):
            arguments = json.loads(arguments)
        return FunctionCallBlock(
            str(raw["name"]), dict(arguments), raw.get("call_id", raw.get("id"))
        )

    @classmethod
    def tool_to_json(cls, block: FunctionCallBlock) -> JSON:
        out: JSON = {
            "type": "function_call",
            "name": block.name,
            "arguments": dict(block.arguments),
        }
        if block.call_id is not None:
            out["call_id"] = block.call_id
        return out


# --------------------------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------------------------

Kind = Literal[
    "scripted", "fallback", "side", "models", "other", "outbound", "not_found", "refused"
]


class RecordedRequest(scripted.RecordedRequest[Kind]):
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


def read_request_log(path: str | Path) -> list[RecordedRequest]:
    """Requests recorded by a (standalone) server in its JSONL log."""
    return RecordedRequest.read_log(path)


# The model_server name.
tool_result_text = output_text

# --------------------------------------------------------------------------------------------
# Responses
# --------------------------------------------------------------------------------------------


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
                    "id": new_id("msg"),
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": block.text, "annotations": []}],
                }
            )
        else:
            output.append(
                {
                    "type": "function_call",
                    "id": new_id("fc"),
                    "status": "completed",
                    "call_id": block.call_id or new_id("call"),
                    "name": block.name,
                    "arguments": json.dumps(dict(block.arguments)),
                }
            )
    output_tokens = max(1, estimate_tokens(output))
    return {
        "id": new_id("resp"),
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
                for piece in chunks(part["text"], 40):
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
            for piece in chunks(item["arguments"], 40):
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


class _Handler(scripted_http.ScriptedHandler):
    request_id_header = "x-request-id"
    server_label = "fake responses server"
    not_found_type = "not_found"

    def _parse_body(self, raw: bytes) -> Any:
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        if encoding == "zstd":  # pragma: no cover - Codex sends zstd only to OpenAI itself
            return {"_undecoded": encoding, "length": len(raw)}
        if encoding in ("gzip", "deflate"):
            import zlib

            raw = zlib.decompress(raw, 16 + zlib.MAX_WBITS if encoding == "gzip" else 0)
        return super()._parse_body(raw)

    def _error(self, status: int, kind: str, message: str) -> None:
        self._send_json(status, {"error": {"type": kind, "message": message, "code": kind}})

    def _sse_events(
        self, response: Mapping[str, Any], pauses: Sequence[tuple[int, float]]
    ) -> Iterator[tuple[str, JSON]]:
        return ((event["type"], event) for event in sse_events(response, pauses))

    def _body_problem(self, body: Any) -> str | None:
        if not isinstance(body, dict) or not isinstance(body.get("input"), list | str):
            return "input: field required"
        return None

    def _route_get(self, path: str) -> bool:
        if path in ("/v1/models", "/models"):
            payload = models_list(self.server.fake.model or DEFAULT_MODEL)
            self._record("models", None, response=payload)
            self._send_json(200, payload)
            return True
        return False

    def _route_post(self, path: str, body: Any) -> bool:
        if path in ("/v1/responses", "/responses"):
            self._answer(body)
            return True
        return False


class FakeResponsesServer(scripted.ScriptedServer[FunctionCallBlock, Scenario, RecordedRequest]):
    """The scripted server; a context manager that starts it on 127.0.0.1 and stops it."""

    handler = _Handler
    thread_name = "fake-responses-server"
    default_model = DEFAULT_MODEL
    script_type = Script
    request_type = RecordedRequest

    def _default_side_request(self, body: Mapping[str, Any]) -> str | None:
        return classify_side_request(body)

    @property
    def base_url(self) -> str:
        """The server's root; a Codex provider's `base_url` is this plus `/v1`."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base_url(self) -> str:
        return f"{self.base_url}/v1"

    def _build(self, model: str, blocks: Turn, input_tokens: int) -> JSON:
        return build_response(model, blocks, input_tokens)

    def _prompt_and_turn(self, body: Mapping[str, Any]) -> tuple[str, int] | None:
        raw_input = body.get("input", [])
        items: list[Mapping[str, Any]] = (
            [{"type": "message", "role": "user", "content": raw_input}]
            if isinstance(raw_input, str)
            else [i for i in raw_input if isinstance(i, dict)]
        )
        found = latest_human_prompt(items)
        if found is None:
            return None
        index, prompt = found
        return prompt, assistant_turns_after(items, index)

    def _output_schema(self, body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return structured_output_schema(body)

    def _is_model_path(self, path: str) -> bool:
        return path.endswith("/responses")

    def response_requests(self, kind: Kind | None = None) -> list[RecordedRequest]:
        """Requests for a model turn (`message_requests`, the model_server name)."""
        return self.message_requests(kind)


# --------------------------------------------------------------------------------------------
# Standalone process
# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    return scripted.main(argv, __doc__, Script, FakeResponsesServer)


if __name__ == "__main__":
    sys.exit(main())
