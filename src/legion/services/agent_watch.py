"""Whoever watches a project keeps its agents' statuses true and hands them their messages.

The daemon watches the project it runs for, every tick. With no daemon for a project, whoever
reads or posts does it with the same code: `legion agents` and `legion kill` look at the
sessions before they read a status, `legion say` (and `ask`, `reply`) hands its message to an
idle addressee itself, `legion stop --all` marks what it stopped, and an open TUI watches
every project no daemon runs for. A status is then true whenever it is read.

Two watchers never act at once: a project's delivery and status steps run under its watch
lock (`watch.lock` in its state folder), and a watcher that is not the daemon checks, holding
the lock, that no daemon runs (a daemon that starts meanwhile waits for the lock, then finds
the delivery made). A delivery is never made twice: each attempt is counted on the bus before
it is made, and one with an earlier attempt first looks for its message id in the session's
transcript.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from legion.bus import Bus
from legion.bus.delivery import (
    NO_LIVE_SESSION,
    Delivery,
    Handed,
    Handover,
    Reach,
    SessionAt,
)
from legion.bus.model import Agent, AgentStatus
from legion.bus.sessions import project_channel_name
from legion.config import Project
from legion.core.ids import controller_session_id
from legion.core.liveness import SETTLE_S, SessionState
from legion.daemon_link import running_pid
from legion.errors import ConflictError, LegionError, NotFoundError
from legion.files.locking import exclusive
from legion.sessions.observer import ObservedSession, observe_sessions, observed_status
from legion.sessions.prompting import transcript_size
from legion.sessions.workers import WorkerManager
from legion.store import in_fleet
from legion.store.actionlog import ActionLog, OutcomeKind

WATCH_LOCK = "watch.lock"

# A running (or dead) session a message can be handed to, as observed in one look.
SessionTarget = ObservedSession


@contextlib.contextmanager
def watch_lock(project: Project, timeout: float = 30.0) -> Iterator[None]:
    """Hold the project's watch lock: one watcher at a time delivers and sets statuses."""
    with exclusive(project.state_dir / WATCH_LOCK, timeout=timeout):
        yield


class Watcher:
    """One project's statuses and deliveries, on one look at its sessions (tmux and every
    transcript), taken at the first need and shared by both steps; `forget()` takes a new one.

    `resume`: a dead worker is resumed with its messages (the daemon's; without a daemon a
    dead session's messages wait for `legion start`). `paused`: why dispatch is paused, when
    it is (nothing is resumed then)."""

    def __init__(
        self,
        project: Project,
        workers: WorkerManager,
        bus: Bus,
        log: ActionLog,
        *,
        resume: bool,
        paused: Callable[[], str | None] = lambda: None,
        host: str | None = None,
    ) -> None:
        self.project = project
        self.workers = workers
        self.bus = bus
        self.log = log
        self.resume = resume
        self.paused = paused
        # In a fleet, this daemon's host: it watches only its own sessions (`_watches`).
        self.host = host
        self._here: set[str] | None = None
        self.seen: dict[str, SessionTarget] | None = None
        # When the last delivery pass wants to be run again soon (a turn that just ended).
        self.retry_in: float | None = None

    @property
    def name(self) -> str:
        return project_channel_name(self.project, self.bus)

    @property
    def controller_session(self) -> str:
        return controller_session_id(self.project.settings.project_id)

    def forget(self) -> None:
        self.seen = None
        self._here = None

    def agents(self, *, include_archived: bool) -> list[Agent]:
        """This project's agents that have a session (in a fleet, those this host watches)."""
        found = self.bus.agents(include_archived=include_archived)
        return [
            a
            for a in found
            if a.project == self.name and a.session_id and self._watches(a.session_id)
        ]

    def _watches(self, session_id: str) -> bool:
        """Whether this host keeps the session's status and delivers its messages: every
        session on one machine. In a fleet, each host its own workers' sessions; the leader
        also the controller's, and any whose worker runs nowhere (it is resumed, and placed
        anew, with its messages)."""
        if self.host is None:
            return True
        if self.workers.leading_epoch is None:
            return session_id in self._current_here()
        if session_id == self.controller_session:
            return True
        record = self.workers.roster.record_of(session_id)
        if record is None or record.host in ("", self.host):
            return True
        target = self.sessions().get(session_id)
        return target is None or not target.state.is_live

    def _current_here(self) -> set[str]:
        """The sessions of the workers this host runs (their records current), once a look."""
        if self._here is None:
            records = self.workers.registry.current()
            self._here = {r.session_id for r in records if r.host == self.host}
        return self._here

    # -- the look ------------------------------------------------------------------------------

    def sessions(self) -> dict[str, SessionTarget]:
        """Every session of this project, by session id: the workers and the controller."""
        if self.seen is None:
            self.seen = self._look()
        return self.seen

    def _look(self) -> dict[str, SessionTarget]:
        return observe_sessions(self.project, self.workers)

    def _known(self, session_id: str) -> bool:
        """Whether Legion started this session in this project (a worker it has a record of,
        or the controller): an agent whose session it never started is nobody's to judge."""
        if session_id == self.controller_session:
            return True
        return self.workers.roster.record_of(session_id) is not None

    # -- statuses ------------------------------------------------------------------------------

    def sync_statuses(
        self, detail: str = "observed", *, stopped: bool = False, all_closed: bool = False
    ) -> None:
        """Keep each agent's status on the bus true to its session (busy, idle, blocked on a
        question, failed when its process is not running); what an agent said of itself
        (complete, archived, blocked by `legion ask`) stands until it is prompted again.
        `detail`: why, in the status event (`observed`, or who stopped the sessions);
        `stopped`: a clean stop ended them, so a session not running is stopped, not failed;
        `all_closed`: the caller has just closed every session of the project, so none runs,
        known without a look (tmux's server may still be going, and not answer)."""
        settled = (AgentStatus.COMPLETE, AgentStatus.ARCHIVED)
        agents = [a for a in self.agents(include_archived=False) if a.status not in settled]
        if not agents:
            return
        sessions = {} if all_closed else self.sessions()
        for listed in agents:
            assert listed.session_id is not None
            if not self._known(listed.session_id):
                continue
            # Read again after the look: a worker Legion retires is marked complete before its
            # window closes, so a look that saw the window gone sees the mark here.
            agent = self.bus.agent(listed.id)
            if agent.session_id != listed.session_id:
                continue  # started again meanwhile: the next look judges the new session
            target = sessions.get(listed.session_id)
            state = SessionState.DEAD if all_closed else (target.state if target else None)
            waiting = agent.status is AgentStatus.BLOCKED and bool(
                self.bus.unanswered_asks(agent.id)
            )
            status = observed_status(agent.status, state, waiting)
            if stopped and status is AgentStatus.FAILED:
                status = AgentStatus.STOPPED
            if status is not None and status is not agent.status:
                self.bus.update_agent(agent.id, status=status, detail=detail)

    # -- delivery ------------------------------------------------------------------------------

    def deliver(self, only: Iterable[int] | None = None) -> dict[int, Handed]:
        """Hand each pending message to the agents of this project it addresses (`only`: to
        these agents' ids), as `legion.bus.delivery` says: queued for a busy (or blocked)
        session's hooks, typed into an idle one, a dead worker's session resumed with it (when
        `resume`). What became of each agent's messages, by agent id."""
        wanted = None if only is None else set(only)
        agents = [a for a in self.agents(include_archived=True) if wanted is None or a.id in wanted]
        door = WatchedSessions(
            self.project, self.workers, self.sessions, self.controller_session, self.paused
        )
        delivery = Delivery(self.bus, door, resume=self.resume, journal=self._journal)
        handed = delivery.deliver(agents)
        self.retry_in = delivery.retry_in
        return handed

    def _journal(self, handover: Handover) -> None:
        """Typing and resuming are the watcher's actions, in the action log."""
        agent, count = handover.agent, handover.count
        if handover.resumed:
            record = self.workers.roster.record_of(agent.session_id or "")
            issue = record.issue if record is not None else "-"
            summary = f"resumed @{agent.address} with {count} message(s)"
        else:
            issue, summary = "-", f"{count} to @{agent.address}"
        self.log.append(issue, "deliver_messages", OutcomeKind.DONE, summary)


class WatchedSessions:
    """The project's sessions as delivery reaches them (a `legion.bus.delivery.SessionDoor`):
    the watcher's look, tmux to type into a window, the worker manager to resume a worker."""

    def __init__(
        self,
        project: Project,
        workers: WorkerManager,
        sessions: Callable[[], dict[str, SessionTarget]],
        controller_session: str,
        paused: Callable[[], str | None],
    ) -> None:
        self.project = project
        self.workers = workers
        self.sessions = sessions
        self.controller_session = controller_session
        self.paused = paused

    def look(self, agent: Agent) -> SessionAt:
        assert agent.session_id is not None
        target = self.sessions().get(agent.session_id)
        inbox = self.workers.supervisor.inbox_file(agent.session_id)
        if target is None:
            transcript = self.workers.runtimes.of_session(agent.session_id).transcript(
                self._workspace_of(agent.session_id), agent.session_id
            )
            return SessionAt(Reach.DOWN, transcript, inbox, None)
        if target.state is SessionState.DEAD or target.window_id is None:
            reach = Reach.DOWN
        elif target.state is SessionState.IDLE:
            reach = Reach.IDLE
        else:
            reach = Reach.BUSY  # running, or waiting on a question (typing would answer it)
        return SessionAt(reach, target.transcript, inbox, target.last_activity)

    def _workspace_of(self, session_id: str) -> Path:
        record = self.workers.roster.record_of(session_id)
        return record.workspace if record is not None else self.project.root

    def type_confirmed(self, session_id: str, text: str) -> bool:
        target = self.sessions()[session_id]
        assert target.window_id is not None
        mark = transcript_size(target.transcript)
        windows = self.workers.windows
        return windows.type_prompt(target.window_id, text, target.transcript, mark)

    def why_not_resumed(self, session_id: str) -> str | None:
        if session_id == self.controller_session:
            return "the controller is not running (it is restarted, then given the message)"
        if self.workers.roster.record_of(session_id) is None:
            return NO_LIVE_SESSION
        paused = self.paused()
        if paused is not None:
            return f"not resumed while dispatch is paused: {paused}"
        return None

    def resume_with(self, session_id: str, text: str) -> None:
        record = self.workers.roster.record_of(session_id)
        if record is None:
            raise NotFoundError(NO_LIVE_SESSION)
        from legion.reconcile import resume_worker  # its `worker-active` is the reconciler's

        resume_worker(self.workers, self.workers.tracker, record.issue, record.mode, text)


# -- watching without a daemon ---------------------------------------------------------------------


def watched(project: Project) -> bool:
    """Whether a daemon watches `project`: one runs on this machine, or (with a PostgreSQL
    store) its fleet has a leader, on whatever host, which delivers every message and keeps the
    statuses true. A watcher here would see none of that host's sessions, and call them dead."""
    if running_pid(project) is not None:
        return True
    if not in_fleet(project.settings):
        return False
    from legion.fleet.hosts import Fleet
    from legion.store import open_store

    try:
        store = open_store(project)
    except LegionError:
        return False  # unreachable: no daemon reaches it either
    try:
        return Fleet(store).leader() is not None
    except LegionError:
        return False
    finally:
        store.close()


@contextlib.contextmanager
def unwatched(
    project: Project, bus: Bus, env: Mapping[str, str], *, timeout: float
) -> Iterator[Watcher | None]:
    """A watcher of `project` for a process that is not its daemon, holding its watch lock;
    None when a daemon watches it (`watched`) or the lock is not had within `timeout`
    seconds (another watcher is at it)."""
    from legion.backends import open_backends, open_workers

    if watched(project):
        yield None
        return
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(watch_lock(project, timeout=timeout))
        except ConflictError:
            yield None
            return
        if running_pid(project) is not None:  # started while we waited: it watches
            yield None
            return
        backends = open_backends(project)
        stack.callback(backends.db.close)
        workers = open_workers(project, backends, env)
        yield Watcher(project, workers, bus, ActionLog(backends.db), resume=False)


def deliver_now(
    project: Project,
    bus: Bus,
    env: Mapping[str, str],
    agent_ids: Iterable[int],
    *,
    within: float = 10.0,
) -> dict[int, Handed] | None:
    """Hand the pending messages of these agents of `project` over now, as its daemon would,
    when no daemon runs for it: typed into an idle session, queued for a busy one's hooks; a
    dead session's wait for `legion start`. Tries again while a session has only just ended
    its turn or did not take the prompt, for up to `within` seconds. None when a daemon runs
    (it delivers); else what became of each agent's messages (an agent with nothing pending
    is not in it: its messages are delivered)."""
    wanted = set(agent_ids)
    deadline = time.monotonic() + within
    outcome: dict[int, Handed] = {}
    while True:
        with unwatched(project, bus, env, timeout=max(0.0, deadline - time.monotonic())) as w:
            if w is None:
                if watched(project):
                    return None
                # Another watcher held the lock all along (an open TUI, delivering it).
                return outcome | {agent_id: Handed.NOT_TAKEN for agent_id in wanted}
            handed = w.deliver(wanted)
        outcome |= handed
        again = {
            agent_id
            for agent_id, how in handed.items()
            if how in (Handed.SETTLING, Handed.NOT_TAKEN)
        }
        if not again or time.monotonic() + SETTLE_S >= deadline:
            return outcome
        wanted = again
        time.sleep(SETTLE_S if Handed.SETTLING in handed.values() else 0.2)


def observe(
    project: Project,
    bus: Bus,
    env: Mapping[str, str],
    detail: str = "observed",
    *,
    timeout: float = 5.0,
    stopped: bool = False,
) -> bool:
    """Make the statuses of `project`'s agents true to their sessions now, when no daemon runs
    for it (a running daemon does it every tick), waiting up to `timeout` seconds for another
    watcher. False when it could not be done now."""
    with unwatched(project, bus, env, timeout=timeout) as watcher:
        if watcher is None:
            return watched(project)
        watcher.sync_statuses(detail, stopped=stopped)
        return True


def close_and_mark(
    project: Project,
    bus: Bus,
    env: Mapping[str, str],
    close: Callable[[], bool],
    detail: str,
    *,
    timeout: float = 30.0,
) -> bool:
    """Close the project's sessions (`close`: whether there were any) and mark their agents
    with `detail`, both under the watch lock: no other watcher (a closing session's own hook,
    an open TUI) reads them dead in between and calls them only "observed"."""
    with unwatched(project, bus, env, timeout=timeout) as watcher:
        closed = close()
        if watcher is not None:
            watcher.sync_statuses(detail, stopped=True, all_closed=closed)
        return closed


def watch(project: Project, bus: Bus, env: Mapping[str, str], *, statuses: bool = True) -> None:
    """One pass of a watcher that is not the daemon (the TUI's): statuses (unless not
    `statuses`), then deliveries, on one look; nothing when a daemon runs or another watcher
    is at it."""
    with unwatched(project, bus, env, timeout=0.0) as watcher:
        if watcher is not None:
            if statuses:
                watcher.sync_statuses()
            watcher.deliver()


# Statuses a look can change (complete and archived stand; failed changes only when the
# session runs again, and starting it registers it busy).
_LIVE = (AgentStatus.BUSY, AgentStatus.IDLE, AgentStatus.BLOCKED)


def projects_to_watch(
    bus: Bus, names: Iterable[str] | None = None, *, statuses: bool = True
) -> dict[str, Path]:
    """Where each project lives that has a message pending for a running agent, or (with
    `statuses`) an agent whose status a look could change or a message pending for any agent
    with a session that has not failed (`names`: of these projects only)."""
    wanted = None if names is None else set(names)
    roots = bus.projects()
    found: dict[str, Path] = {}
    for agent in bus.agents(include_archived=True):
        if not agent.session_id or agent.project in found:
            continue
        if wanted is not None and agent.project not in wanted:
            continue
        root = roots.get(agent.project)
        if root is None:
            continue
        live = agent.status in _LIVE
        reachable = live or (
            statuses and agent.status not in (AgentStatus.FAILED, AgentStatus.STOPPED)
        )
        if (statuses and live) or (
            reachable and bus.pending_deliveries(recipient_id=agent.id, limit=1)
        ):
            found[agent.project] = root
    return found


def load(root: Path, env: Mapping[str, str]) -> Project | None:
    """The project at `root`, or None when it cannot be opened (moved, deleted, broken)."""
    from legion.config import load_project

    try:
        project = load_project(root, env)
    except (LegionError, OSError):
        return None
    return project


def observe_all(bus: Bus, env: Mapping[str, str], names: Iterable[str] | None = None) -> None:
    """Make true the statuses of every project's agents (`names`: these projects') that no
    daemon watches. A project that cannot be opened or looked at is left as it was."""
    for name, root in projects_to_watch(bus, names).items():
        project = load(root, env)
        if project is None or project_channel_name(project, bus) != name:
            continue
        with contextlib.suppress(LegionError):
            observe(project, bus, env)
