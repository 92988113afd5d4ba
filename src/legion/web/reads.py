"""What the web view reads and does, through the TUI's read models and the CLI's service
functions: the boards (`legion state`'s), the questions waiting on the trackers (`legion
feedback`'s) and a person's answer to one. The web layer decides nothing of its own here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from legion.errors import LegionError
from legion.services.issue_view import IssuePage
from legion.tui.sources import Board, ProjectSources, TrackerInbox, Unavailable


class WebReads(Protocol):
    def boards(self) -> list[Board | Unavailable]:
        """Each project's board: those the bus knows, and the one `legion web` runs in."""
        ...

    def inbox(self) -> TrackerInbox: ...

    def issue(self, project: str, identifier: str) -> IssuePage | Unavailable:
        """Issue `identifier` of project `project` (its name on the bus), as its page shows
        it; why not, when it cannot be read (no such project or issue)."""
        ...

    def answer(self, project: str, issue: str, text: str, author: str) -> str:
        """A person's answer to the question waiting on `issue` (`legion feedback`'s path);
        what was done, in a line. A refusal is a `LegionError`."""
        ...


class MachineReads:
    """`WebReads` on the projects of this machine (or, on a PostgreSQL store, its fleet's)."""

    def __init__(self, env: Mapping[str, str], cwd: Path) -> None:
        from legion.tui.commands import ServiceCommands

        self.env = env
        self.sources = ProjectSources(env, cwd, self._known)
        self.commands = ServiceCommands(env, cwd, self._known)

    def _known(self) -> dict[str, Path]:
        from legion.bus import open_bus

        bus = open_bus(self.env)
        try:
            return bus.projects()
        finally:
            bus.close()

    def project_names(self) -> list[str | None]:
        """The projects shown: the bus's, and the one here (None) when the bus has it not."""
        try:
            names: list[str | None] = list(sorted(self.sources.projects.known()))
        except LegionError:
            names = []
        here = self.sources.project(None)
        if isinstance(here, Unavailable):
            return names or [None]
        from legion.tui.projects import name_of

        if name_of(here) not in names:
            names.insert(0, None)
        return names

    def boards(self) -> list[Board | Unavailable]:
        return [self.sources.board(name) for name in self.project_names()]

    def inbox(self) -> TrackerInbox:
        return self.sources.tracker_questions()

    def issue(self, project: str, identifier: str) -> IssuePage | Unavailable:
        from legion.services.issue_view import read_issue_page

        try:
            found = self.sources.projects.named(project)
            with self.sources.projects.backends(found) as backends:
                return read_issue_page(found, backends, project, identifier, self.env)
        except LegionError as exc:
            return Unavailable(str(exc))

    def answer(self, project: str, issue: str, text: str, author: str) -> str:
        identifier = self.commands.give_feedback(project, issue, text, author=author)
        return f"{identifier}: answered; the worker gets it in its own session"
