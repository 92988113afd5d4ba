"""The TUI's tracker inbox and board dispatch on a real project (`legion init`, the embedded
tracker): a question a worker escalated on the tracker shows in the inbox with the bus's, is
answered in place through `legion feedback`'s function, and leaves; `d` on the board goes
through `open_workers(...).dispatch`, as `legion dispatch` does."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from textual.widgets import DataTable

from legion.bus.stored import SqliteBus
from legion.config import load_project
from legion.core.model import Mode
from legion.tui.commands import ServiceCommands
from legion.tui.sources import Board, ProjectSources, TrackerInbox
from tests.support.cli import LegionRunner
from tests.unit.test_tui import RecordingApp, run, settle, until_said, until_shown


def claim(bus: SqliteBus, project: Path) -> None:
    """The bus learns where the project lives (as when it starts a session there)."""
    assert bus.claim_project(load_project(project).settings.project_id, "repo", project) == "repo"


def environment(project: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["LEGION_TMUX_SOCKET"] = str(project.parent / "tmux.sock")  # a tmux server nobody started
    return env


def known_projects(bus_path: Path) -> Callable[[], dict[str, Path]]:
    def known() -> dict[str, Path]:
        bus = SqliteBus(bus_path)
        try:
            return bus.projects()
        finally:
            bus.close()

    return known


def sources(project: Path, bus_path: Path) -> ProjectSources:
    return ProjectSources(environment(project), project, known_projects(bus_path))


def commands(project: Path, bus_path: Path) -> ServiceCommands:
    return ServiceCommands(environment(project), project, known_projects(bus_path))


def ask_on_the_tracker(legion: LegionRunner) -> None:
    """LEG-1 waits for a human, as a worker leaves it when it escalates a question."""
    assert legion("issue", "create", "Add a flag").returncode == 0
    question = "## Question\n\nShould the flag be --verbose or -v?"
    assert legion("issue", "comment", "LEG-1", "--body", question).returncode == 0
    assert legion("issue", "label", "LEG-1", "--add", "user-input-needed").returncode == 0


def test_a_tracker_question_is_answered_from_the_inbox(
    project: Path, legion: LegionRunner, tmp_path: Path
) -> None:
    ask_on_the_tracker(legion)
    bus_path = tmp_path / "bus.db"
    bus = SqliteBus(bus_path)
    claim(bus, project)
    bus.claim_project(str(uuid.uuid4()), "ghost", tmp_path / "gone")  # its folder is gone
    bus.close()
    here = sources(project, bus_path)

    async def scenario() -> None:
        app = RecordingApp(
            lambda: SqliteBus(bus_path),
            here,
            commands(project, bus_path),
            format_time=lambda _: "12:00",
        )
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("f3")
            text = await until_shown(pilot, app, "LEG-1", "Should the flag be --verbose or -v?")
            assert "F3 Inbox 1" in text
            assert "repo LEG-1 Add a flag asks:" in text
            assert "project ghost cannot be opened: " in text
            await pilot.press(*"--verbose", "enter")
            await until_said(pilot, app, "answered repo LEG-1")
            await until_shown(pilot, app, "No open questions for you.")
            assert app.query_one("#inbox-table", DataTable).row_count == 0
            await pilot.press("ctrl+r")  # read again: the tracker no longer lists it
            await settle(pilot)
            assert app.query_one("#inbox-table", DataTable).row_count == 0
            assert "F3 Inbox 1" not in await until_shown(pilot, app, "F3 Inbox")

    run(scenario)
    shown = legion("issue", "show", "LEG-1", "--json")
    assert shown.returncode == 0, shown.stderr
    issue = json.loads(shown.stdout)
    assert "user-feedback-given" in issue["labels"]
    assert issue["comments"][-1]["body"] == "--verbose"
    assert isinstance(here.tracker_questions(), TrackerInbox)
    assert here.tracker_questions().questions == ()


def test_feedback_is_refused_for_an_issue_not_waiting(
    project: Path, legion: LegionRunner, tmp_path: Path
) -> None:
    assert legion("issue", "create", "Add a flag").returncode == 0
    bus_path = tmp_path / "bus.db"
    claim(SqliteBus(bus_path), project)
    from legion.errors import ConflictError

    with pytest.raises(ConflictError, match="not waiting for an answer"):
        commands(project, bus_path).give_feedback("repo", "LEG-1", "yes")


class FakeRoster:
    """The fake manager's roster: no workers."""

    def views(self) -> list[Any]:
        return []

    def latest_modes(self) -> dict[str, Mode]:
        return {}


class FakeWorkers:
    """`open_workers(...)`'s manager, recording `dispatch` (no Claude Code starts here)."""

    def __init__(self, calls: list[tuple[str, Mode]]) -> None:
        self.calls = calls
        self.roster = FakeRoster()

    def dispatch(self, issue: str, mode: Mode, **_: Any) -> Any:
        self.calls.append((issue, mode))
        window = f"{issue.lower()}-{mode.value}"
        return SimpleNamespace(record=SimpleNamespace(issue=issue, window=window, session_id="s"))


def test_the_board_dispatch_goes_through_open_workers(
    project: Path, legion: LegionRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert legion("issue", "create", "Add a flag").returncode == 0  # Todo: plan it
    calls: list[tuple[str, Mode]] = []

    def open_workers(project: Any, backends: Any, env: Mapping[str, str] | None = None) -> Any:
        return FakeWorkers(calls)

    monkeypatch.setattr("legion.backends.open_workers", open_workers)
    bus_path = tmp_path / "bus.db"
    claim(SqliteBus(bus_path), project)
    here = sources(project, bus_path)
    board = here.board(None)
    assert isinstance(board, Board), board
    assert [(i.identifier, i.action.value, i.mode, i.live) for i in board.issues] == [
        ("LEG-1", "dispatch_planner", Mode.PLAN, False)
    ]

    async def scenario() -> None:
        app = RecordingApp(
            lambda: SqliteBus(bus_path),
            here,
            commands(project, bus_path),
            format_time=lambda _: "12:00",
        )
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("f4")
            await until_shown(pilot, app, "> LEG-1", "LEG-1: d dispatches plan")
            await pilot.press("d")
            await until_said(pilot, app, "LEG-1: plan worker started in window leg-1-plan")

    run(scenario)
    assert calls == [("LEG-1", Mode.PLAN)]


def test_the_project_here_is_in_the_inbox_before_the_bus_has_seen_it(
    project: Path, legion: LegionRunner, tmp_path: Path
) -> None:
    """A question escalated on the tracker of the project the TUI was opened in, with no
    session of it ever started (the bus does not know the project): it is in the inbox, and
    answered there."""
    ask_on_the_tracker(legion)
    bus_path = tmp_path / "bus.db"
    SqliteBus(bus_path).close()
    here = sources(project, bus_path)

    async def scenario() -> None:
        app = RecordingApp(
            lambda: SqliteBus(bus_path),
            here,
            commands(project, bus_path),
            format_time=lambda _: "12:00",
        )
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("f3")
            text = await until_shown(pilot, app, "Should the flag be --verbose or -v?")
            assert "F3 Inbox 1" in text and "repo LEG-1 Add a flag asks:" in text
            await pilot.press(*"--verbose", "enter")
            await until_said(pilot, app, "answered repo LEG-1")

    run(scenario)
    issue = json.loads(legion("issue", "show", "LEG-1", "--json").stdout)
    assert issue["comments"][-1]["body"] == "--verbose"
    # Once the bus knows the project (a session started there), it is listed once.
    bus = SqliteBus(bus_path)
    bus.claim_project(load_project(project).settings.project_id, "repo", project)
    bus.close()
    ask_again = legion("issue", "label", "LEG-1", "--remove", "user-feedback-given")
    assert ask_again.returncode == 0, ask_again.stderr
    assert [q.identifier for q in here.tracker_questions().questions] == ["LEG-1"]


def test_the_tui_opens_on_the_channel_of_the_project_here(project: Path, tmp_path: Path) -> None:
    """`legion tui` in a project nobody has spoken in yet opens its channel (as `legion say`
    would post there); outside a project, none."""
    from legion.bus.model import Channel
    from legion.tui import channel_here

    assert channel_here(os.environ, project) == Channel("repo", "main")
    (project / "src").mkdir()
    assert channel_here(os.environ, project / "src") == Channel("repo", "main")
    outside = tmp_path / "outside"
    outside.mkdir()
    assert channel_here(os.environ, outside) is None
