"""The TUI (`legion tui`). Textual is imported only when the TUI opens (`run_tui`), so other
commands never pay for it; see `legion.tui.app` and docs/tui.md."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from legion.bus import Bus
    from legion.bus.model import Channel


def run_tui(env: Mapping[str, str], cwd: Path | None = None) -> int:
    """Open the TUI on the machine's bus until the human quits; 0 then. Without a terminal,
    or when the bus cannot be opened (a corrupt or locked file), a `LegionError` says so
    before anything is drawn. `cwd`: where the human stands (default: the working folder),
    for the channel opened first and the board's project."""
    import sys

    from legion.bus import bus_path, bus_store, open_bus
    from legion.errors import ConflictError

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise ConflictError(
            "legion tui needs a terminal (standard input and output are not one); "
            "`legion messages --follow` reads the bus in a pipe"
        )
    from legion.tui.app import LegionApp
    from legion.tui.commands import ServiceCommands
    from legion.tui.project_watch import ProjectWatch
    from legion.tui.readmarks import ReadMarks, marks_path
    from legion.tui.sources import ProjectSources

    here = Path.cwd() if cwd is None else cwd

    def bus() -> Bus:
        return open_bus(env)

    def known_projects() -> dict[str, Path]:
        opened = bus()
        try:
            return opened.projects()
        finally:
            opened.close()

    first = bus()
    try:
        newest = first.messages(last=1)
        channel = channel_here(env, here, first)
    finally:
        first.close()
    marks = ReadMarks.load(marks_path(env), newest[-1].seq if newest else 0)
    sources = ProjectSources(env, here, known_projects)
    commands = ServiceCommands(env, here, known_projects)
    app = LegionApp(
        bus,
        sources,
        commands,
        marks=marks,
        channel=channel,
        bus_file=None if bus_store(env) else bus_path(env),
    )
    with ProjectWatch(env).running():  # the watcher of every project no daemon runs for
        app.run()
    return 0 if app.return_code is None else app.return_code


def channel_here(env: Mapping[str, str], cwd: Path, bus: Bus | None = None) -> Channel | None:
    """The channel the human speaks in from `cwd` (as `legion say` would), listed and open
    from the start even before anybody spoke there; None outside a project. With `bus`, the
    project is claimed on it (its name there, `app-2` where another `app` came first)."""
    from legion.bus.sessions import human_channel
    from legion.config import load_project
    from legion.errors import LegionError

    try:
        return human_channel(load_project(cwd, env), cwd, bus)
    except LegionError:
        return None
