"""Token usage read from Claude Code transcripts: each response once, read incrementally, with
subagents; and split between the phases that shared one session."""

from __future__ import annotations

import json
from pathlib import Path

from legion.cli.render import usage_json, usage_line
from legion.core.usage import Usage, anthropic_usage, total
from legion.runtime.claude.transcript import responses, session_usage


def _line(message_id: str, when: str, inp: int, out: int, read: int = 0, block: int = 0) -> str:
    usage = {"input_tokens": inp, "output_tokens": out, "cache_read_input_tokens": read}
    entry = {
        "type": "assistant",
        "timestamp": when,
        "apiBlockIndex": block,
        "message": {"id": message_id, "role": "assistant", "usage": usage, "content": []},
    }
    return json.dumps(entry) + "\n"


def test_a_response_written_as_several_lines_counts_once(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    transcript.write_text(
        json.dumps({"type": "user", "message": {"role": "user", "content": "hi"}}) + "\n"
        + _line("m1", "2026-01-01T00:00:01Z", 100, 10, block=0)
        + _line("m1", "2026-01-01T00:00:01Z", 100, 10, block=1)
        + _line("m2", "2026-01-01T00:00:05Z", 120, 20, read=100)
    )  # fmt: skip
    found = responses(transcript)
    assert sorted(found) == ["m1", "m2"]
    assert total(u for _, u in found.values()) == Usage(220, 30, 100, 0)


def test_a_growing_transcript_is_read_on_from_where_it_was_and_a_torn_line_waits(
    tmp_path: Path,
) -> None:
    transcript = tmp_path / "s.jsonl"
    transcript.write_text(_line("m1", "t1", 1, 1))
    assert len(responses(transcript)) == 1
    torn = _line("m2", "t2", 2, 2)
    with transcript.open("a") as out:
        out.write(torn[:20])  # the CLI is still writing it
    assert len(responses(transcript)) == 1
    with transcript.open("a") as out:
        out.write(torn[20:])
    assert sorted(responses(transcript)) == ["m1", "m2"]


def test_subagents_count_with_their_session(tmp_path: Path) -> None:
    transcript = tmp_path / "sid.jsonl"
    transcript.write_text(_line("m1", "t1", 10, 1))
    subagents = tmp_path / "sid" / "subagents"
    subagents.mkdir(parents=True)
    (subagents / "agent-a.jsonl").write_text(_line("s1", "t2", 5, 5))
    assert total(u for _, u in session_usage(transcript)) == Usage(15, 6)
    assert session_usage(tmp_path / "missing.jsonl") == []


def test_usage_is_shown_in_total_and_by_phase_in_the_order_phases_run() -> None:
    phases = {"implement": Usage(50_000, 1_000, 2_000), "plan": Usage(900, 100)}
    data = usage_json(phases)
    assert list(data["phases"]) == ["plan", "implement"]
    assert data["total"] == {
        "input": 50_900,
        "output": 1_100,
        "cache_read": 2_000,
        "cache_write": 0,
        "total": 54_000,
    }
    assert (
        usage_line(phases) == "Tokens: 50.9k in, 1.1k out, 2.0k cached (plan 1.0k, implement 53.0k)"
    )
    assert anthropic_usage({"input_tokens": -3, "output_tokens": "x"}) == Usage()
