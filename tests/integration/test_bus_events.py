"""`legion events`: the bus's event log read back, as the human runs it, on the real SQLite bus
the sessions' own commands write to."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from legion.bus import bus_path
from legion.bus.model import EventKind
from legion.bus.stored import SqliteBus
from tests.support.cli import LEGION_BIN, LegionRunner, Result, git

CONTROLLER = {"LEGION_SESSION_ID": "sid-controller", "LEGION_MODE": "controller"}
IMPLEMENTER = {"LEGION_SESSION_ID": "sid-implement", "LEGION_MODE": "implement"}
HOSTILE = "auto\x1b[2J\u202eevil"


def one_line_error(result: Result, fragment: str, code: int = 2) -> None:
    assert result.returncode == code, result
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("legion: error: "), result.stderr
    assert fragment in lines[0], lines[0]


def ok(result: Result) -> str:
    assert result.returncode == 0, result
    assert result.stderr == ""
    return result.stdout


@pytest.fixture
def worktree(project: Path) -> Path:
    path = project.parent / "wt-leg-7"
    git(project, "worktree", "add", "-q", "-b", "legion/LEG-7", str(path))
    return path


@pytest.fixture
def bus(project: Path) -> Iterator[SqliteBus]:
    opened = SqliteBus(bus_path(os.environ))
    yield opened
    opened.close()


def a_day_of_events(legion: LegionRunner, worktree: Path, bus: SqliteBus) -> None:
    """@legion and an implementer start (registered), the implementer asks (blocked), is
    compacted (a hook's event, with a hostile trigger), completes, and the human archives it."""
    ok(legion("say", "starting", env=CONTROLLER))
    ok(legion("ask", "Which format?", cwd=worktree, env=IMPLEMENTER))
    implement = bus.agent_by_session(IMPLEMENTER["LEGION_SESSION_ID"])
    assert implement is not None
    bus.record_event(EventKind.COMPACTION_START, agent_id=implement.id, detail=HOSTILE)
    ok(legion("complete", "Done it", cwd=worktree, env=IMPLEMENTER))
    ok(legion("archive", "legion/LEG-7/implement"))


def test_events_shows_the_agents_events_oldest_first_escaped(
    legion: LegionRunner, worktree: Path, bus: SqliteBus
) -> None:
    assert ok(legion("events")) == "No events.\n"
    assert json.loads(ok(legion("events", "--json"))) == []
    a_day_of_events(legion, worktree, bus)

    found = json.loads(ok(legion("events", "--json")))
    assert [(e["kind"], e["agent"]) for e in found] == [
        ("agent_registered", "repo/main/legion"),
        ("agent_registered", "repo/legion/LEG-7/implement"),
        ("agent_blocked", "repo/legion/LEG-7/implement"),
        ("compaction_start", "repo/legion/LEG-7/implement"),
        ("agent_completed", "repo/legion/LEG-7/implement"),
        ("agent_archived", "repo/legion/LEG-7/implement"),
    ]
    assert set(found[0]) == {"id", "kind", "agent", "message_id", "detail", "created_at"}
    assert found[3]["detail"] == HOSTILE  # JSON carries the text as it is
    assert [e["id"] for e in found] == sorted(e["id"] for e in found)

    lines = ok(legion("events")).splitlines()
    assert len(lines) == 6
    assert lines[2].startswith(f"#{found[2]['id']} ")
    assert " agent_blocked @repo/legion/LEG-7/implement" in lines[2]
    assert lines[3].endswith(": auto\\x1b[2J\\u202eevil")
    assert "\x1b" not in "".join(lines) and "\u202e" not in "".join(lines)

    # One agent's, the newest N, a kind chosen (the messages' own events only when asked).
    mine = json.loads(ok(legion("events", "--agent", "legion", "--json")))
    assert [(e["kind"], e["agent"]) for e in mine] == [("agent_registered", "repo/main/legion")]
    newest = json.loads(ok(legion("events", "-n", "2", "--json")))
    assert newest == found[-2:]
    blocked = json.loads(ok(legion("events", "--kind", "blocked", "--kind", "agent_completed",
                                   "--json")))  # fmt: skip
    assert [e["kind"] for e in blocked] == ["agent_blocked", "agent_completed"]
    posted = json.loads(ok(legion("events", "--kind", "message", "--json")))
    assert [e["kind"] for e in posted] == ["message_posted"] * 3  # say, ask, complete
    assert all(e["message_id"] for e in posted)

    one_line_error(legion("events", "--kind", "exploded"), "unknown event kind 'exploded'")
    one_line_error(legion("events", "--agent", "nobody"), "unknown address @nobody")


def test_events_follow_streams_new_events_until_ctrl_c(
    legion: LegionRunner, project: Path, worktree: Path
) -> None:
    ok(legion("say", "starting", env=CONTROLLER))
    follower = subprocess.Popen(
        [str(LEGION_BIN), "events", "--follow", "--json"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        first = json.loads(follower.stdout.readline())
        assert (first["kind"], first["agent"]) == ("agent_registered", "repo/main/legion")
        ok(legion("ask", "Which format?", cwd=worktree, env=IMPLEMENTER))
        # A new agent (not known when following began) is named all the same.
        later = [json.loads(follower.stdout.readline()) for _ in range(2)]
        assert [(e["kind"], e["agent"]) for e in later] == [
            ("agent_registered", "repo/legion/LEG-7/implement"),
            ("agent_blocked", "repo/legion/LEG-7/implement"),
        ]
        assert later[0]["id"] > first["id"]
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=30) == 0
        assert follower.stderr is not None and follower.stderr.read() == ""
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
