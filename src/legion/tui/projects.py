"""Which project the TUI means by a name on the bus: the one the bus says lives under that
name, else the one the TUI was started in (whose name it shows, so it is never mistaken for
another). The read models (`legion.tui.sources`), the commands (`legion.tui.commands`) find
their project here.

Each call may run in a worker thread, so nothing is kept open between calls: a caller opens
a project's backends (`backends`) for what it does and they are closed after it (a SQLite
connection belongs to the thread that opened it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from legion.errors import ConflictError, LegionError

if TYPE_CHECKING:
    from legion.backends import Backends
    from legion.config import Project
    from legion.sessions.workers import WorkerManager

NO_PROJECT = "no project here: run `legion tui` in a Legion project (`legion init` makes one)"


class ProjectFinder:
    """The projects on this machine: those the bus knows (`known_projects`: name on the bus
    -> root), and the one the TUI was started in (`cwd`)."""

    def __init__(
        self, env: Mapping[str, str], cwd: Path, known_projects: Callable[[], Mapping[str, Path]]
    ) -> None:
        """`known_projects` is called from worker threads, so it must open its own
        connection (`Bus.projects` on a bus opened for the call)."""
        self.env = env
        self.cwd = cwd
        self.known_projects = known_projects

    def find(self, name: str | None) -> Project:
        """Project `name` where the bus says it lives; else the project the TUI was started
        in. A `ConflictError` saying why, in a line, when neither can be opened."""
        from legion.config import load_project

        root = self._known_root(name) if name else None
        try:
            return load_project(root or self.cwd, self.env)
        except LegionError as exc:
            if root is not None:
                raise ConflictError(f"project {name} ({root}): {exc}") from None
            raise ConflictError(NO_PROJECT) from None

    def named(self, name: str) -> Project:
        """Project `name` as the TUI showed it: where the bus says it lives, or the one here
        when that is its name; never another."""
        found = self.find(name)
        if name_of(found) != name:
            raise ConflictError(
                f"project {name}'s folder is not known (Legion learns it when it starts a "
                "session there)"
            )
        return found

    def known(self) -> dict[str, Path]:
        """Every project the bus knows, by name (a `LegionError` when the bus cannot say)."""
        return dict(self.known_projects())

    def _known_root(self, name: str) -> Path | None:
        try:
            return self.known_projects().get(name)
        except LegionError:
            return None

    @contextmanager
    def backends(self, project: Project) -> Iterator[Backends]:
        """The project's tracker, forge and database for the block, closed after it."""
        from legion.backends import open_backends

        backends = open_backends(project)
        try:
            yield backends
        finally:
            backends.db.close()

    def workers(self, project: Project, backends: Backends) -> WorkerManager:
        from legion.backends import open_workers

        return open_workers(project, backends, self.env)


def name_of(project: Project) -> str:
    """The project's name on the bus."""
    from legion.bus.sessions import project_channel_name

    return project_channel_name(project)
