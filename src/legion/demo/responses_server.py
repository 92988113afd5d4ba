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

import itertools
import json
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from legion.demo import script, scripted, scripted_http
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

# A model of Codex 0.169.0's bundled catalog (an unknown one gets a "model metadata not found"
# warning) whose tools come as a plain `tools` list with `exec_command` (the gpt-6 models get a
# JavaScript "code mode" `exec` tool in an `additional_tools` input item instead).  Its catalog
# entry offers an upgrade, so `codex_config_toml` marks that migration as seen.
DEFAULT_MODEL = "gpt-5.5"
MIGRATION_TARGET = "gpt-6-sol"

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
    return scripted.main(argv, __doc__, Script, FakeResponsesServer)


if __name__ == "__main__":
    sys.exit(main())
