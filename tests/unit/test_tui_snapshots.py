"""The TUI's main screens as text, at 80x24 and 160x48, against the files in
`__snapshots__/test_tui_snapshots/`. A difference fails with both screens shown, and so does a
missing file; after a deliberate change, `UPDATE_TUI_SNAPSHOTS=1` writes the files (review them
in the diff): no run writes one unasked (`tests.support.snapshots`).

Text rather than SVG: the files read in a diff, and they do not change with Textual's colours
or fonts. What colour alone would show is also in the text (glyphs, labels, marks)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from legion.bus import actions
from legion.bus.model import AgentRole, AgentStatus, MessageKind
from legion.bus.stored import SqliteBus
from legion.core.decide import Action
from legion.core.model import Mode, Status
from legion.tui.sidebar import Sidebar
from legion.tui.sources import Board, BoardIssue, Peek
from tests.support.snapshots import snapshot_problems, updating
from tests.unit.test_tui import (
    LEG7,
    MAIN,
    OTHER,
    FakeSources,
    RecordingApp,
    register,
    sidebar_index,
    until_shown,
)

SNAPSHOTS = Path(__file__).parent / "__snapshots__" / "test_tui_snapshots"
SIZES = ((80, 24), (160, 48))


@pytest.fixture
def bus_path(tmp_path: Path) -> Iterator[Path]:
    """A bus with fixed content: two projects, a conversation, a question for the human, an
    archived agent, and every agent status."""
    path = tmp_path / "bus.db"
    bus = SqliteBus(path)
    legion = register(bus, MAIN, "legion", AgentRole.CONTROLLER)
    implement = register(bus, LEG7, "implement", AgentRole.IMPLEMENT)
    review = register(bus, LEG7, "review", AgentRole.REVIEW)
    plan = register(bus, LEG7, "plan", AgentRole.PLAN)
    retro = register(bus, LEG7, "retro", AgentRole.RETRO)
    web = register(bus, OTHER, "implement", AgentRole.IMPLEMENT)
    web_review = register(bus, OTHER, "review", AgentRole.REVIEW)
    bus.update_agent(review.id, status=AgentStatus.IDLE)
    bus.update_agent(plan.id, status=AgentStatus.COMPLETE)
    bus.update_agent(web.id, status=AgentStatus.BLOCKED)
    bus.update_agent(web_review.id, status=AgentStatus.FAILED)
    bus.update_agent(retro.id, status=AgentStatus.ARCHIVED)
    bus.post(legion.id, LEG7, "Spawning @implement for LEG-7: add the parser")
    bus.post(implement.id, LEG7, "Working on the parser. Tests first, then the grammar.")
    bus.post(plan.id, LEG7, "Plan written to docs/plans/LEG-7.md", kind=MessageKind.COMPLETE)
    bus.post(implement.id, LEG7, "@review the parser is ready for a look")
    bus.post(review.id, LEG7, "@implement two comments on the error messages")
    bus.post(legion.id, LEG7, "daemon restarted", kind=MessageKind.SYSTEM)
    actions.ask(bus, legion, "Should timestamps be UTC or local time?")
    bus.post(web.id, OTHER, "Blocked: which CSS framework?")
    bus.close()
    yield path


def sources() -> FakeSources:
    return FakeSources(
        board_view=Board(
            "app",
            (
                BoardIssue(
                    Status.BACKLOG,
                    "LEG-9",
                    "Export to CSV",
                    "-",
                    "-",
                    Action.DISPATCH_ARCHITECT,
                    Mode.ARCHITECT,
                ),
                BoardIssue(
                    Status.TODO,
                    "LEG-8",
                    "Add a --verbose flag",
                    "-",
                    "-",
                    Action.DISPATCH_PLANNER,
                    Mode.PLAN,
                ),
                BoardIssue(
                    Status.IN_PROGRESS,
                    "LEG-7",
                    "Add the parser",
                    "implement running",
                    "-",
                    live=True,
                ),
                BoardIssue(
                    Status.NEEDS_REVIEW, "LEG-5", "Document the CLI", "review idle", "#2 draft"
                ),
                BoardIssue(Status.RETRO, "LEG-4", "Fix the build", "implement idle", "#1 approved"),
                BoardIssue(Status.DONE, "LEG-3", "Initial layout", "-", "-"),
            ),
            (),
        ),
        peek_view=Peek(
            "app/legion/LEG-7/implement",
            "leg-7-implement",
            "running",
            "> Add the parser\n\n  Running tests...\n  12 passed, 1 failed",
            ("user: Add the parser", "assistant: Writing the tests first", "assistant: (Bash)"),
        ),
    )


FOOTER = "^q Quit"


async def screens(path: Path, size: tuple[int, int]) -> dict[str, str]:
    """Each main screen, as text."""
    found: dict[str, str] = {}
    fake = sources()
    app = RecordingApp(
        lambda: SqliteBus(path), fake, fake, channel=LEG7, format_time=lambda _: "12:00"
    )
    implement_key = f"a:{app.bus.resolve_agent('implement', LEG7).id}"
    # No animation: a tab's underline sliding over, caught half way on a loaded machine.
    app.animation_level = "none"
    async with app.run_test(size=size) as pilot:
        # Each screen once what it shows and the footer (drawn on its own, last) are there.
        found["chat"] = await until_shown(pilot, app, "daemon restarted", FOOTER)
        await pilot.press("escape")  # to the sidebar
        app.query_one(Sidebar).highlighted = sidebar_index(app, "archived")
        await pilot.press("enter")  # the Archived section opens
        found["sidebar"] = await until_shown(pilot, app, "v Archived (1)", "@retro", FOOTER)
        await pilot.press("f3")
        found["inbox"] = await until_shown(pilot, app, "UTC or local time?", FOOTER)
        await pilot.press("f4")
        found["board"] = await until_shown(pilot, app, "app: 6 issues", FOOTER)
        await pilot.press("escape")
        app.query_one(Sidebar).highlighted = sidebar_index(app, implement_key)
        await pilot.press("f5")
        found["peek"] = await until_shown(pilot, app, "12 passed, 1 failed", FOOTER)
    return found


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
def test_main_screens(bus_path: Path, size: tuple[int, int]) -> None:
    shown = asyncio.run(screens(bus_path, size))
    files = {f"{name}_{size[0]}x{size[1]}.txt": text for name, text in shown.items()}
    problems = snapshot_problems(SNAPSHOTS, files, update=updating())
    assert not problems, "\n".join(problems)


def test_a_missing_snapshot_fails_and_is_not_written(tmp_path: Path) -> None:
    """Only `UPDATE_TUI_SNAPSHOTS=1` writes a file: a run that wrote what it then compared
    against would pass whatever the screen showed."""
    (tmp_path / "kept.txt").write_text("kept", encoding="utf-8")
    shown = {"kept.txt": "kept", "new.txt": "a screen"}
    [missing, hint] = snapshot_problems(tmp_path, shown)
    assert missing.startswith("new.txt: no snapshot file") and "UPDATE_TUI_SNAPSHOTS=1" in hint
    assert not (tmp_path / "new.txt").exists()
    [different, _] = snapshot_problems(tmp_path, {"kept.txt": "changed"})
    assert different == "kept.txt: expected\nkept\ngot\nchanged"
    assert snapshot_problems(tmp_path, shown, update=True) == []
    assert (tmp_path / "new.txt").read_text(encoding="utf-8") == "a screen"
    assert snapshot_problems(tmp_path, shown) == []
