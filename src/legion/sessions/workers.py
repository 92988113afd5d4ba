"""Workers: agent sessions (Claude Code or Codex) in tmux windows, one workspace per issue.

Observing a worker combines three sources: the registry (what Legion started), tmux (is the
window there, is its process alive) and the transcript (mid-turn, waiting for input, or
waiting on a question). Starting, resuming and answering are serialized by a lock file, so
two `legion` processes never start two workers for one issue.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from legion.bus.model import AgentStatus
from legion.config import Project
from legion.core.decide import session_mode
from legion.core.ids import session_id
from legion.core.liveness import SessionState
from legion.core.model import Mode, normalize_identifier
from legion.core.task_list import TaskList
from legion.core.usage import Usage
from legion.errors import (
    ConfigError,
    ConflictError,
    InputError,
    NotFoundError,
    WorkerStartError,
)
from legion.faults import fault_point
from legion.locking import exclusive
from legion.relay.capabilities import Capabilities
from legion.runtime.base import AgentRuntime
from legion.runtime.tmux import Tmux, Window
from legion.runtime.transcript import PendingQuestion
from legion.sessions.observer import classify
from legion.sessions.prompting import transcript_size
from legion.sessions.registry import Registry, WorkerRecord
from legion.sessions.supervisor import SessionSupervisor
from legion.trackers.base import Tracker
from legion.workspaces.base import Workspaces


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
        sessions reach the tracker and forge through the daemon (None: they need none).
        Starting, stopping and the windows are the `supervisor`'s."""
        self.project = project
        self.tracker = tracker
        self.registry = registry
        self.supervisor = SessionSupervisor(project, tmux, env, capabilities)
        self.workspaces = workspaces
        self.runtime = runtime
        self.runtimes: dict[str, AgentRuntime] = dict(runtimes or {})
        self.runtimes.setdefault(runtime.name, runtime)
        self.env = env
        self.capabilities = capabilities

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
        windows = {window.name: window for window in self.supervisor.windows()}
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
                    self.supervisor.tmux.send_text(window.id, prompt)
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
            self.supervisor.mark_on_bus(view.record.session_id, AgentStatus.COMPLETE, detail)
        if view.window is not None:
            self.supervisor.close_retired(view.window)
        fault_point("worker_window_closed")
        self.supervisor.revoke(view.record.session_id)
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
                window_id = self.supervisor.start_session_window(
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
            self.supervisor.expect_start(issue, window_id, transcript, size_before, runtime)
            if wait:
                failures = self.supervisor.await_starts()
                if failures:
                    raise WorkerStartError(failures[0][1])
        window = Window(window_id, name, False, None, "", sid)
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
            for view in self._views_for(identifier)
            if view.state is SessionState.BLOCKED and view.window and view.question
        ]
        if not blocked:
            raise ConflictError(f"{identifier} has no worker waiting for an answer")
        view = blocked[0]
        assert view.window is not None and view.question is not None
        runtime = self.runtime_of(view.record)
        runtime.answer_question(self.supervisor.tmux, view.window.id, view.question, answers)
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
        return view, self.supervisor.screen(view.window.id, lines=lines)


def _instant(iso: str) -> float:
    """Seconds since the epoch of an ISO time (`...Z`); 0 for one that does not parse."""
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
