"""One look at the sessions: a session's state from tmux and its transcript (the rules are
`legion.core.liveness`'s), the controller's included, and the one mapping of that state to
the agent statuses the bus shows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from legion.bus.model import AgentStatus
from legion.config import Project
from legion.core.ids import controller_session_id
from legion.core.liveness import SessionState, session_state
from legion.runtime.tmux import Window
from legion.runtime.transcript import TranscriptSummary, Turn

if TYPE_CHECKING:
    from legion.sessions.workers import WorkerManager

CONTROLLER_WINDOW = "main"


def classify(window_alive: bool, summary: TranscriptSummary | None) -> SessionState:
    """A session's state from whether its process runs and what its transcript says."""
    return session_state(
        window_alive,
        question_open=summary is not None and summary.pending_question is not None,
        turn_ended=summary is not None and summary.turn is Turn.ENDED,
    )


@dataclass(frozen=True)
class ControllerView:
    """The controller's session as observed in one look."""

    state: SessionState
    last_activity: float | None
    window: Window | None
    transcript: Path
    unreachable: str | None = None  # what its CLI said when it could not reach the model


def observe_controller(project: Project, workers: WorkerManager) -> ControllerView:
    """The controller's state (as a worker's), window and last transcript activity. Raises
    `TmuxUnavailable` when tmux does not answer: unknown, never dead."""
    window = workers.windows.controller_window()
    sid = controller_session_id(project.settings.project_id)
    runtime = workers.runtimes.controller
    transcript = runtime.transcript(project.root, sid)
    alive = window is not None and not window.pane_dead
    summary = runtime.summarize(transcript) if alive else None
    return ControllerView(
        classify(alive, summary),
        runtime.last_activity(transcript),
        window,
        transcript,
        summary.unreachable if summary is not None else None,
    )


def controller_state_of(
    project: Project, workers: WorkerManager
) -> tuple[SessionState, float | None]:
    """The controller's state and its last transcript activity."""
    view = observe_controller(project, workers)
    return view.state, view.last_activity


SESSION_STATUS = {
    SessionState.RUNNING: AgentStatus.BUSY,
    SessionState.IDLE: AgentStatus.IDLE,
    SessionState.BLOCKED: AgentStatus.BLOCKED,
    SessionState.DEAD: AgentStatus.FAILED,
}


def observed_status(
    current: AgentStatus, session: SessionState | None, waiting_for_answer: bool
) -> AgentStatus | None:
    """The status an agent's session shows, or None to keep the one it has: complete and
    archived stand until the agent is prompted again, blocked while its question is open, and
    failed until it runs again. A session Legion retired (no record) ended its mode."""
    if current in (AgentStatus.COMPLETE, AgentStatus.ARCHIVED):
        return None
    if current is AgentStatus.BLOCKED and waiting_for_answer:
        return None
    ended = (AgentStatus.FAILED, AgentStatus.STOPPED)
    if session is None:
        return None if current in ended else AgentStatus.COMPLETE
    status = SESSION_STATUS[session]
    if current in ended and status is AgentStatus.FAILED:
        return None
    return status


@dataclass(frozen=True)
class ObservedSession:
    """A session (a worker's or the controller's) as observed in one look: what a prompt or a
    status needs of it."""

    state: SessionState
    window_id: str | None  # its live window; None when none runs
    transcript: Path
    last_activity: float | None


def observe_sessions(project: Project, workers: WorkerManager) -> dict[str, ObservedSession]:
    """Every session Legion runs in the project, the controller's included, by session id, in
    one look at tmux and the transcripts. Raises `TmuxUnavailable` when tmux does not answer."""
    found: dict[str, ObservedSession] = {}
    for view in workers.roster.views():
        window = None if view.window is None else view.window.id
        found[view.record.session_id] = ObservedSession(
            view.state, window, view.transcript, view.last_activity
        )
    controller = observe_controller(project, workers)
    live = controller.window is not None and not controller.window.pane_dead
    found[controller_session_id(project.settings.project_id)] = ObservedSession(
        controller.state,
        controller.window.id if live and controller.window is not None else None,
        controller.transcript,
        controller.last_activity,
    )
    return found
