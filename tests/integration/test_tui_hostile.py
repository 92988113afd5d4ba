"""The TUI shows text Legion did not write inert (issue 24, item 5): the hostile corpus of
`tests.support.hostile`, put where an attacker can put it in a real project (the tracker, a worker's
screen and transcript, a relay refusal in the action log, the bus), reaches no view raw, and
its markup is shown as text: the chat and the sidebar, the inbox, the board, peek, the log."""

from __future__ import annotations

import io
import os
import sqlite3
from pathlib import Path
from typing import Any

from rich.console import Console

from legion.bus import bus_path, open_bus
from legion.bus.model import AgentRole, Channel
from legion.bus.sessions import project_channel_name
from legion.config import load_project
from legion.tui.commands import ServiceCommands
from legion.tui.sources import ProjectSources
from tests.integration.test_hostile_text import (
    blocked_worker,
    refused_by_the_relay,
    tampered_storage,
)
from tests.support.cli import LegionRunner
from tests.support.hostile import HOSTILE, MARKUP, RAW, assert_inert
from tests.unit.test_tui import RecordingApp, run, settle, sidebar_index, until

SIZE = (250, 50)  # wide: the corpus is not cut where a view shows it whole


def screen_output(app: Any) -> str:
    """Every character the screen would send to the terminal but Textual's own cursor moves
    (and, with no colour system, no style codes of its own)."""
    width, height = app.size
    console = Console(
        width=width, height=height, file=io.StringIO(), force_terminal=True, color_system=None
    )
    segments = console.render(app.screen._compositor.render_update(full=True))
    return "".join(segment.text for segment in segments if not segment.control)


async def until_inert(pilot: Any, app: Any, *texts: str) -> str:
    """The screen once it shows every one of `texts`, checked inert; fails after 5 s."""

    def done() -> bool:
        text = screen_output(app)
        return all(wanted in text for wanted in texts) or bool(RAW.search(text))

    await until(pilot, done)
    text = screen_output(app)
    assert_inert(text, where="screen", markup=False, shown=False)
    for wanted in texts:
        assert wanted in text, (wanted, text)
    return text


def test_no_view_shows_the_corpus_raw(
    project: Path,
    legion: LegionRunner,
    tmux_socket: Path,
) -> None:
    assert legion("issue", "create", "Plain title", "--body", "plain").returncode == 0
    assert legion("issue", "comment", "LEG-1", "--body", "## Question\n\nplain?").returncode == 0
    assert legion("issue", "label", "LEG-1", "--add", "user-input-needed").returncode == 0
    tampered_storage(project)
    loaded = load_project(project)
    with sqlite3.connect(loaded.db_path) as db:
        db.execute("UPDATE comments SET body = ?", (f"## Question\n\n{HOSTILE}",))
    db.close()
    blocked_worker(project)
    refused_by_the_relay(project)

    bus = open_bus(os.environ)
    try:
        name = project_channel_name(loaded, bus)  # the bus knows the project from now on
        main = Channel(name, "main")
        worker = bus.register_agent(
            Channel(name, "legion/leg-1"),
            "implement",
            role=AgentRole.IMPLEMENT,
            runtime="claude-code",
            session_id="sid-1",
        )
        talker = bus.register_agent(
            main, "talker", role=AgentRole.IMPLEMENT, runtime="claude-code", session_id="s"
        )
        posted = bus.post(talker.id, main, "plain")
    finally:
        bus.close()
    with sqlite3.connect(bus_path(os.environ)) as db:  # what the bus refuses on input
        db.execute("UPDATE messages SET body = ? WHERE id = ?", (HOSTILE, posted.message.id))
        db.execute("UPDATE agents SET name = ? WHERE id = ?", (f"talker{HOSTILE}", talker.id))
    db.close()

    def known() -> dict[str, Path]:
        opened = open_bus(os.environ)
        try:
            return opened.projects()
        finally:
            opened.close()

    sources = ProjectSources(dict(os.environ), project, known)
    commands = ServiceCommands(dict(os.environ), project, known)

    async def scenario() -> None:
        app = RecordingApp(lambda: open_bus(os.environ), sources, commands, channel=main)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            # The chat, with the sidebar (the agent's name).
            await until_inert(pilot, app, "\\x1b[2J", MARKUP, "talker x \\x1b[2J")
            await pilot.press("f3")  # the inbox: the tracker's question
            await until_inert(pilot, app, "\\x1b[2J", MARKUP, "asks: ")
            await pilot.press("f4")  # the board: the title
            await until_inert(pilot, app, "\\x1b[2J", MARKUP, "LEG-1")
            await pilot.press("f6")  # the log: the relay's refusal quotes the identifier
            await until_inert(pilot, app, "relay_refuse", "\\x1b[2J", MARKUP)
            await pilot.press("f5")  # peek: the worker's screen and transcript
            app.query_one("Sidebar").highlighted = sidebar_index(app, f"a:{worker.id}")
            await until_inert(pilot, app, "-- transcript --", "\\u202eexe.txt", MARKUP)

    run(scenario)
