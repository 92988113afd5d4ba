"""The workers' read model (`legion.sessions.roster.WorkerRoster`), alone: a worker's state is
read from its window and its transcript, never stored; its tokens are split by the starts of
its session; peek shows the live worker's screen, else the last one's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from legion.core.liveness import SessionState
from legion.core.model import Mode
from legion.core.usage import Usage
from legion.errors import NotFoundError
from legion.proxy.metering import ToolCall
from legion.proxy.questions import AskedQuestions
from legion.runtime.tmux import Window
from legion.runtime.transcript import TranscriptSummary, Turn
from legion.sessions.registry import WorkerRecord
from legion.sessions.roster import WorkerRoster
from legion.store import Store
from legion.store.sqlite import SqliteStore


def record(
    n: int, sid: str, window: str, mode: Mode = Mode.IMPLEMENT, at: str = "2026-01-01T00:00:00Z"
) -> WorkerRecord:
    return WorkerRecord(n, "LEG-1", mode, sid, window, Path("/ws"), at, "fake")


class Runtime:
    """A CLI whose transcripts say what the test says."""

    def __init__(
        self, turns: dict[str, Turn], usage: list[tuple[str, Usage]], folder: Path | None = None
    ) -> None:
        self.turns = turns
        self.used = usage
        self.folder = folder or Path("/transcripts")

    def transcript(self, workspace: Path, sid: str) -> Path:
        return self.folder / f"{sid}.jsonl"

    def summarize(self, transcript: Path) -> TranscriptSummary:
        return TranscriptSummary(1, self.turns[transcript.stem], None)

    def last_activity(self, transcript: Path) -> float | None:
        return 100.0

    def usage(self, transcript: Path) -> list[tuple[str, Usage]]:
        return self.used


def roster(
    records: list[WorkerRecord],
    windows: list[Window],
    runtime: Runtime,
    retired: tuple[WorkerRecord, ...] = (),
    db: Store | None = None,
) -> WorkerRoster:
    registry = SimpleNamespace(
        current=lambda: records,
        history=lambda: [(r, "gone") for r in retired] + [(r, None) for r in records],
        db=db,
    )
    shown = SimpleNamespace(list=lambda: windows, screen=lambda window_id, lines: f"{window_id}")
    runtimes = SimpleNamespace(of=lambda record: runtime)
    return WorkerRoster(registry, shown, runtimes, {})  # type: ignore[arg-type]


def test_a_workers_state_is_read_from_its_window_and_transcript(tmp_path: Path) -> None:
    records = [record(1, "a", "leg-1-plan", Mode.PLAN), record(2, "b", "leg-1-implement")]
    windows = [Window("@1", "leg-1-implement", False, 42, "claude", "b")]
    db = SqliteStore(tmp_path / "legion.db")
    views = roster(records, windows, Runtime({"b": Turn.OPEN}, []), db=db).views()
    assert [(v.record.session_id, v.state) for v in views] == [
        ("a", SessionState.DEAD),  # its window is gone
        ("b", SessionState.RUNNING),
    ]
    assert roster(records, windows, Runtime({"b": Turn.ENDED}, [])).live_issues() == {"LEG-1"}


def test_tokens_are_split_by_the_starts_of_one_session() -> None:
    implement = record(1, "s", "w", Mode.IMPLEMENT, "2026-01-01T00:00:00Z")
    retro = record(2, "s", "w", Mode.RETRO, "2026-01-01T01:00:00Z")
    used = [("2026-01-01T00:30:00Z", Usage(10, 1)), ("2026-01-01T01:30:00Z", Usage(5, 2))]
    found = roster([retro], [], Runtime({}, used), retired=(implement,)).transcript_usage("leg-1")
    assert found == {"LEG-1": {"implement": Usage(10, 1), "retro": Usage(5, 2)}}


def test_peek_shows_the_live_workers_screen_else_the_last_ones(tmp_path: Path) -> None:
    records = [record(1, "a", "leg-1-plan", Mode.PLAN), record(2, "b", "leg-1-implement")]
    dead = [
        Window("@1", "leg-1-plan", False, 41, "claude", "a"),
        Window("@2", "leg-1-implement", True, None, "", "b"),
    ]
    db = SqliteStore(tmp_path / "legion.db")
    view, screen = roster(records, dead, Runtime({"a": Turn.OPEN}, []), db=db).peek("LEG-1")
    assert (view.record.session_id, screen) == ("a", "@1")  # the live one, not the last
    view, screen = roster(records[1:], dead, Runtime({}, [])).peek("leg-1")
    assert (view.record.session_id, screen) == ("b", "@2")  # none live: the last one
    with pytest.raises(NotFoundError, match="LEG-1 has no worker window"):
        roster(records, [], Runtime({}, [])).peek("LEG-1")


GREETING = {
    "question": "Which greeting?",
    "header": "Greeting",
    "options": [{"label": "Hello"}, {"label": "Hi"}],
    "multiSelect": False,
}
ASKED = {"questions": [GREETING]}


def test_a_question_the_proxy_saw_and_the_session_did_not_ask_past_is_the_workers_open_one(
    tmp_path: Path,
) -> None:
    """Claude Code may show a question before its transcript has it (`legion.proxy.questions`):
    the worker is blocked on it while its transcript waits on the model, until the session asks
    the model again (the proxy then forgets it); a transcript that says otherwise stands."""
    db = SqliteStore(tmp_path / "legion.db")
    records = [record(1, "b", "leg-1-plan", Mode.PLAN)]
    windows = [Window("@1", "leg-1-plan", False, 42, "claude", "b")]
    runtime = Runtime({"b": Turn.OPEN}, [], folder=tmp_path)
    (view,) = roster(records, windows, runtime, db=db).views()
    assert view.state is SessionState.RUNNING and view.question is None  # nothing seen yet
    AskedQuestions(db).record("b", ToolCall("toolu_1", "AskUserQuestion", ASKED))
    (view,) = roster(records, windows, runtime, db=db).views()
    assert view.state is SessionState.BLOCKED
    assert view.question is not None and view.question.tool_use_id == "toolu_1"
    assert view.question.text == "Which greeting?"
    assert view.question.items[0].options == ("Hello", "Hi")
    # Another session's question is not this one's.
    assert roster([record(2, "c", "leg-2-plan")], [], runtime, db=db).views()[0].question is None
    # A transcript that has ended its turn is never overruled.
    ended = Runtime({"b": Turn.ENDED}, [], folder=tmp_path)
    (view,) = roster(records, windows, ended, db=db).views()
    assert view.question is None
    # Answered: the session asked the model again, and the proxy forgot it.
    AskedQuestions(db).forget("b")
    (view,) = roster(records, windows, runtime, db=db).views()
    assert view.state is SessionState.RUNNING and view.question is None
