"""Acting on workers: dispatching one (one live worker per issue, in the issue's workspace),
giving one a new prompt (typed in, or by resuming its session), answering its question,
retiring it. Under a lock file, so two `legion` processes never start two workers for one
issue.

`WorkerManager` is the one entry point callers hold for the workers: beside its actions it
carries the pieces it is made of, each with one job: `runtimes` (which CLI a session runs on),
`roster` (the workers as observed: views, tokens, screens, records), `windows` (the project's
tmux windows), `supervisor` (starting and stopping any session), `starts` (waiting for
starts), `setup` (the workspace setup a start passes: `legion.sessions.setup_gate`), `issues`
(an issue's workspace here, taken over from another host: `legion.sessions.takeover`) and
`fleet` (what this host asks of the fleet's others: `legion.sessions.fleet_asks`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from legion.bus.model import AgentStatus
from legion.bus.postgres_schema import WAKE_CHANNEL
from legion.config import Project
from legion.core.admission import StartFacts, refusal
from legion.core.decide import session_mode
from legion.core.ids import session_id
from legion.core.liveness import SessionState
from legion.core.model import Mode, normalize_identifier
from legion.diagnostics.faults import fault_point
from legion.diagnostics.tracing import span
from legion.errors import ConflictError, InputError, LegionError, WorkerStartError
from legion.files.locking import exclusive
from legion.fleet.hosts import fleet_host, host_name
from legion.relay.capabilities import Capabilities
from legion.runtime.base import AgentRuntime
from legion.runtime.tmux import Tmux, Window
from legion.sessions.fleet_asks import FleetAsks
from legion.sessions.placement import HostCommand, HostSessions
from legion.sessions.prompting import transcript_size
from legion.sessions.registry import Registry, WorkerRecord
from legion.sessions.roster import WorkerRoster, WorkerView
from legion.sessions.runtimes import RuntimeChoice
from legion.sessions.setup_gate import SetupGate
from legion.sessions.start_watch import StartWatch
from legion.sessions.supervisor import SessionSupervisor
from legion.sessions.takeover import IssueWorkspaces
from legion.sessions.windows import SessionWindows
from legion.store import in_fleet
from legion.trackers.base import Tracker
from legion.workspaces.base import Workspaces

# What a caller holds around a worker's start or prompt: the workflow's mark that a worker is
# on the issue (`legion.reconcile.worker_active`); the session layer writes no labels.
Marker = Callable[[str], AbstractContextManager[None]]


def window_name(issue: str, mode: Mode) -> str:
    return f"{normalize_identifier(issue).lower()}-{mode.value}"


def _revoke_before(capabilities: Capabilities) -> Callable[[str, str], object]:
    """A session's capabilities minted before an instant, revoked (`SessionWindows.end_exited`)."""

    def revoke(session_id: str, before: str) -> int:
        return capabilities.revoke_session(session_id, minted_before=before)

    return revoke


class WorkerManager:
    def __init__(
        self,
        project: Project,
        tracker: Tracker,
        registry: Registry,
        tmux: Tmux,
        workspaces: Workspaces,
        runtime: AgentRuntime,
        env: Mapping[str, str],
        capabilities: Capabilities | None = None,
        runtimes: Mapping[str, AgentRuntime] | None = None,
        relay: bool = False,
    ) -> None:
        """`runtime`: the agent CLI of a session whose own is unknown; `runtimes`: every CLI a
        role can be configured to run on, by name (the `runtime`/`runtimes` settings choose).
        `workspaces`: where a worker's issue is checked out (only dispatch and resume need it).
        `capabilities`: where each session's capability is minted (None: sessions get none);
        `relay`: whether sessions reach the tracker and forge through the daemon."""
        self.project = project
        self.tracker = tracker
        self.registry = registry
        self.env = env
        self.capabilities = capabilities
        self.runtimes = RuntimeChoice(project.settings, registry, runtime, runtimes)
        self.windows = SessionWindows(
            project,
            tmux,
            None if capabilities is None else capabilities.revoke_session,
            None if capabilities is None else _revoke_before(capabilities),
        )
        self.starts = StartWatch(self.windows)
        self.supervisor = SessionSupervisor(
            project, self.windows, self.starts, env, capabilities, relay=relay
        )
        self.roster = WorkerRoster(
            registry,
            self.windows,
            self.runtimes,
            env,
            here=fleet_host(project.settings),
            host_timeout=project.settings.host_timeout,
        )
        self._workspaces = workspaces
        # The fleet's name for this machine, recorded with each worker it starts.
        self.host = host_name(project.settings)
        # In a fleet, the shared remote its hosts' checkpoints go to (`legion.fleet.hosts`).
        self.in_fleet = in_fleet(project.settings)
        self.shared_remote = project.settings.remote if self.in_fleet else None
        # The epoch this host leads the fleet under (set by the daemon while it leads): only a
        # leader places workers on other hosts.
        self.leading_epoch: int | None = None
        notify = f"SELECT pg_notify('{WAKE_CHANNEL}', ?)" if self.in_fleet else None
        self.placement = HostSessions(registry.db, notify)
        self.fleet = FleetAsks(
            project, registry, self.placement, self.host, self.in_fleet, lambda: self.leading_epoch
        )
        self.issues = IssueWorkspaces(
            project, tracker, workspaces, self.runtimes, self.host, self.shared_remote
        )
        self.setup = SetupGate(project, tracker, self.supervisor)

    @property
    def workspaces(self) -> Workspaces:
        """Where this host checks issues out."""
        return self._workspaces

    def _lock(self) -> AbstractContextManager[None]:
        return exclusive(self.project.state_dir / "workers.lock")

    def dispatch(
        self, issue: str, mode: Mode, *, marked: Marker, wait: bool = True, asked: bool = False
    ) -> WorkerView:
        """Start `mode`'s worker for `issue` in the issue's workspace; one live worker per issue.
        `marked`: the workflow's mark that a worker is on the issue (the reconciler's
        `worker_active`), held from after the worker is recorded until its window runs.

        With `wait`, return once its session has begun; without, the caller collects the start
        with `starts.await_starts()` (so that a reconcile pass starts several workers at once).
        `asked`: a person asked for it (`legion dispatch`): a failed workspace setup is tried
        again at once. While the workspace's setup runs (or backs off) the start raises
        SetupPendingError (`legion.workspaces.setup`)."""
        with span("start: look up issue", issue):
            identifier = self.tracker.get_issue(issue).identifier
        # Before its workspace or its record exists: the CLI there, then a daemon to host it.
        self.runtimes.for_worker(identifier, mode).executable()
        self.supervisor.require_daemon()
        with self._lock():
            with span("start: look at workers", identifier):
                views = self.roster.views_of(identifier)
            live = [view for view in views if view.state.is_live]
            shown = f"{live[0].record.window} ({live[0].state.value})" if live else None
            refused = refusal(StartFacts(issue=identifier, mode=mode, live_worker=shown))
            if refused is not None:
                raise ConflictError(refused.detail)
            prompt = self.worker_prompt(identifier, mode)
            seen = frozenset(view.record.id for view in views)
            return self._start_placed(identifier, mode, prompt, wait, marked, seen, asked=asked)

    def worker_prompt(self, issue: str, mode: Mode) -> str:
        """How `mode`'s worker on `issue` is told to use its skill, on the CLI it runs on."""
        identifier = normalize_identifier(issue)
        return self.runtimes.for_worker(identifier, mode).worker_prompt(identifier, mode)

    def resume(
        self, issue: str, mode: Mode, prompt: str, *, marked: Marker, wait: bool = True
    ) -> WorkerView:
        """Give the session of `issue` in `mode` a new prompt: typed into its window when it
        runs, else by restarting it with `--resume` in a new window. `marked`: as `dispatch`'s,
        held while the prompt is typed."""
        if not prompt.strip():
            raise InputError("the prompt is empty")
        with span("start: look up issue", issue):
            identifier = self.tracker.get_issue(issue).identifier
        sid = session_id(self.project.settings.project_id, identifier, session_mode(mode))
        with self._lock():
            with span("start: look at workers", identifier):
                views = self.roster.views_of(identifier)
            running = [v for v in views if v.record.session_id == sid and v.state.is_live]
            live = [v for v in views if v.state.is_live]
            window = running[0].window if running else None
            elsewhere = bool(running) and running[0].record.host not in ("", self.host)
            if running and (window is not None or elsewhere):
                view = running[0]
                if view.state is SessionState.BLOCKED:
                    raise ConflictError(
                        f"{identifier}'s worker is waiting for an answer to its question: "
                        "use `legion answer`"
                    )
                with marked(identifier):
                    if window is not None:
                        self.windows.send_text(window.id, prompt)
                    else:
                        self.fleet.ask_type(view.record, prompt)
                self.supervisor.bring_back(sid)  # prompted again: archived no more
                return view
            if live:
                raise ConflictError(
                    f"{identifier} has another live worker: window {live[0].record.window}; "
                    "see `legion workers`"
                )
            # A new window, not typed into a running one: the CLI there, a daemon to host it.
            self.runtimes.for_worker(identifier, mode).executable()
            self.supervisor.require_daemon()
            seen = frozenset(view.record.id for view in views)
            return self._start_placed(identifier, mode, prompt, wait, marked, seen)

    def _start_placed(
        self,
        identifier: str,
        mode: Mode,
        prompt: str,
        wait: bool,
        marked: Marker,
        seen: frozenset[int],
        *,
        asked: bool = False,
    ) -> WorkerView:
        """Start the worker on the host placement picks: here, in this host's workspace, or
        on another host of the fleet, asked through the store. `seen`: the issue's records the
        caller found no live worker in (`Registry.start`)."""
        latest = self.registry.latest(identifier)
        from_host = latest.host if latest is not None else ""
        host = self.fleet.place(identifier, from_host)
        if host != self.host:
            assert self.leading_epoch is not None
            record = self._record(identifier, mode, Path(), host, seen)
            with marked(identifier):
                return self.fleet.ask_start(host, record, prompt, from_host)
        with span("start: workspace", identifier):
            workspace = self.issues.workspace(identifier, from_host)
        with span("start: workspace setup", identifier):
            self.setup.gate(identifier, workspace, asked=asked)
        return self._start(identifier, mode, workspace, prompt, wait, marked, seen)

    def type_asked(self, command: HostCommand) -> str:
        """Type the prompt the leader asked this host to give a live worker of its own,
        confirmed by its transcript. How it went, in a line."""
        record = self.fleet.asked_of_me(command)
        if record is None:
            return "not typed: the worker is no longer this host's"
        with self._lock():
            window = self.windows.live_window(record.session_id)
            if window is None:
                return "not typed: its session does not run here"
            transcript = self.runtimes.of(record).transcript(record.workspace, record.session_id)
            mark = transcript_size(transcript)
            taken = self.windows.type_prompt(window.id, command.prompt, transcript, mark)
        return f"typed into {record.window}" if taken else f"not taken by {record.window}"

    def start_asked(self, command: HostCommand) -> str:
        """Carry out a start the leader asked of this host: the workspace (restored from the
        issue's last checkpoint when the issue moved here), its setup, the window, the session.
        How it went, in a line. While the workspace's setup runs or backs off, raises
        SetupPendingError (`SetupGate.gate`): the command stays pending, tried again at this host's
        next pass (`legion.daemon.host_step`)."""
        record = self.fleet.asked_of_me(command)
        if record is None:
            return "not started: the worker is no longer this host's"
        issue = record.issue
        # A start tried again (its setup ran meanwhile) took the issue over the first time: the
        # workspace it recorded is this host's now, not to be restored again under its setup.
        from_host = self.host if record.workspace != Path() else command.from_host
        with self._lock():
            with span("start: workspace", issue):
                workspace = self.issues.workspace(issue, from_host)
            if record.workspace != workspace:  # (written once, not at each try)
                self.placement.placed(record.id, workspace)
            with span("start: workspace setup", issue):
                self.setup.gate(issue, workspace)
            self._open(record, workspace, command.prompt, wait=False)
        return f"started {record.window} in {workspace}"

    def issue_sessions(self, issue: str) -> list[tuple[Mode, str]]:
        """Each session an issue's workers run in, with the first mode that runs in it (retro
        resumes the implementer's): `IssueWorkspaces.sessions`."""
        return self.issues.sessions(issue)

    def issue_transcripts(self, issue: str, workspace: Path) -> dict[str, Path]:
        """Where this host's CLIs keep each session of the issue's workers in `workspace`
        (`IssueWorkspaces.transcripts`)."""
        return self.issues.transcripts(issue, workspace)

    def retire(self, view: WorkerView) -> None:
        """Close a worker's window (its session stays resumable) and retire its record.

        Legion closes a live worker's window only when its mode is done: its agent is marked
        complete first, so whoever looks while the window is gone and the record not yet
        retired never takes it for a worker that died."""
        issue = view.record.issue
        if view.state.is_live:
            detail = f"retired: {view.record.window}"
            with span("retire: mark complete on the bus", issue):
                self.supervisor.mark_on_bus(view.record.session_id, AgentStatus.COMPLETE, detail)
        if view.window is not None:
            with span("retire: close window", issue):
                self.windows.close_retired(view.window)
        fault_point("worker_window_closed")
        with span("retire: revoke, forget", issue):
            self.windows.end(view.record.session_id)  # done by its close too; none may be left
            self.registry.retire(view.record.id)

    def _start(
        self,
        issue: str,
        mode: Mode,
        workspace: Path,
        prompt: str,
        wait: bool,
        marked: Marker,
        seen: frozenset[int],
    ) -> WorkerView:
        # Recorded before `worker-active` goes on and before the window exists: a crash after
        # the label leaves a record of a dead worker, which the next pass restarts in the mode
        # recorded (the latest record says which worker `worker-active` names), never a worker
        # nobody knows about. A crash before the label leaves a dead record nobody expects,
        # which the next pass forgets.
        record = self._record(issue, mode, workspace, self.host, seen)
        fault_point("after_registry_start")
        with marked(issue):
            return self._open(record, workspace, prompt, wait=wait)

    def _record(
        self, issue: str, mode: Mode, workspace: Path, host: str, seen: frozenset[int]
    ) -> WorkerRecord:
        """The worker recorded as `mode`'s on `issue`, on `host` (in `workspace`: Path() when
        another host's, recorded once it starts there)."""
        sid = session_id(self.project.settings.project_id, issue, session_mode(mode))
        runtime = self.runtimes.for_worker(issue, mode)
        with span("start: record", issue):
            return self.registry.start(
                issue,
                mode,
                sid,
                window_name(issue, mode),
                workspace,
                runtime.name,
                host=host,
                seen=seen,
            )

    def _open(
        self, record: WorkerRecord, workspace: Path, prompt: str, *, wait: bool
    ) -> WorkerView:
        """Open the recorded worker's window on this host and start its session there."""
        issue, mode, sid = record.issue, record.mode, record.session_id
        runtime = self.runtimes.of(record)
        transcript = runtime.transcript(workspace, sid)
        size_before = transcript_size(transcript)
        try:
            window_id = self.supervisor.start_session_window(
                record.window,
                sid,
                prompt,
                workspace,
                {"LEGION_ISSUE_ID": issue, "LEGION_MODE": mode.value, "LEGION_SESSION_ID": sid},
                issue=issue,
                runtime=runtime,
            )
        except BaseException:
            self.registry.retire(record.id)
            raise
        fault_point("after_window_started")
        self.starts.expect(issue, window_id, transcript, size_before, runtime)
        if wait:
            failures = self.starts.await_starts()
            if failures:
                raise WorkerStartError(failures[0][1])
        window = Window(window_id, record.window, False, None, "", sid)
        return WorkerView(record, window, SessionState.RUNNING, transcript, None, None)

    def answer(self, issue: str, answers: Sequence[str], *, timeout: float = 15.0) -> WorkerView:
        """Answer the question a blocked worker asked, through its question screen.

        Under the workers' lock, until the worker has taken the answer: a second answer (or a
        resume) waits, then finds the question answered instead of typing into a session that
        has moved on."""
        identifier = normalize_identifier(issue)
        with self._lock():
            return self._answer(identifier, answers, timeout)

    def _answer(self, identifier: str, answers: Sequence[str], timeout: float) -> WorkerView:
        blocked = [
            view
            for view in self.roster.views_of(identifier)
            if view.state is SessionState.BLOCKED
            and view.question
            and (view.window or view.record.host not in ("", self.host))
        ]
        if not blocked:
            raise ConflictError(f"{identifier} has no worker waiting for an answer")
        view = blocked[0]
        if view.window is None:
            return self.fleet.ask_answer(view, answers, timeout)
        assert view.question is not None
        runtime = self.runtimes.of(view.record)
        runtime.answer_question(self.windows.tmux, view.window.id, view.question, answers)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            summary = runtime.summarize(view.transcript)
            pending = summary.pending_question if summary else None
            if pending is None or pending.tool_use_id != view.question.tool_use_id:
                return view
            time.sleep(0.1)
        raise ConflictError(
            f"the answer was typed into {view.record.window}, but the worker has not taken it yet; "
            "check with `legion peek`"
        )

    def answer_asked(self, command: HostCommand) -> str:
        """Answer the question of a worker of this host, as another host asked. How it went."""
        record = self.fleet.asked_of_me(command)
        if record is None:
            return "not answered: the worker is no longer this host's"
        try:
            answers = [str(answer) for answer in json.loads(command.prompt)]
        except (ValueError, TypeError):
            return "not answered: the answers were not a list"
        view = self.answer(record.issue, answers)
        return f"answered in {view.record.window}"

    def close_now(self) -> bool:
        """Close every session this host runs now, so none may run on once another host may
        start it under the same id: its tmux session closes (a hangup each), and what of a
        session still runs then is killed at once (SIGKILL), not given the grace a hangup
        gets elsewhere. Whether there was a tmux session to close."""
        try:
            ending = [window.tag for window in self.windows.list() if window.tag]
        except LegionError:
            ending = []  # tmux does not answer: its session is closed all the same, if it can
        closed = self.windows.close_all()
        for sid in ending:
            self.supervisor.stop_stray(sid, force=True)
        return closed

    def forget(self, record: WorkerRecord) -> None:
        """Retire a worker's record without touching its window (the end of a demo)."""
        self.registry.retire(record.id)
