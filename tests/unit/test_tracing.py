"""`legion.diagnostics.tracing`: off unless `LEGION_TRACE` names a file; then each span is one
JSON line that `read_spans` gives back, a command's span starting when its process started."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from legion.diagnostics import tracing
from legion.diagnostics.tracing import TRACE_ENV, Span, command_span, mark, read_spans, span


def test_nothing_is_written_when_tracing_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TRACE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with span("step", "LEG-1"):
        pass
    mark("instant")
    assert list(tmp_path.iterdir()) == []


def test_spans_and_marks_are_lines_read_back_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv(TRACE_ENV, str(trace))
    before = time.time()
    with span("outer"), span("inner", "LEG-2"):
        time.sleep(0.01)
    mark("woken")
    spans = read_spans(trace)
    assert [(s.name, s.issue) for s in spans] == [
        ("inner", "LEG-2"),
        ("outer", "-"),
        ("woken", "-"),
    ]
    inner, outer, woken = spans
    assert before <= outer.start <= inner.start < inner.end <= outer.end <= woken.start
    assert inner.seconds >= 0.01 and woken.seconds == 0.0
    assert {s.pid for s in spans} == {os.getpid()}
    assert trace.stat().st_mode & 0o777 == 0o600


def test_a_span_is_written_when_its_block_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv(TRACE_ENV, str(trace))
    with pytest.raises(RuntimeError), span("failing"):
        raise RuntimeError("boom")
    assert [s.name for s in read_spans(trace)] == ["failing"]


def test_a_torn_or_foreign_line_is_skipped(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    good = Span("tick", "-", 1.0, 2.0, 7)
    trace.write_text(
        json.dumps(good.to_json()) + "\n" + '{"name": "x"}\nnot json\n{"name": "tick", "iss'
    )
    assert read_spans(trace) == [good]
    assert read_spans(tmp_path / "missing.jsonl") == []


def test_an_unwritable_trace_never_fails_the_traced_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TRACE_ENV, "/nonexistent-folder/trace.jsonl")
    with span("step"):
        pass


def test_a_commands_span_is_named_by_its_words_and_issue_and_starts_with_its_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv(TRACE_ENV, str(trace))
    with command_span(["issue", "label", "leg-3", "--add", "worker-done"]):
        pass
    with command_span(["--json", "state"]):
        pass
    first, second = read_spans(trace)
    assert (first.name, first.issue) == ("legion issue label", "LEG-3")
    assert (second.name, second.issue) == ("legion state", "-")
    started = tracing.process_started()
    assert started is not None and started <= first.start + 0.02
    assert time.time() - started < 24 * 3600  # this test process's own start, not the boot
