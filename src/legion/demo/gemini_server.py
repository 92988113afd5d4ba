"""A scripted Gemini-API server for driving the real Gemini CLI offline.

The Gemini counterpart of `legion.demo.model_server` and `legion.demo.responses_server` (same
design, same names, the shared parts in `legion.demo.scripted`): it binds to 127.0.0.1 only;
a `Script` of `Scenario`s says what the "model" answers, each chosen by matching the latest
*human* prompt of a request (the last `user` turn of `contents` with a `text` part that is not
the CLI's `<session_context>`), each a list of turns; the turn to answer with is the number of
`model` turns after that prompt, so the server keeps no state and `--resume` (which sends the
whole history again) just works.

What Gemini CLI 0.61.0 sends and expects is in docs/gemini-cli.md:
`POST /v1beta/models/<model>:streamGenerateContent?alt=sse`, answered with server-sent events
(`data: <GenerateContentResponse>`, no event names), the last one with `usageMetadata`;
`:generateContent` is answered with one JSON object.

Standalone use:

    python -m legion.demo.gemini_server --port 0 --script script.json --log requests.jsonl
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from legion.demo import script, scripted, scripted_http
from legion.demo.script import estimate_tokens

JSON = script.JSON
TextBlock = script.TextBlock
PauseBlock = script.PauseBlock
text = script.text
pause = script.pause

DEFAULT_MODEL = "gemini-2.5-pro"
SHELL_TOOL = "run_shell_command"  # its arguments: {"command", "description"}
# The first part of the first user turn: the CLI's context, not what the human typed.
CONTEXT_PREFIXES = ("<session_context>",)
_MODEL_PATH = re.compile(
    r"/v1beta/models/([A-Za-z0-9._-]+):(generateContent|streamGenerateContent)"
)


@dataclass(frozen=True)
class FunctionCallBlock:
    name: str
    arguments: Mapping[str, Any]


Block = TextBlock | FunctionCallBlock | PauseBlock
Turn = Sequence[Block]


def function_call(name: str, arguments: Mapping[str, Any]) -> FunctionCallBlock:
    return FunctionCallBlock(name, dict(arguments))


tool_use = function_call  # the model_server name, so scripts for every server read the same


def bash(command: str, description: str = "") -> FunctionCallBlock:
    """A `run_shell_command` call (Gemini's shell tool)."""
    return function_call(SHELL_TOOL, {"command": command, "description": description})


class Scenario(script.Scenario[FunctionCallBlock]):
    """Turns to play when the latest human prompt matches `match`."""


class Script(script.Script[FunctionCallBlock, Scenario]):
    # JSON form: as the other servers' ({"type": "function_call", "name", "arguments"})
    scenario_type = Scenario

    @classmethod
    def tool_from_json(cls, kind: Any, raw: Mapping[str, Any]) -> FunctionCallBlock | None:
        if kind not in ("function_call", "tool_use"):
            return None
        return FunctionCallBlock(str(raw["name"]), dict(raw.get("arguments", raw.get("input", {}))))

    @classmethod
    def tool_to_json(cls, block: FunctionCallBlock) -> JSON:
        return {"type": "function_call", "name": block.name, "arguments": dict(block.arguments)}


# --------------------------------------------------------------------------------------------
# Reading requests
# --------------------------------------------------------------------------------------------


def _parts(content: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    parts = content.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def human_text(content: Mapping[str, Any]) -> str | None:
    """The text a human typed in a `user` turn (its text parts but the CLI's context), or
    None when it has none (a turn of tool results)."""
    if content.get("role") != "user":
        return None
    texts = [
        str(part["text"])
        for part in _parts(content)
        if isinstance(part.get("text"), str)
        and not str(part["text"]).lstrip().startswith(CONTEXT_PREFIXES)
    ]
    return "\n".join(texts) if texts else None


def prompt_and_turn(contents: Sequence[Mapping[str, Any]]) -> tuple[str, int] | None:
    """The latest human prompt of `contents` and how many model turns followed it."""
    for index in range(len(contents) - 1, -1, -1):
        prompt = human_text(contents[index])
        if prompt is not None:
            turns = sum(1 for c in contents[index + 1 :] if c.get("role") == "model")
            return prompt, turns
    return None


def output_schema(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    config = body.get("generationConfig")
    if not isinstance(config, dict):
        return None
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    return schema if isinstance(schema, dict) else None


def classify_side_request(body: Mapping[str, Any]) -> str | None:
    """Why a request is not a main-loop one: it offers no tools (the model router, a check
    whether the model should go on), or None."""
    if output_schema(body) is not None:
        return "structured-output"
    return None if body.get("tools") else "no-tools"


Kind = Literal["scripted", "fallback", "side", "other", "outbound", "not_found", "refused"]


class RecordedRequest(scripted.RecordedRequest[Kind]):
    @property
    def contents(self) -> list[JSON]:
        body = self.body if isinstance(self.body, dict) else {}
        contents = body.get("contents")
        return list(contents) if isinstance(contents, list) else []

    @property
    def messages(self) -> list[JSON]:  # the model_server name
        return self.contents

    def user_prompts(self) -> list[str]:
        return [t for t in (human_text(c) for c in self.contents) if t is not None]


# --------------------------------------------------------------------------------------------
# Responses
# --------------------------------------------------------------------------------------------


def build_response(model: str, blocks: Turn, input_tokens: int) -> JSON:
    """The whole `GenerateContentResponse` of a turn; pauses under the private `_pauses`, as
    (part index to pause before, seconds)."""
    parts: list[JSON] = []
    pauses: list[tuple[int, float]] = []
    for block in blocks:
        if isinstance(block, PauseBlock):
            pauses.append((len(parts), block.seconds))
        elif isinstance(block, TextBlock):
            parts.append({"text": block.text})
        else:
            parts.append({"functionCall": {"name": block.name, "args": dict(block.arguments)}})
    output_tokens = max(1, estimate_tokens(parts))
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": input_tokens,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": input_tokens + output_tokens,
        },
        "modelVersion": model,
        "_pauses": pauses,
    }


def sse_events(
    response: Mapping[str, Any], pauses: Sequence[tuple[int, float]] = ()
) -> Iterator[JSON]:
    """The stream of a whole response: one chunk a part, the last with the usage."""
    candidate = response["candidates"][0]
    parts = candidate["content"]["parts"]
    for index, part in enumerate([*parts, None]):
        for at, seconds in pauses:
            if at == index:
                yield {"type": "pause", "seconds": seconds}
        if part is None:
            break
        chunk: JSON = {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}],
            "modelVersion": response["modelVersion"],
        }
        if index == len(parts) - 1:
            chunk["candidates"][0]["finishReason"] = candidate["finishReason"]
            chunk["usageMetadata"] = response["usageMetadata"]
        yield chunk


# --------------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------------


class _Handler(scripted_http.ScriptedHandler):
    request_id_header = "x-request-id"
    server_label = "fake Gemini server"
    not_found_type = "NOT_FOUND"

    def _error(self, status: int, kind: str, message: str) -> None:
        self._send_json(status, {"error": {"code": status, "message": message, "status": kind}})

    def _sse_events(
        self, response: Mapping[str, Any], pauses: Sequence[tuple[int, float]]
    ) -> Iterator[tuple[str, JSON]]:
        for event in sse_events(response, pauses):
            yield ("pause" if event.get("type") == "pause" else ""), event

    def _body_problem(self, body: Any) -> str | None:
        if not isinstance(body, dict) or not isinstance(body.get("contents"), list):
            return "contents: field required"
        return None

    def _streams(self, body: Any) -> bool:
        return ":streamGenerateContent" in self.path

    def _route_post(self, path: str, body: Any) -> bool:
        if _MODEL_PATH.fullmatch(path):
            self._answer(body)
            return True
        if path.startswith("/v1beta/models/") and path.endswith(":countTokens"):
            self._record("other", body)
            self._send_json(200, {"totalTokens": estimate_tokens(body)})
            return True
        return False


class FakeGeminiServer(scripted.ScriptedServer[FunctionCallBlock, Scenario, RecordedRequest]):
    """The scripted server; a context manager that starts it on 127.0.0.1 and stops it."""

    handler = _Handler
    thread_name = "fake-gemini-server"
    default_model = DEFAULT_MODEL
    script_type = Script
    request_type = RecordedRequest

    def _default_side_request(self, body: Mapping[str, Any]) -> str | None:
        return classify_side_request(body)

    def _build(self, model: str, blocks: Turn, input_tokens: int) -> JSON:
        return build_response(model, blocks, input_tokens)

    def _prompt_and_turn(self, body: Mapping[str, Any]) -> tuple[str, int] | None:
        contents = body.get("contents")
        if not isinstance(contents, list):
            return None
        return prompt_and_turn([c for c in contents if isinstance(c, dict)])

    def _output_schema(self, body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return output_schema(body)

    def _is_model_path(self, path: str) -> bool:
        return bool(_MODEL_PATH.fullmatch(path))


def main(argv: Sequence[str] | None = None) -> int:
    return scripted.main(argv, __doc__, Script, FakeGeminiServer)


if __name__ == "__main__":
    sys.exit(main())
