"""What the TUI reads besides the bus: a project's board (`legion state`'s read model), an
agent's screen and transcript (`legion peek`'s), the action log with the project's agents'
events (`legion log`'s, `legion events`'), the questions waiting on the trackers (`legion
feedback`'s). What the human does outside the bus is `legion.tui.commands`'.

Each read may be slow (a tracker over the network, tmux, transcripts) and runs in a worker
thread of the TUI (the watcher's), so each opens what it needs and closes it (a SQLite
connection belongs to the thread that opened it). A view that cannot be had is an
`Unavailable` with the reason in one line, never an exception.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from legion.bus.model import ORCHESTRATOR_NAME, Agent
from legion.core.decide import Action
from legion.core.model import Mode, Status
from legion.errors import LegionError
from legion.tui.present import one_line
from legion.tui.present_peek import by_time, last_screen_lines, task_line, transcript_lines
from legion.tui.projects import ProjectFinder, name_of

if TYPE_CHECKING:
    from legion.config import Project
    from legion.core.task_list import TaskList
    from legion.forges.base import Forge, PullRequest
    from legion.reconcile.last_read import CommentCache
    from legion.runtime.tmux import Window
    from legion.sessions.workers import WorkerManager
    from legion.store import Store
    from legion.store.changes import StoreSignal
    from legion.trackers.base import Issue

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
# The bus's newest events read for a project's log: the bus holds every project's, so a
# project's last ones are looked for among this many.
EVENTS_READ = 2000
# A Done issue's pull request (merged, or closed) is looked up for the board alone (the
# decision table reads none there, so `legion state` asks the forge about none): each once,
# and again after this long only while it has none, so a board read costs no forge request
# but for issues newly Done.
DONE_PR_TTL_S = 300.0


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
    # For the web view's cards: its PR's checks ("" with none), why it waits (`IssueState.
    # note`), whether a person's answer is awaited, and what its sessions spent so far.
    checks: str = ""
    note: str = ""
    asks_human: bool = False
    tokens: int = 0
    cost: float | None = None  # where `[prices]` knows every model it used


@dataclass(frozen=True, slots=True)
class Board:
    project: str
    issues: tuple[BoardIssue, ...]
    warnings: tuple[str, ...]
    hosts: str | None = None  # the fleet's hosts in one line (`legion.fleet.hosts.hosts_line`)
    # What tells that this board may have changed: its store's files (or, on PostgreSQL, its
    # change signal), its workers' transcripts (how the web view tells, cheaply, that it is
    # worth reading again); none when its tracker or its forge is a service (nothing here
    # shows what changes there).
    watched: tuple[Path | StoreSignal, ...] = ()


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
    """An issue waiting for a human's answer (`legion.reconcile.humans.waiting_for_human`)."""

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
    # As a board's: the projects' stores; none if one's tracker is a service.
    watched: tuple[Path | StoreSignal, ...] = ()


class Sources(Protocol):
    """The TUI's reads outside the bus. Called from worker threads."""

    def board(self, project: str | None) -> Board | Unavailable:
        """The board of project `project` (its name on the bus), or of the project here."""
        ...

    def peek(self, agent: Agent, lines: int) -> Peek | Unavailable: ...

    def action_log(self, project: str | None, limit: int) -> ActionLogView | Unavailable:
        """The project's last `limit` actions and the last `limit` events of its agents on
        the bus (registered, blocked, completed, failed, archived, compactions), by time."""
        ...

    def tracker_questions(self) -> TrackerInbox:
        """Every issue waiting for a human, in every project the bus knows."""
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
        self.projects = ProjectFinder(env, cwd, known_projects)
        # (project, issue) -> its pull request (None: none) and when it was looked up.
        self._done_prs: dict[tuple[str, str], tuple[PullRequest | None, float]] = {}
        self._done_lock = threading.Lock()
        self._asked: dict[str, CommentCache] = {}  # by project: the inbox's questions on a service

    def project(self, name: str | None) -> Project | Unavailable:
        """Project `name` where the bus says it lives; else the project the TUI was started
        in (whose name the board shows, so it is never mistaken for another)."""
        try:
            return self.projects.find(name)
        except LegionError as exc:
            return Unavailable(str(exc))

    # -- the views ----------------------------------------------------------------------------

    def board(self, project: str | None) -> Board | Unavailable:
        found = self.project(project)
        if isinstance(found, Unavailable):
            return found
        try:
            return self._board(found)
        except LegionError as exc:
            return Unavailable(f"the board of {name_of(found)} cannot be read: {exc}")

    def _board(self, project: Project) -> Board:
        from legion.reconcile.last_read import LastRead, SeenForge, SeenTracker
        from legion.reconcile.observe import KnownLiveWorkers, observe
        from legion.store.changes import store_watch
        from legion.trackers.splits import Splits

        with self.projects.backends(project) as backends:
            warnings: list[str] = []
            workers: dict[str, str] = {}
            tracker, forge = backends.tracker, backends.forge
            watched = store_watch(project) if announced(project) else []
            if not announced(project):  # a service's: the pass's reading, while fresh
                seen = LastRead(backends.db).fresh()
                if seen is not None:
                    tracker, forge = SeenTracker(tracker, seen), SeenForge(forge, seen)
                    watched = store_watch(project)
            latest: dict[str, Mode] | None = None
            unknown = False
            try:
                manager = self.projects.workers(project, backends)
                here = fleet_host(project)
                views = manager.roster.views()
                for view in views:
                    workers[view.record.issue] = worker_text(
                        view.record.mode.value,
                        view.state.value,
                        view.record.host,
                        here,
                        unreachable=view.unreachable is not None,
                    )
                live = {view.record.issue for view in views if view.state.is_live}
                if watched:
                    watched += [view.transcript for view in views if view.state.is_live]
                latest = manager.roster.latest_modes()
            except LegionError as exc:  # tmux did not answer: who works is unknown
                warnings.append(f"workers unknown: {exc}")
                live, unknown = set(), True
            hosts = _hosts(backends.db, project)
            warnings += _holds(backends.db, project)
            warnings += _unconfined(project)
            warnings += _egress_refused(backends.db)
            snapshot = observe(
                project.settings.project_id,
                tracker,
                forge,
                KnownLiveWorkers(live, latest),
                opt_in=project.settings.backlog_opt_in_labels,
                epic_children=Splits(backends.db).epic_children(),
            )
            done = self._done_prs_of(
                name_of(project),
                backends.forge,
                [s.issue for s in snapshot.issues if s.issue.status is Status.DONE and not s.pr],
            )
            spent = _spent(project, backends.db)
        order = {phase: n for n, phase in enumerate(PHASES)}
        issues = sorted(
            (
                BoardIssue(
                    phase=state.issue.status,
                    identifier=state.issue.identifier,
                    title=state.issue.title,
                    worker=workers.get(state.issue.identifier, "unknown" if unknown else "-"),
                    review=review_text(
                        state.pr or done.get(state.issue.identifier),
                        state.pr_review.value,
                        state.closed_pr,
                    ),
                    action=state.decision.action,
                    mode=state.decision.mode,
                    live=state.has_live_worker,
                    checks="" if state.checks.value == "none" else state.checks.value,
                    note=state.note or "",
                    asks_human=_asks_human(state.issue.labels),
                    tokens=spent.get(state.issue.identifier, (0, None))[0],
                    cost=spent.get(state.issue.identifier, (0, None))[1],
                )
                for state in snapshot.issues
            ),
            key=lambda issue: (order.get(issue.phase, len(order)), _issue_number(issue)),
        )
        return Board(
            name_of(project),
            tuple(issues),
            tuple(warnings + snapshot.warnings),
            hosts=hosts,
            watched=tuple(watched),
        )

    def _done_prs_of(
        self, project: str, forge: Forge, issues: Sequence[Issue]
    ) -> dict[str, PullRequest]:
        """The pull requests of Done `issues` (merged, or closed), by issue: asked of the forge
        for those not looked up yet (or that had none `DONE_PR_TTL_S` ago), in one batched
        request; a forge that does not answer leaves them unknown until the next reading."""
        now = time.monotonic()
        with self._done_lock:
            known = {i.identifier: self._done_prs.get((project, i.identifier)) for i in issues}
        wanted = [
            issue
            for issue in issues
            if (seen := known[issue.identifier]) is None
            or (seen[0] is None and now - seen[1] > DONE_PR_TTL_S)
        ]
        if wanted:
            try:
                found = forge.prs_by_issue(
                    [i.identifier for i in wanted],
                    links={i.identifier: i.links for i in wanted if i.links},
                )
            except LegionError:
                found = None
            if found is not None:
                with self._done_lock:
                    for issue in wanted:
                        self._done_prs[(project, issue.identifier)] = (
                            found.get(issue.identifier),
                            now,
                        )
        with self._done_lock:
            entries = {i.identifier: self._done_prs.get((project, i.identifier)) for i in issues}
        return {key: seen[0] for key, seen in entries.items() if seen and seen[0] is not None}

    def peek(self, agent: Agent, lines: int) -> Peek | Unavailable:
        if not agent.session_id:
            return Unavailable(f"@{agent.address} has no session to look at")
        found = self.project(agent.project)
        if isinstance(found, Unavailable):
            return found
        if name_of(found) != agent.project:
            return Unavailable(
                f"@{agent.address} is in project {agent.project}, whose folder Legion does not "
                "know yet (it learns it when it starts a session there)"
            )
        try:
            with self.projects.backends(found) as backends:
                workers = self.projects.workers(found, backends)
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
        """The agent's tmux window (None: not running), transcript, state and task list."""
        if agent.name == ORCHESTRATOR_NAME:
            from legion.sessions.observer import observe_controller

            controller = observe_controller(project, workers)
            sid = agent.session_id or ""
            runtime = workers.runtimes.controller
            transcript = runtime.transcript(project.root, sid)
            state = state_text(controller.state.value, controller.unreachable is not None)
            return controller.window, transcript, state, runtime.task_list(sid)
        for view in workers.roster.views():
            if view.record.session_id == agent.session_id:
                tasks = workers.roster.task_list(view.record)
                state = state_text(view.state.value, view.unreachable is not None)
                return view.window, view.transcript, state, tasks
        raise _NoWorker(f"@{agent.address} is not one of the project's workers now")

    def action_log(self, project: str | None, limit: int) -> ActionLogView | Unavailable:
        from legion.store.actionlog import ActionLog

        found = self.project(project)
        if isinstance(found, Unavailable):
            return found
        name = name_of(found)
        try:
            with self.projects.backends(found) as backends:
                entries = ActionLog(backends.db).tail(limit)
        except LegionError as exc:
            return Unavailable(f"the action log of {name} cannot be read: {exc}")
        lines = [LogLine(e.at, e.issue, e.action, e.outcome.value, e.said) for e in entries]
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

    # -- the trackers -------------------------------------------------------------------------

    def tracker_questions(self) -> TrackerInbox:
        from legion.config import load_project
        from legion.reconcile.humans import waiting_for_human
        from legion.reconcile.last_read import LastRead, SeenTracker
        from legion.store.changes import store_watch

        try:
            known = self.projects.known()
        except LegionError as exc:
            reason = one_line(str(exc))
            return TrackerInbox((), (f"the projects on the bus cannot be listed: {reason}",))
        # The project the TUI was opened in, though no session of it has run yet (the bus
        # learns a project when Legion starts one there): its questions are the human's too.
        here = self.project(None)
        roots = {root.resolve() for root in known.values()}
        if not isinstance(here, Unavailable) and here.root.resolve() not in roots:
            known.setdefault(name_of(here), here.root)
        asks: list[TrackerAsk] = []
        troubles: list[str] = []
        watched: list[Path | StoreSignal] | None = []
        for name, root in sorted(known.items()):
            try:
                project = load_project(root, self.env)
            except (LegionError, OSError) as exc:
                troubles.append(f"project {name} cannot be opened: {one_line(str(exc))}")
                continue
            try:
                with self.projects.backends(project) as backends:
                    tracker, told = backends.tracker, announced(project)
                    if not told:  # a service's: the pass's reading, while fresh
                        seen = LastRead(backends.db).fresh()
                        if seen is not None:
                            asked = self._asked.setdefault(name, {})  # its own: LEG-1 is many
                            tracker, told = SeenTracker(tracker, seen, asked), True
                    if watched is not None:  # told of its changes: its store moves
                        watched = watched + store_watch(project) if told else None
                    waiting = waiting_for_human(tracker)
            except (LegionError, OSError) as exc:
                troubles.append(f"project {name}: its tracker cannot be read: {one_line(str(exc))}")
                continue
            asks += (
                TrackerAsk(name, q.issue.identifier, q.issue.title, q.question, q.asked_at)
                for q in waiting
            )
        return TrackerInbox(tuple(asks), tuple(troubles), tuple(watched or ()))


def _asks_human(labels: Sequence[str] | frozenset[str]) -> bool:
    """Labelled as waiting for a person's answer, not yet given one."""
    from legion.core.model import Label

    return Label.USER_INPUT_NEEDED.value in labels and Label.USER_FEEDBACK_GIVEN.value not in labels


def _spent(project: Project, db: Store) -> dict[str, tuple[int, float | None]]:
    """Each issue's tokens as the model proxy metered them, and their cost when every model
    they went to has a price (`[prices]`)."""
    from legion.proxy.ledger import UsageLedger

    prices = project.settings.prices
    found: dict[str, tuple[int, float | None]] = {}
    for row in UsageLedger(db).rows():
        if not row.issue:
            continue
        tokens, cost = found.get(row.issue, (0, 0.0))
        price = prices.get(row.model)
        priced = None if cost is None or price is None else cost + price.cost(row.used)
        found[row.issue] = (tokens + row.used.total, priced)
    return found


def announced(project: Project) -> bool:
    """Whether every change a board shows of the project is announced to this machine: the
    embedded tracker and forge, in a SQLite store (its files move) or a PostgreSQL one (its
    writes NOTIFY: `legion.store.changes`)."""
    from legion.reconcile.last_read import on_a_service

    return not on_a_service(project.settings)


def fleet_host(project: Project) -> str | None:
    """This host's name in the project's fleet (a PostgreSQL store); None on one machine."""
    from legion.fleet.hosts import fleet_host

    return fleet_host(project.settings)


def _hosts(db: Store, project: Project) -> str | None:
    """The fleet's hosts in one line, when the project runs on more than one."""
    from legion.fleet.hosts import Fleet, hosts_line

    if fleet_host(project) is None:
        return None
    return hosts_line(Fleet(db).hosts(project.settings.host_timeout)[0])


UNREACHABLE = "cannot reach the model"


def state_text(state: str, unreachable: bool) -> str:
    """Pure: a session's state, marked when its CLI said it cannot reach the model (the
    daemon holds dispatch then: `legion status` says why)."""
    return f"{state}, {UNREACHABLE}" if unreachable else state


def worker_text(
    mode: str, state: str, host: str, here: str | None, *, unreachable: bool = False
) -> str:
    """Pure: a worker as the board says it: its mode and state (`idle, cannot reach the
    model` when its CLI said so), and in a fleet (`here`: this host) the host that runs it
    (another host's state as that host last reported it)."""
    shown = f"{mode} {state}"
    if here is not None and host:
        shown += f" on {host}"
    return state_text(shown, unreachable)


class _NoWorker(LegionError):
    """The agent's session is not a worker the project's registry knows."""


def _issue_number(issue: BoardIssue) -> tuple[int, str]:
    digits = issue.identifier.rpartition("-")[2]
    return (int(digits) if digits.isdigit() else 0, issue.identifier)


def review_text(pr: PullRequest | None, outcome: str, closed: PullRequest | None = None) -> str:
    """Pure: the board's PR cell: `#3 approved`, `#3 draft`, `#3 merged`, `#3 closed` (a
    closed PR, which the decision table reads as none: `closed`), `unknown` when the forge
    did not answer, `-` without a PR."""
    from legion.forges.base import PrState

    if pr is None:
        if closed is not None:
            return f"#{closed.number} closed"
        return "unknown" if outcome == "unknown" else "-"
    if pr.state is not PrState.OPEN:
        return f"#{pr.number} {pr.state.value}"
    return f"#{pr.number} {'draft' if pr.is_draft else outcome.replace('_', ' ')}"


def _unconfined(project: Project) -> list[str]:
    """Said on the board as `legion status` says it: workers that run unconfined."""
    from legion.sandbox import reported

    found = reported(project.settings.sandbox, project.env)
    return [] if found.confined else [f"sandbox {found.summary}"]


# How long a refusal of the egress proxy stays on the board (`legion status` shows the last
# ones, however old).
EGRESS_REFUSED_SHOWN_S = 3600


def _egress_refused(db: Store) -> list[str]:
    """What the egress proxy refused a session lately, said on the board as `legion status`
    says it (`sandbox_egress` does not allow it)."""
    from datetime import UTC, datetime, timedelta

    from legion.proxy.egress_refusals import refusal_counts

    since = datetime.now(UTC) - timedelta(seconds=EGRESS_REFUSED_SHOWN_S)
    stamp = since.isoformat(timespec="seconds").replace("+00:00", "Z")
    return [f"egress refused {count.line()}" for count in refusal_counts(db, 3, since=stamp)]


def _holds(db: Store, project: Project) -> list[str]:
    """What keeps workers from starting, said on the board as `legion status` says it: the
    dispatch pause, and a hold on the model (the provider's rate limit, the day's budget)."""
    from legion.proxy.limits import why_held
    from legion.sessions.pause import DispatchPause

    paused = DispatchPause(db).reason()
    held = why_held(db, project.settings.limits)
    return [line for line in (paused, held and f"model held: {held}") if line]
