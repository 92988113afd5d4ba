"""What the TUI reads besides the bus: a project's board (`legion state`'s read model), an
agent's screen and transcript (`legion peek`'s), the action log (`legion log`'s), the
questions waiting on the trackers (`legion feedback`'s); and what it does outside the bus:
closing a killed agent's window, waking a daemon, answering a tracker question
(`legion feedback`'s `give_feedback`), starting a worker (`legion dispatch`'s
`WorkerManager.dispatch`).

Each call may be slow (a tracker over the network, tmux, transcripts) and runs in a worker
thread of the TUI, so each opens what it needs and closes it (a SQLite connection belongs to
the thread that opened it). A view that cannot be had is an `Unavailable` with the reason in
one line, never an exception.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from legion.bus.model import ORCHESTRATOR_NAME, Agent
from legion.core.decide import Action
from legion.core.model import Mode, Status
from legion.errors import ConflictError, LegionError
from legion.runtime.tmux import Attach
from legion.tui.present import (
    by_time,
    last_screen_lines,
    one_line,
    task_line,
    transcript_lines,
)

if TYPE_CHECKING:
    from legion.backends import Backends
    from legion.config import Project
    from legion.core.task_list import TaskList
    from legion.runtime.tmux import Window
    from legion.sessions.workers import WorkerManager

# The board's columns, in the order work moves (Triage and Icebox first: not yet planned).
PHASES: tuple[Status, ...] = (
    Status.TRIAGE,
    Status.ICEBOX,
    Status.BACKLOG,
    Status.TODO,
    Status.IN_PROGRESS,
    Status.NEEDS_REVIEW,
    Status.RETRO,
    Status.DONE,
)
NO_PROJECT = "no project here: run `legion tui` in a Legion project (`legion init` makes one)"
# An open TUI watches the projects no daemon runs for (`legion.watch`): their messages to idle
# agents delivered this often, and their sessions looked at for statuses every few times.
WATCH_S = 0.5
STATUSES_EVERY = 4
# The bus's newest events read for a project's log: the bus holds every project's, so a
# project's last ones are looked for among this many.
EVENTS_READ = 2000


@dataclass(frozen=True, slots=True)
class Unavailable:
    """Why a view cannot be shown, in one line."""

    reason: str


@dataclass(frozen=True, slots=True)
class BoardIssue:
    phase: Status
    identifier: str
    title: str
    worker: str  # "implement running", "-" with none, "unknown" when tmux did not answer
    review: str  # "#3 approved", "#3 draft", "-" without a pull request
    action: Action = Action.SKIP  # what the decision table suggests (`legion state`'s)
    mode: Mode | None = None  # the worker it starts or resumes
    live: bool = False  # a live worker works on it


@dataclass(frozen=True, slots=True)
class Board:
    project: str
    issues: tuple[BoardIssue, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Peek:
    agent: str  # the agent's address
    window: str
    state: str
    screen: str
    transcript: tuple[str, ...]
    tasks: str = ""  # its task list's progress and what is in progress ("" when it keeps none)


@dataclass(frozen=True, slots=True)
class LogLine:
    """A line of the Log view: a reconciler's action on an issue, or an event of an agent on
    the bus (`about` is then its address: `@app/legion/LEG-1/plan`, `outcome` "event")."""

    at: str
    about: str
    what: str
    outcome: str
    detail: str


@dataclass(frozen=True, slots=True)
class ActionLogView:
    project: str
    lines: tuple[LogLine, ...]


@dataclass(frozen=True, slots=True)
class TrackerAsk:
    """An issue waiting for a human's answer (`legion.feedback.waiting_for_human`)."""

    project: str  # the project's name on the bus
    identifier: str
    title: str
    question: str  # the question comment (or the title when there is none)
    asked_at: str

    @property
    def key(self) -> str:
        return f"t:{self.project}:{self.identifier}"


@dataclass(frozen=True, slots=True)
class TrackerInbox:
    questions: tuple[TrackerAsk, ...]
    troubles: tuple[str, ...]  # a project that could not be opened or read: why, in a line


class Sources(Protocol):
    """The TUI's reads and deeds outside the bus. Called from worker threads."""

    def board(self, project: str | None) -> Board | Unavailable:
        """The board of project `project` (its name on the bus), or of the project here."""
        ...

    def peek(self, agent: Agent, lines: int) -> Peek | Unavailable: ...

    def action_log(self, project: str | None, limit: int) -> ActionLogView | Unavailable:
        """The project's last `limit` actions and the last `limit` events of its agents on
        the bus (registered, blocked, completed, failed, archived, compactions), by time."""
        ...

    def attach(self, agent: Agent, environ: Mapping[str, str]) -> Attach | Unavailable:
        """The tmux command that opens the agent's live window in the terminal whose
        environment is `environ` (as `legion attach` does)."""
        ...

    def stop(self, agent: Agent, *, force: bool) -> bool:
        """Close the agent's session (its tmux window; `force`: SIGKILL at once); True if
        one was running."""
        ...

    def wake(self, project: str) -> None:
        """Have the project's messages delivered now: by its daemon, or, when none runs, here."""
        ...

    def tracker_questions(self) -> TrackerInbox:
        """Every issue waiting for a human, in every project the bus knows."""
        ...

    def give_feedback(self, project: str, issue: str, text: str) -> str:
        """Answer `issue` of project `project` (its name on the bus), as `legion feedback`
        does, and wake its daemon, which relays the answer to the worker; the issue's
        identifier. A `LegionError` when refused."""
        ...

    def dispatch(self, project: str, issue: str, mode: Mode) -> str:
        """Start `mode`'s worker for `issue` of project `project` (as the board named it), as
        `legion dispatch` does; what was started, in a line. A `LegionError` when refused."""
        ...


class ProjectSources:
    """`Sources` for the projects on this machine: those the bus knows (`Bus.projects`), and
    the one the TUI was started in."""

    def __init__(
        self,
        env: Mapping[str, str],
        cwd: Path,
        known_projects: Callable[[], Mapping[str, Path]],
    ) -> None:
        """`known_projects`: name on the bus -> root; called from worker threads, so it must
        open its own connection (`Bus.projects` on a bus opened for the call)."""
        self.env = env
        self.cwd = cwd
        self.known_projects = known_projects

    # -- finding the project ------------------------------------------------------------------

    def project(self, name: str | None) -> Project | Unavailable:
        """Project `name` where the bus says it lives; else the project the TUI was started
        in (whose name the board shows, so it is never mistaken for another)."""
        from legion.config import load_project

        root = self._known_root(name) if name else None
        try:
            return load_project(root or self.cwd, self.env)
        except LegionError as exc:
            if root is not None:
                return Unavailable(f"project {name} ({root}): {exc}")
            return Unavailable(NO_PROJECT)

    def _known_root(self, name: str) -> Path | None:
        try:
            return self.known_projects().get(name)
        except LegionError:
            return None

    @contextmanager
    def _backends(self, project: Project) -> Iterator[Backends]:
        from legion.backends import open_backends

        backends = open_backends(project)
        try:
            yield backends
        finally:
            backends.db.close()

    def _workers(self, project: Project, backends: Backends) -> WorkerManager:
        from legion.backends import open_workers

        return open_workers(project, backends, self.env)

    # -- the views ----------------------------------------------------------------------------

    def board(self, project: str | None) -> Board | Unavailable:
        found = self.project(project)
        if isinstance(found, Unavailable):
            return found
        try:
            return self._board(found)
        except LegionError as exc:
            return Unavailable(f"the board of {_name(found)} cannot be read: {exc}")

    def _board(self, project: Project) -> Board:
        from legion.state import KnownLiveWorkers, observe

        with self._backends(project) as backends:
            warnings: list[str] = []
            workers: dict[str, str] = {}
            latest: dict[str, Mode] | None = None
            try:
                manager = self._workers(project, backends)
                for view in manager.roster.views():
                    workers[view.record.issue] = f"{view.record.mode.value} {view.state.value}"
                live = {issue for issue, what in workers.items() if not what.endswith(" dead")}
                latest = manager.roster.latest_modes()
            except LegionError as exc:  # tmux did not answer: who works is unknown
                warnings.append(f"workers unknown: {exc}")
                live = set()
            snapshot = observe(
                project.settings.project_id,
                backends.tracker,
                backends.forge,
                KnownLiveWorkers(live, latest),
                opt_in=project.settings.backlog_opt_in_labels,
            )
        order = {phase: n for n, phase in enumerate(PHASES)}
        issues = sorted(
            (
                BoardIssue(
                    phase=state.issue.status,
                    identifier=state.issue.identifier,
                    title=state.issue.title,
                    worker=workers.get(state.issue.identifier, "unknown" if warnings else "-"),
                    review=_review(state.pr, state.pr_review.value),
                    action=state.decision.action,
                    mode=state.decision.mode,
                    live=state.has_live_worker,
                )
                for state in snapshot.issues
            ),
            key=lambda issue: (order.get(issue.phase, len(order)), _issue_number(issue)),
        )
        return Board(_name(project), tuple(issues), tuple(warnings + snapshot.warnings))

    def peek(self, agent: Agent, lines: int) -> Peek | Unavailable:
        if not agent.session_id:
            return Unavailable(f"@{agent.address} has no session to look at")
        found = self.project(agent.project)
        if isinstance(found, Unavailable):
            return found
        if _name(found) != agent.project:
            return Unavailable(
                f"@{agent.address} is in project {agent.project}, whose folder Legion does not "
                "know yet (it learns it when it starts a session there)"
            )
        try:
            with self._backends(found) as backends:
                workers = self._workers(found, backends)
                window, transcript, state, tasks = self._session_of(found, workers, agent)
                if window is None:
                    return Unavailable(
                        f"@{agent.address} has no window (its session is not running)"
                    )
                screen = last_screen_lines(workers.windows.screen(window.id, lines=lines), lines)
        except LegionError as exc:
            return Unavailable(f"@{agent.address} cannot be seen: {exc}")
        from legion.runtime.transcript import read_tail

        said = transcript_lines(read_tail(transcript, 64 * 1024), 20)
        progress = "" if tasks is None else task_line(tasks)
        return Peek(agent.address, window.name, state, screen, tuple(said), progress)

    def _session_of(
        self, project: Project, workers: WorkerManager, agent: Agent
    ) -> tuple[Window | None, Path, str, TaskList | None]:
        """The agent's tmux window (None: not running), its transcript, its state and its
        task list."""
        if agent.name == ORCHESTRATOR_NAME:
            from legion.sessions.observer import controller_state_of

            window = workers.windows.controller_window()
            state, _ = controller_state_of(project, workers)
            sid = agent.session_id or ""
            runtime = workers.runtimes.controller
            transcript = runtime.transcript(workers.env, project.root, sid)
            return window, transcript, state.value, runtime.task_list(workers.env, sid)
        for view in workers.roster.views():
            if view.record.session_id == agent.session_id:
                tasks = workers.roster.task_list(view.record)
                return view.window, view.transcript, view.state.value, tasks
        raise _NoWorker(f"@{agent.address} is not one of the project's workers now")

    def action_log(self, project: str | None, limit: int) -> ActionLogView | Unavailable:
        from legion.actionlog import ActionLog

        found = self.project(project)
        if isinstance(found, Unavailable):
            return found
        name = _name(found)
        try:
            with self._backends(found) as backends:
                entries = ActionLog(backends.db).tail(limit)
        except LegionError as exc:
            return Unavailable(f"the action log of {name} cannot be read: {exc}")
        lines = [LogLine(e.at, e.issue, e.action, e.outcome.value, e.detail) for e in entries]
        try:
            lines += self._agent_events(name, limit)
        except LegionError as exc:
            return Unavailable(f"the bus's events of {name} cannot be read: {exc}")
        return ActionLogView(name, tuple(by_time(lines, key=lambda line: line.at)))

    def _agent_events(self, project: str, limit: int) -> list[LogLine]:
        """The last `limit` events of the project's agents (`legion events`', but for one
        project: the bus holds every project's)."""
        from legion.bus import open_bus
        from legion.bus.model import EventKind

        bus = open_bus(self.env)
        try:
            ours = {
                agent.id: agent.address
                for agent in bus.agents(include_archived=True)
                if agent.project == project
            }
            if not ours:
                return []
            kinds = set(EventKind) - {EventKind.MESSAGE_POSTED}
            found = bus.event_log(kinds=kinds, last=EVENTS_READ)
        finally:
            bus.close()
        lines = [
            LogLine(e.created_at, f"@{ours[e.agent_id]}", e.kind.short_name, "event", e.detail)
            for e in found
            if e.agent_id in ours
        ]
        return lines[-limit:]

    # -- deeds --------------------------------------------------------------------------------

    def stop(self, agent: Agent, *, force: bool) -> bool:
        # The worker manager's, as `legion kill` does it: every window tagged with the
        # session, and a stray process of it.
        found = self.project(agent.project)
        if isinstance(found, Unavailable) or _name(found) != agent.project:
            return False  # nothing Legion can reach runs it from here
        if not agent.session_id:
            return False
        with self._backends(found) as backends:
            return self._workers(found, backends).supervisor.stop_session(
                agent.session_id, force=force
            )

    def attach(self, agent: Agent, environ: Mapping[str, str]) -> Attach | Unavailable:
        if not agent.session_id:
            return Unavailable(f"@{agent.address} has no session to attach to")
        found = self.project(agent.project)
        if isinstance(found, Unavailable):
            return found
        if _name(found) != agent.project:
            return Unavailable(f"@{agent.address} is in a project Legion cannot reach from here")
        try:
            with self._backends(found) as backends:
                workers = self._workers(found, backends)
                window = workers.windows.live_window(agent.session_id)
                if window is None:
                    return Unavailable(
                        f"@{agent.address} is not running: no live session to attach to"
                    )
                return workers.windows.attach_command(window.id, environ)
        except LegionError as exc:
            return Unavailable(f"@{agent.address} cannot be attached to: {one_line(str(exc))}")

    def wake(self, project: str) -> None:
        from legion.bus import open_bus
        from legion.daemon_link import notify
        from legion.watch import watch

        found = self.project(project)
        if not isinstance(found, Unavailable) and _name(found) == project:
            notify(found)
            # With no daemon, the TUI delivers, as `legion say` does (nothing when one runs).
            bus = open_bus(self.env)
            try:
                watch(found, bus, self.env, statuses=False)
            finally:
                bus.close()

    # -- watching -----------------------------------------------------------------------------

    def watch(self, *, statuses: bool = True) -> None:
        """One pass as the watcher of every project on this machine that no daemon runs for
        (`legion.watch`): idle agents handed their messages and, with `statuses`, every
        agent's status read from its session. A project that cannot be had is skipped."""
        from legion.bus import open_bus
        from legion.watch import load, projects_to_watch, watch

        bus = open_bus(self.env)
        try:
            for name, root in projects_to_watch(bus, statuses=statuses).items():
                project = load(root, self.env)
                if project is None or _name(project) != name:
                    continue
                with contextlib.suppress(LegionError):
                    watch(project, bus, self.env, statuses=statuses)
        finally:
            bus.close()

    @contextmanager
    def watching(self, every: float = WATCH_S) -> Iterator[None]:
        """Watch (`watch`) in a thread while the block runs: whoever watches delivers, and
        an open TUI is the watcher of the projects no daemon runs for."""
        stop = threading.Event()

        def loop() -> None:
            passes = 0
            while not stop.wait(every):
                # A pass that failed (a project broken meanwhile) is tried again; the TUI stays.
                with contextlib.suppress(Exception):
                    self.watch(statuses=passes % STATUSES_EVERY == 0)
                passes += 1

        thread = threading.Thread(target=loop, name="legion-watch", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=15)

    # -- the trackers -------------------------------------------------------------------------

    def tracker_questions(self) -> TrackerInbox:
        from legion.config import load_project
        from legion.feedback import waiting_for_human

        try:
            known = dict(self.known_projects())
        except LegionError as exc:
            reason = one_line(str(exc))
            return TrackerInbox((), (f"the projects on the bus cannot be listed: {reason}",))
        # The project the TUI was opened in, though no session of it has run yet (the bus
        # learns a project when Legion starts one there): its questions are the human's too.
        here = self.project(None)
        roots = {root.resolve() for root in known.values()}
        if not isinstance(here, Unavailable) and here.root.resolve() not in roots:
            known.setdefault(_name(here), here.root)
        asks: list[TrackerAsk] = []
        troubles: list[str] = []
        for name, root in sorted(known.items()):
            try:
                project = load_project(root, self.env)
            except (LegionError, OSError) as exc:
                troubles.append(f"project {name} cannot be opened: {one_line(str(exc))}")
                continue
            try:
                with self._backends(project) as backends:
                    waiting = waiting_for_human(backends.tracker)
            except (LegionError, OSError) as exc:
                troubles.append(f"project {name}: its tracker cannot be read: {one_line(str(exc))}")
                continue
            asks += (
                TrackerAsk(name, q.issue.identifier, q.issue.title, q.question, q.asked_at)
                for q in waiting
            )
        return TrackerInbox(tuple(asks), tuple(troubles))

    def give_feedback(self, project: str, issue: str, text: str) -> str:
        # `legion feedback`'s own function: the same check, author and wake-up.
        from legion.feedback import answer_from_person

        found = self._named(project)
        with self._backends(found) as backends:
            updated, _ = answer_from_person(found, backends.tracker, issue, text)
        return updated.identifier

    def dispatch(self, project: str, issue: str, mode: Mode) -> str:
        # `legion dispatch`'s own function: the same refusals (a worker's session, a live
        # worker, an issue blocked by one not Done).
        from legion.dispatch import start_worker

        found = self._named(project)
        with self._backends(found) as backends:
            view = start_worker(found, backends, issue, mode, env=self.env)
        record = view.record
        return (
            f"{record.issue}: {mode.value} worker started in window {record.window} "
            f"(session {record.session_id})"
        )

    def _named(self, name: str) -> Project:
        """Project `name` as the TUI showed it: where the bus says it lives, or the one here
        when that is its name; never another."""
        found = self.project(name)
        if isinstance(found, Unavailable):
            raise ConflictError(found.reason)
        if _name(found) != name:
            raise ConflictError(
                f"project {name}'s folder is not known (Legion learns it when it starts a "
                "session there)"
            )
        return found


class _NoWorker(LegionError):
    """The agent's session is not a worker the project's registry knows."""


def _name(project: Project) -> str:
    from legion.bus.sessions import project_channel_name

    return project_channel_name(project)


def _issue_number(issue: BoardIssue) -> tuple[int, str]:
    digits = issue.identifier.rpartition("-")[2]
    return (int(digits) if digits.isdigit() else 0, issue.identifier)


def _review(pr: object, outcome: str) -> str:
    from legion.forges.base import PullRequest

    if not isinstance(pr, PullRequest):
        return "unknown" if outcome == "unknown" else "-"
    return f"#{pr.number} {'draft' if pr.is_draft else outcome.replace('_', ' ')}"
