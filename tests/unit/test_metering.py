"""`legion.proxy.metering`: a response's usage read off its bytes as they pass, however the
network splits them: Anthropic's stream, OpenAI's Responses stream, a plain JSON answer."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from legion.proxy.metering import MAX_LINE, Metered, ToolCall, UsageMeter


def sse(*events: dict[str, object]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


ANTHROPIC = sse(
    {
        "type": "message_start",
        "message": {
            "model": "claude-opus-5-5",
            "usage": {
                "input_tokens": 1200,
                "cache_creation_input_tokens": 300,
                "cache_read_input_tokens": 4000,
                "output_tokens": 1,
            },
        },
    },
    {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "data: no\n"}},
    {"type": "message_delta", "usage": {"output_tokens": 57}},
    {"type": "message_stop"},
)
EXPECTED = Metered("claude-opus-5-5", 1200, 57, 300, 4000)


def metered(body: bytes, cuts: list[int], *, streaming: bool = True) -> Metered | None:
    meter = UsageMeter(streaming=streaming)
    start = 0
    for cut in sorted(set(cuts)):
        meter.feed(body[start:cut])
        start = cut
    meter.feed(body[start:])
    return meter.result()


@given(st.lists(st.integers(0, len(ANTHROPIC)), max_size=20))
def test_anthropics_stream_is_read_whatever_the_splits(cuts: list[int]) -> None:
    assert metered(ANTHROPIC, cuts) == EXPECTED
    assert EXPECTED.usage.total == 1200 + 57 + 300 + 4000


def test_openais_stream_keeps_cached_tokens_apart_from_input() -> None:
    body = sse(
        {"type": "response.created", "response": {"model": "gpt-6"}},
        {
            "type": "response.completed",
            "response": {
                "model": "gpt-6",
                "usage": {
                    "input_tokens": 900,
                    "input_tokens_details": {"cached_tokens": 600},
                    "output_tokens": 40,
                },
            },
        },
    )
    assert metered(body, [7, 100]) == Metered("gpt-6", 300, 40, 0, 600)


def test_a_json_answer_and_an_error_and_a_huge_line() -> None:
    answer = json.dumps(
        {"model": "claude-haiku-5-5", "usage": {"input_tokens": 10, "output_tokens": 2}}
    ).encode()
    assert metered(answer, [3], streaming=False) == Metered("claude-haiku-5-5", 10, 2, 0, 0)
    error = b'{"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}'
    assert metered(error, [], streaming=False) is None
    assert metered(b"event: ping\ndata: {}\n\n", []) is None
    huge = b"data: " + b"x" * (MAX_LINE + 10) + b"\n"
    assert metered(huge + ANTHROPIC, [MAX_LINE // 2, MAX_LINE + 5]) == EXPECTED


QUESTION_INPUT = {"questions": [{"question": "Which one?", "options": [{"label": "A"}]}]}
ASKING = sse(
    {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 5}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "toolu_9", "name": "AskUserQuestion"},
    },
    *[
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": part},
        }
        for part in (json.dumps(QUESTION_INPUT)[:9], json.dumps(QUESTION_INPUT)[9:])
    ],
    {"type": "content_block_stop", "index": 1},
    {
        "type": "content_block_start",
        "index": 2,
        "content_block": {"type": "tool_use", "id": "toolu_10", "name": "Bash"},
    },
    {"type": "content_block_delta", "index": 2, "delta": {"partial_json": '{"command": "ls"}'}},
    {"type": "message_delta", "usage": {"output_tokens": 9}},
)


@given(st.lists(st.integers(0, len(ASKING)), max_size=20))
def test_a_watched_tools_call_is_read_whole_from_its_pieces_whatever_the_splits(
    cuts: list[int],
) -> None:
    meter = UsageMeter(streaming=True, watched=frozenset({"AskUserQuestion"}))
    start = 0
    for cut in sorted(set(cuts)):
        meter.feed(ASKING[start:cut])
        start = cut
    meter.feed(ASKING[start:])
    assert meter.calls() == [ToolCall("toolu_9", "AskUserQuestion", QUESTION_INPUT)]
    assert UsageMeter(streaming=True).calls() == []  # nothing watched, nothing kept


def test_a_watched_tools_call_in_a_json_answer() -> None:
    body = {
        "model": "m",
        "usage": {"input_tokens": 1, "output_tokens": 2},
        "content": [
            {"type": "text", "text": "asking"},
            {"type": "tool_use", "id": "toolu_1", "name": "AskUserQuestion", "input": {"q": 1}},
            {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {}},
        ],
    }
    meter = UsageMeter(streaming=False, watched=frozenset({"AskUserQuestion"}))
    meter.feed(json.dumps(body).encode())
    assert meter.calls() == [ToolCall("toolu_1", "AskUserQuestion", {"q": 1})]
    cut = UsageMeter(streaming=True, watched=frozenset({"AskUserQuestion"}))
    cut.feed(ASKING[: ASKING.index(b"input_json_delta") + 40])  # its input cut short
    assert cut.calls() == []
