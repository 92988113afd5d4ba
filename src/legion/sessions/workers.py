"""Workers: agent sessions (Claude Code or Codex) in tmux windows, one workspace per issue.

Observing a worker combines three sources: the registry (what Legion started), tmux (is the
window there, is its process alive) and the transcript (mid-turn, waiting for input, or
waiting on a question). Starting, resuming and answering are serialized by a lock file, so
two `legion` processes never start two workers for one issue.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from legion.bus.model import Agent, AgentStatus
from legion.config import Project
from legion.core.decide import session_mode
from legion.core.ids import session_id, short_id
from legion.core.liveness import SessionState, transcript_grew
from legion.core.model import Mode, normalize_identifier
from legion.core.task_list import TaskList
from legion.core.usage import Usage
from legion.errors import (
    ConfigError,
    ConflictError,
    InputError,
    NotFoundError,
    TmuxError,
    TmuxUnavailable,
    WorkerStartError,
)
from legion.faults import fault_point
from legion.locking import exclusive
from legion.relay import CAPABILITY_ENV, SOCKET_ENV, socket_path
from legion.relay.capabilities import Capabilities
from legion.runtime import launch
from legion.runtime.base import AgentRuntime
from legion.runtime.tmux import Attach, Tmux, Window, process_args, session_processes, wait_for_exit
from legion.runtime.transcript import PendingQuestion
from legion.sessions import prompting
from legion.sessions.observer import CONTROLLER_WINDOW, classify
from legion.sessions.prompting import transcript_size
from legion.sessions.registry import Registry, WorkerRecord
from legion.statefiles import write_private
from legion.trackers.base import Tracker
from legion.workspaces.base import Workspaces

# Variables of the dispatcher that must not reach a worker: tmux's would make the CLI think it
# runs in the dispatcher's pane; those a Claude Code session sets for its tools' processes
# would make a worker started by the controller (from its Bash tool) take itself for the
# controller's child: another session id, another transcript.
# Legion's own tracker and forge credentials stay out too: a worker runs model-written
# commands, so Legion, not the worker, holds them (its `legion` asks the daemon: see
# `legion.relay`). So does the capability of whoever starts the session (the controller's
# covers the whole project): each session is given its own.
_DROP_FROM_ENV = (
    "TMUX",
    "TMUX_PANE",
    "CLAUDECODE",
    "CLAUDE_PID",
    "CLAUDE_EFFORT",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "LINEAR_API_KEY",
    CAPABILITY_ENV,
    SOCKET_ENV,
)
_DROP_PREFIXES = (
    "CLAUDE_CODE_CHILD_",
    "CLAUDE_CODE_SESSION_",
    "CLAUDE_CODE_MESSAGING_",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_EXECPATH",
)


def inheritable(name: str) -> bool:
    return name not in _DROP_FROM_ENV and not name.startswith(_DROP_PREFIXES)


START_TIMEOUT_S = 30.0
ANCHOR_WINDOW = "legion"


@dataclass(frozen=True)
class WorkerView:
    record: WorkerRecord
    window: Window | None
    state: SessionState
    transcript: Path
    last_activity: float | None
    question: PendingQuestion | None

    def to_json(self, now: float) -> dict[str, Any]:
        age = None if self.last_activity is None else round(max(0.0, now - self.last_activity), 1)
        question = None
        if self.question is not None:
            question = {
                "text": self.question.text,
                "items": [
                    {
                        "question": item.question,
                        "header": item.header,
                        "options": list(item.options),
                        "multi_select": item.multi_select,
                    }
                    for item in self.question.items
                ],
            }
        return {
            "issue": self.record.issue,
            "mode": self.record.mode.value,
            "session_id": self.record.session_id,
            "runtime": self.record.runtime,
            "window": self.record.window,
            "state": self.state.value,
            "workspace": str(self.record.workspace),
            "transcript": str(self.transcript),
            "transcript_age_s": age,
            "question": question,
            "started_at": self.record.started_at,
        }


@dataclass(eq=False)
class _Starting:
    """A worker window whose session has not yet recorded its first prompt."""

    issue: str
    window_id: str
    transcript: Path
    size_before: int
    runtime: AgentRuntime
    answered_at: float = 0.0  # when keys last went to a first-run dialog


_PANE_DEAD = re.compile(r"^Pane is dead \((status|signal) (\d+)")


def start_failure(screen: str) -> str:
    """Pure: why a worker whose process ended at once did, from its last screen: its own last
    line of output, and the exit status (or signal) tmux noted under it."""
    lines = [line.strip() for line in screen.splitlines() if line.strip()]
    how = ""
    if lines and (dead := _PANE_DEAD.match(lines[-1])):
        how = f" ({'exit status' if dead[1] == 'status' else 'signal'} {dead[2]})"
        lines.pop()
    said = lines[-1] if lines else "(no output)"
    return f"the worker exited as it started{how}: {said}"


# What a caller holds around a worker's start or prompt: the workflow's mark that a worker is
# on the issue (`legion.reconcile.worker_active`); the session layer writes no labels.
Marker = Callable[[str], AbstractContextManager[None]]


def window_name(issue: str, mode: Mode) -> str:
    return f"{normalize_identifier(issue).lower()}-{mode.value}"


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
    ) -> None:
        """`runtime`: the agent CLI of a session whose own is unknown; `runtimes`: every CLI a
        role can be configured to run on, by name (the `runtime`/`runtimes` settings choose).
        `capabilities`: where each session's relay capability is minted, when the project's
        sessions reach the tracker and forge through the daemon (None: they need none)."""
        self.project = project
        self.tracker = tracker
        self.registry = registry
        self.tmux = tmux
        self.workspaces = workspaces
        self.runtime = runtime
        self.runtimes: dict[str, AgentRuntime] = dict(runtimes or {})
        self.runtimes.setdefault(runtime.name, runtime)
        self.env = env
        self.capabilities = capabilities
        self._starting: list[_Starting] = []
        # The daemon's "stop now": a wait for starts ends as soon as it says so.
        self.should_stop: Callable[[], bool] = lambda: False
        self._handovers: dict[str, launch.Handover] = {}  # window id: its spec, on its way

    @property
    def session(self) -> str:
        return f"legion-{short_id(self.project.settings.project_id)}"

    # -- which agent CLI ----------------------------------------------------------------------

    def runtime_named(self, name: str) -> AgentRuntime:
        found = self.runtimes.get(name)
        if found is None:
            raise ConfigError(
                f"no agent runtime named {name!r} (known: {', '.join(sorted(self.runtimes))})"
            )
        return found

    def runtime_for(self, role: str) -> AgentRuntime:
        """The CLI configured for `role` (a session mode, or `controller`)."""
        return self.runtime_named(self.project.settings.runtime_for(role))

    @property
    def controller_runtime(self) -> AgentRuntime:
        return self.runtime_for("controller")

    def runtime_of(self, record: WorkerRecord) -> AgentRuntime:
        """The CLI a worker's session runs on (as recorded when it started)."""
        return self.runtimes.get(record.runtime, self.runtime)

    def task_list(self, record: WorkerRecord) -> TaskList | None:
        """The worker's own task list, as its CLI keeps it (Claude Code's TaskCreate files);
        None when it has none. Read with the sessions' environment, so a project that names
        its CLI's home (the demo's) shows its workers' lists to whoever asks."""
        return self.runtime_of(record).task_list(self.env, record.session_id)

    def runtime_of_session(self, sid: str) -> AgentRuntime:
        """The CLI session `sid` runs on: its worker's, else (the controller) the controller's."""
        record = self.registry.by_session(sid)
        return self.controller_runtime if record is None else self.runtime_of(record)

    def in_use(self) -> list[AgentRuntime]:
        """The CLIs the configured roles run on, each once."""
        from legion.config import RUNTIME_ROLES

        names = dict.fromkeys(self.project.settings.runtime_for(role) for role in RUNTIME_ROLES)
        return [self.runtime_named(name) for name in names]

    # -- observing -----------------------------------------------------------------------------

    def views(self) -> list[WorkerView]:
        """Every worker in the registry, with its state. Raises `TmuxUnavailable` when tmux
        cannot say which windows run: that is unknown, never "all dead"."""
        records = self.registry.current()
        if not records:
            return []
        windows = {window.name: window for window in self.tmux.list_windows(self.session)}
        views = []
        for record in records:
            window = windows.get(record.window)
            alive = window is not None and not window.pane_dead
            runtime = self.runtime_of(record)
            transcript = runtime.transcript(self.env, record.workspace, record.session_id)
            summary = runtime.summarize(transcript) if alive else None
            state = classify(alive, summary)
            question = summary.pending_question if summary is not None else None
            views.append(
                WorkerView(
                    record,
                    window,
                    state,
                    transcript,
                    runtime.last_activity(transcript),
                    question,
                )
            )
        return views

    def usage(self, issue: str | None = None) -> dict[str, dict[str, Usage]]:
        """Tokens by issue and phase (mode), from the sessions' own records: each worker's
        share of its session's transcript is the responses recorded from its start to the
        next start of the same session (a retro resumes the implementer's session, a
        resumed worker is a new record). `issue`: that issue's only."""
        wanted = None if issue is None else normalize_identifier(issue)
        by_session: dict[str, list[WorkerRecord]] = {}
        for record, _ in self.registry.history():
            if wanted is None or record.issue == wanted:
                by_session.setdefault(record.session_id, []).append(record)
        found: dict[str, dict[str, Usage]] = {}
        for records in by_session.values():
            records.sort(key=lambda r: (r.started_at, r.id))
            runtime = self.runtime_of(records[-1])
            transcript = runtime.transcript(self.env, records[0].workspace, records[0].session_id)
            starts = [_instant(r.started_at) for r in records]
            for when, used in runtime.usage(transcript):
                at = _instant(when)
                index = max(0, bisect.bisect_right(starts, at) - 1)
                record = records[index]
                phases = found.setdefault(record.issue, {})
                phases[record.mode.value] = phases.get(record.mode.value, Usage()) + used
        return found

    def live_issues(self) -> set[str]:
        return {view.record.issue for view in self.views() if view.state.is_live}

    def latest_modes(self) -> dict[str, Mode]:
        return self.registry.latest_modes()

    def _views_for(self, issue: str) -> list[WorkerView]:
        return [view for view in self.views() if view.record.issue == issue]

    # -- acting --------------------------------------------------------------------------------

    def _lock(self) -> AbstractContextManager[None]:
        return exclusive(self.project.state_dir / "workers.lock")

    def dispatch(self, issue: str, mode: Mode, *, marked: Marker, wait: bool = True) -> WorkerView:
        """Start `mode`'s worker for `issue` in the issue's workspace; one live worker per issue.
        `marked`: the workflow's mark that a worker is on the issue (the reconciler's
        `worker_active`), held from after the worker is recorded until its window runs.

        With `wait`, return once its session has begun; without, the caller collects the start
        with `await_starts` (so that a reconcile pass starts several workers at once)."""
        identifier = self.tracker.get_issue(issue).identifier
        with self._lock():
            live = [view for view in self._views_for(identifier) if view.state.is_live]
            if live:
                raise ConflictError(
                    f"{identifier} already has a live worker: window {live[0].record.window} "
                    f"({live[0].state.value}); see `legion workers`"
                )
            workspace = self.workspaces.ensure(identifier)
            prompt = self.worker_prompt(identifier, mode)
            return self._start(identifier, mode, workspace.path, prompt, wait, marked)

    def worker_prompt(self, issue: str, mode: Mode) -> str:
        """How `mode`'s worker on `issue` is told to use its skill, on the CLI it runs on."""
        identifier = normalize_identifier(issue)
        return self._session_runtime(identifier, mode).worker_prompt(identifier, mode)

    def _session_runtime(self, issue: str, mode: Mode) -> AgentRuntime:
        """The CLI for `mode`'s session of `issue`: the one it already ran on, when it did (a
        retro resumes the implementer's session where it ran), else the configured one."""
        sid = session_id(self.project.settings.project_id, issue, session_mode(mode))
        record = self.registry.by_session(sid)
        if record is not None:
            return self.runtime_of(record)
        return self.runtime_for(session_mode(mode).value)

    def resume(
        self, issue: str, mode: Mode, prompt: str, *, marked: Marker, wait: bool = True
    ) -> WorkerView:
        """Give the session of `issue` in `mode` a new prompt: typed into its window when it
        runs, else by restarting it with `--resume` in a new window. `marked`: as `dispatch`'s,
        held while the prompt is typed."""
        if not prompt.strip():
            raise InputError("the prompt is empty")
        identifier = self.tracker.get_issue(issue).identifier
        sid = session_id(self.project.settings.project_id, identifier, session_mode(mode))
        with self._lock():
            views = self._views_for(identifier)
            running = [v for v in views if v.record.session_id == sid and v.state.is_live]
            live = [v for v in views if v.state.is_live]
            window = running[0].window if running else None
            if running and window is not None:
                view = running[0]
                if view.state is SessionState.BLOCKED:
                    raise ConflictError(
                        f"{identifier}'s worker is waiting for an answer to its question: "
                        "use `legion answer`"
                    )
                with marked(identifier):
                    self.tmux.send_text(window.id, prompt)
                return view
            if live:
                raise ConflictError(
                    f"{identifier} has another live worker: window {live[0].record.window}; "
                    "see `legion workers`"
                )
            workspace = self.workspaces.get(identifier) or self.workspaces.ensure(identifier)
            return self._start(identifier, mode, workspace.path, prompt, wait, marked)

    def retire(self, view: WorkerView) -> None:
        """Close a worker's window (its session stays resumable) and retire its record.

        Legion closes a live worker's window only when its mode is done: its agent is marked
        complete first, so whoever looks while the window is gone and the record not yet
        retired never takes it for a worker that died."""
        if view.state.is_live:
            detail = f"retired: {view.record.window}"
            self._mark_on_bus(view.record.session_id, AgentStatus.COMPLETE, detail)
        if view.window is not None:
            pid = None if view.window.pane_dead else view.window.pane_pid
            self.tmux.kill_window(view.window.id, pane_pid=pid)
        fault_point("worker_window_closed")
        if self.capabilities is not None:
            self.capabilities.revoke_session(view.record.session_id)
        self.registry.retire(view.record.id)

    def _start(
        self, issue: str, mode: Mode, workspace: Path, prompt: str, wait: bool, marked: Marker
    ) -> WorkerView:
        sid = session_id(self.project.settings.project_id, issue, session_mode(mode))
        runtime = self._session_runtime(issue, mode)
        transcript = runtime.transcript(self.env, workspace, sid)
        size_before = transcript_size(transcript)
        name = window_name(issue, mode)
        # Recorded before `worker-active` goes on and before the window exists: a crash after
        # the label leaves a record of a dead worker, which the next pass restarts in the mode
        # recorded (the latest record says which worker `worker-active` names), never a worker
        # nobody knows about. A crash before the label leaves a dead record nobody expects,
        # which the next pass forgets.
        record = self.registry.start(issue, mode, sid, name, workspace, runtime.name)
        fault_point("after_registry_start")
        with marked(issue):
            try:
                window_id = self.start_session_window(
                    name,
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
            self._starting.append(_Starting(issue, window_id, transcript, size_before, runtime))
            if wait:
                failures = self.await_starts()
                if failures:
                    raise WorkerStartError(failures[0][1])
        window = Window(window_id, name, False, None, "", sid)
        return WorkerView(record, window, SessionState.RUNNING, transcript, None, None)

    def start_session_window(
        self,
        name: str,
        sid: str,
        prompt: str,
        cwd: Path,
        extra_env: Mapping[str, str],
        *,
        issue: str | None,
        runtime: AgentRuntime | None = None,
    ) -> str:
        """Start (or resume, when its transcript exists) session `sid` of `runtime` (default:
        the controller's CLI) in window `name`; returns the new window's id. `issue`: the
        issue a worker works on, which its relay capability is scoped to; None for the
        controller (the whole project).

        Whatever still runs that session, or holds the name, is closed first, and its process
        waited for: one session never runs in two processes, even for a moment (a window left
        by a crash, a stuck controller, a dead pane kept for `peek`)."""
        runtime = runtime or self.controller_runtime
        runtime.command(sid, prompt, resume=False)  # the CLI is there: fail before closing
        runtime.prepare(self.env, cwd)
        env = {key: value for key, value in self.env.items() if inheritable(key)}
        env |= runtime.environment(self.env)
        env |= {
            "LEGION_REPO": str(self.project.root),
            # The session's `legion` is this one, whatever the PATH it inherited holds.
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), self.env.get("PATH", "")]),
            **extra_env,
        }
        if self.capabilities is not None:
            # Minted for this start: the session's earlier capability is revoked with it.
            env[CAPABILITY_ENV] = self.capabilities.mint(
                issue, mode=extra_env.get("LEGION_MODE", ""), session_id=sid
            )
            env[SOCKET_ENV] = str(socket_path(self.project.state_dir))
        self._ensure_session()
        for window in self.tmux.list_windows(self.session):
            if window.name == name or window.tag == sid:
                pid = None if window.pane_dead else window.pane_pid
                self.tmux.kill_window(window.id, pane_pid=pid)
        self._stop_stray(sid)
        self._ensure_session()  # closing the last window ends the session
        # Decided only now: a leftover that was starting may have written the transcript.
        transcript = runtime.transcript(self.env, cwd, sid)
        agent = self._register_on_bus(sid, extra_env.get("LEGION_MODE", ""), cwd, runtime.name)
        if agent is not None:
            # What the session's `legion ask`/`complete` carry: a replaced session's are stale.
            env["LEGION_SPAWN_INSTANCE"] = str(agent.spawn_instance)
        argv = runtime.command(
            sid,
            prompt,
            resume=transcript.exists(),
            inbox=self.inbox_file(sid),
            context=self.context_file(sid),
        )
        handover = launch.Handover(self.project.state_dir / "launch", argv, cwd, env)
        handover.start()
        try:
            window = self.tmux.start_window(
                self.session, name, launch.command(handover.path), cwd, tag=sid
            )
        except BaseException:
            handover.cancel()
            raise
        self._handovers[window.id] = handover
        if window.pane_pid is not None:
            with contextlib.suppress(OSError):  # only ever a help to the next start
                write_private(self._pid_file(sid), f"{window.pane_pid}\n")
        return window.id

    def stop_session(self, sid: str, *, force: bool = False) -> bool:
        """Close the window running session `sid` (SIGHUP, as tmux does, then SIGKILL after a
        grace period; `force`: SIGKILL at once) and wait for its process. True if one ran."""
        stopped = False
        if not self.tmux.has_session(self.session):
            return False
        for window in self.tmux.list_windows(self.session):
            if window.tag != sid:
                continue
            pid = None if window.pane_dead else window.pane_pid
            if force and pid is not None:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            self.tmux.kill_window(window.id, pane_pid=pid)
            stopped = stopped or pid is not None
        self._stop_stray(sid)
        return stopped

    def _pid_file(self, sid: str) -> Path:
        return self.project.state_dir / "sessions" / f"{sid}.pid"

    def inbox_file(self, sid: str) -> Path:
        """Messages waiting for session `sid`'s next turn boundary (its hooks hand them over)."""
        return self.project.state_dir / "sessions" / f"{sid}.inbox.json"

    def context_file(self, sid: str) -> Path:
        """What a resumed or compacted session `sid` is given back (its SessionStart hook)."""
        return self.project.state_dir / "sessions" / f"{sid}.context.md"

    def _register_on_bus(self, sid: str, mode: str, workspace: Path, runtime: str) -> Agent | None:
        """Record the session as an agent on the bus, before its process can post. The bus is
        a help to the session, never a condition of it: a failure is reported and the session
        starts all the same."""
        from legion.bus.sessions import register_session
        from legion.bus.store import open_bus

        try:
            bus = open_bus(self.env)
            try:
                return register_session(
                    bus,
                    self.project,
                    mode=mode,
                    session_id=sid,
                    workspace=workspace,
                    runtime=runtime,
                )
            finally:
                bus.close()
        except Exception as exc:  # whatever it is, the worker still starts
            print(
                f"legion: session {sid} not registered on the bus: {type(exc).__name__}: {exc}",
                file=sys.stderr,
                flush=True,
            )
            return None

    def _mark_on_bus(self, sid: str, status: AgentStatus, detail: str) -> None:
        """Set the status of session `sid`'s agent (archived stands). Like the registration, a
        help, never a condition: a failure is reported and the caller carries on."""
        from legion.bus.store import open_bus

        try:
            bus = open_bus(self.env)
            try:
                agent = bus.agent_by_session(sid)
                if agent is not None and agent.status not in (status, AgentStatus.ARCHIVED):
                    bus.update_agent(agent.id, status=status, detail=detail)
            finally:
                bus.close()
        except Exception as exc:  # whatever it is, the worker is retired all the same
            print(
                f"legion: session {sid}'s agent not marked {status.value}: "
                f"{type(exc).__name__}: {exc}",
                file=sys.stderr,
                flush=True,
            )

    def _stop_stray(self, sid: str) -> None:
        """End every process still running session `sid` outside the windows tmux shows, and
        wait for each: one session never runs in two processes, even for a moment. Such a
        process is one whose window is gone while it lives on: its tmux server died (killed,
        crashed) and took the window, not always the process at once; a Legion process was
        killed while it waited for one to exit after closing its window; a process the CLI
        forked for a tool outlived its parent. Found on their command lines (`/proc`), and
        the one last started on the session (its pid file: a launcher not yet the CLI, or
        where there is no /proc). Whose each is is checked on its command line, so a reused pid
        is safe."""
        pids = set(session_processes(sid))
        try:
            pid = int(self._pid_file(sid).read_text().strip())
        except (OSError, ValueError):
            pid = None
        if pid is not None:
            args = process_args(pid)
            if args is not None and (sid in args or "legion.runtime.launch" in args):
                pids.add(pid)
        for stray in pids:
            with contextlib.suppress(OSError):
                os.kill(stray, signal.SIGHUP)  # what tmux sends when it closes a window
        for stray in sorted(pids):
            wait_for_exit(stray)

    def await_starts(self) -> list[tuple[str, str]]:
        """Wait until every worker started without waiting has recorded its first prompt,
        getting each CLI past any first-run dialog on the way. Returns (issue, why) for those
        whose process died first; a slow start is not a failure, and neither is a moment in
        which tmux cannot be asked."""
        deadline = time.monotonic() + START_TIMEOUT_S
        failures: list[tuple[str, str]] = []
        try:
            while self._starting and time.monotonic() < deadline and not self.should_stop():
                try:
                    windows = {w.id: w for w in self.tmux.list_windows(self.session)}
                except TmuxUnavailable:
                    time.sleep(0.25)
                    continue
                for item in list(self._starting):
                    if transcript_grew(item.size_before, transcript_size(item.transcript)):
                        self._starting.remove(item)
                        continue
                    window = windows.get(item.window_id)
                    try:
                        screen = self.tmux.capture(item.window_id, lines=60) if window else ""
                    except TmuxError:
                        continue  # closed meanwhile, or tmux did not answer: look again
                    if window is None or window.pane_dead:
                        failures.append((item.issue, start_failure(screen)))
                        self._starting.remove(item)
                        if handover := self._handovers.pop(item.window_id, None):
                            handover.cancel()  # its reader is gone: do not wait for it
                        continue
                    dialog = item.runtime.first_run_dialog(screen)
                    # One answer per dialog: give the screen time to move on before looking again.
                    if dialog is not None and time.monotonic() - item.answered_at > 0.7:
                        for key in dialog[1]:
                            self.tmux.send_keys(item.window_id, key)
                        item.answered_at = time.monotonic()
                time.sleep(0.1)
        finally:
            self._starting.clear()
            self._handovers = {k: h for k, h in self._handovers.items() if h.pending()}
        return failures

    def _ensure_session(self) -> None:
        if self.tmux.has_session(self.session):
            return
        anchor = [sys.executable, "-m", "legion.runtime.anchor"]
        try:
            self.tmux.new_session(self.session, ANCHOR_WINDOW, anchor, self.project.root)
        except TmuxError:
            if not self.tmux.has_session(self.session):  # else another process made it first
                raise

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
            for view in self._views_for(identifier)
            if view.state is SessionState.BLOCKED and view.window and view.question
        ]
        if not blocked:
            raise ConflictError(f"{identifier} has no worker waiting for an answer")
        view = blocked[0]
        assert view.window is not None and view.question is not None
        runtime = self.runtime_of(view.record)
        runtime.answer_question(self.tmux, view.window.id, view.question, answers)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            summary = self.runtime_of(view.record).summarize(view.transcript)
            pending = summary.pending_question if summary else None
            if pending is None or pending.tool_use_id != view.question.tool_use_id:
                return view
            time.sleep(0.1)
        raise ConflictError(
            f"the answer was typed into {view.record.window}, but the worker has not taken it yet; "
            "check with `legion peek`"
        )

    # -- what callers need of the sessions' windows and records (none reaches for tmux) --------

    def controller_window(self) -> Window | None:
        """The controller's window (dead or alive), or None when there is none."""
        return self.tmux.find_window(self.session, CONTROLLER_WINDOW)

    def live_window(self, sid: str) -> Window | None:
        """The live window running session `sid`, or None."""
        return self.tmux.live_tagged(self.session, sid)

    def screen(self, window_id: str, lines: int = 60) -> str:
        """What the window shows (its last `lines`), as text: what the terminal has already
        acted on."""
        return self.tmux.capture(window_id, lines=lines)

    def close_window(self, window_id: str) -> None:
        """Close a window (a stuck worker's: the reconciler restarts its session)."""
        self.tmux.kill_window(window_id)

    def attach_command(self, window_id: str, environ: Mapping[str, str]) -> Attach:
        """How this terminal opens the window read-write (`legion attach`, the TUI)."""
        return self.tmux.attach_command(self.session, window_id, environ)

    def type_prompt(self, window_id: str, text: str, transcript: Path, mark: int) -> bool:
        """Type a prompt into an idle session, confirmed (`legion.sessions.prompting`)."""
        return prompting.type_prompt(self.tmux, window_id, text, transcript, mark)

    def check_tmux(self) -> None:
        """Raise when tmux cannot be run."""
        self.tmux.run("-V")

    def close_all(self) -> bool:
        """Close the project's tmux session, every window in it; False when there was none."""
        if not self.tmux.has_session(self.session):
            return False
        self.tmux.kill_session(self.session)
        return True

    def record_of(self, sid: str) -> WorkerRecord | None:
        """The current worker record of session `sid` (None: the controller, or retired)."""
        return self.registry.by_session(sid)

    def latest_record(self, issue: str) -> WorkerRecord | None:
        """The issue's latest worker record, current or retired."""
        return self.registry.latest(issue)

    def records(self) -> list[WorkerRecord]:
        """The current worker records."""
        return self.registry.current()

    def forget(self, record: WorkerRecord) -> None:
        """Retire a worker's record without touching its window (the end of a demo)."""
        self.registry.retire(record.id)

    def peek(self, issue: str, lines: int = 40) -> tuple[WorkerView, str]:
        identifier = normalize_identifier(issue)
        views = [view for view in self._views_for(identifier) if view.window is not None]
        if not views:
            raise NotFoundError(f"{identifier} has no worker window (see `legion workers`)")
        live = [view for view in views if view.state.is_live]
        view = (live or views)[-1]
        assert view.window is not None
        return view, self.tmux.capture(view.window.id, lines=lines)


def _instant(iso: str) -> float:
    """Seconds since the epoch of an ISO time (`...Z`); 0 for one that does not parse."""
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
