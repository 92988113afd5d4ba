"""The controller's supervision and its wake-ups: two steps of the daemon's tick.

`ControllerSupervisor` keeps the controller alive: restarted (with a cooldown) when its window
is gone, when it has been stuck mid-turn for `stale_after`, or when it has written no
transcript and shown the same screen that long. `ControllerWakeups` hands it the judgment
queue (auto mode: when it is idle and something is due; llm mode: every tick it is idle) and
marks items handled once it ended a turn after receiving them.
"""

from __future__ import annotations

import time
from pathlib import Path

from legion.bus.model import AgentStatus
from legion.config import Project
from legion.core.ids import controller_session_id
from legion.core.liveness import (
    SETTLE_S,
    SessionState,
    screen_stuck,
    settling,
    stale_mid_turn,
    transcript_grew,
)
from legion.diagnostics.faults import fault_point
from legion.errors import LegionError
from legion.reconcile import START_FAILURES
from legion.reconcile.judgments import Judgment, JudgmentQueue, wake_reason
from legion.reconcile.starts import (
    CREDENTIAL_HINT,
    count_failed_start,
    hold_unreachable,
    log_record,
)
from legion.sessions.observer import (
    CONTROLLER_WINDOW,
    ControllerView,
    controller_state_of,
    observe_controller,
)
from legion.sessions.pause import DispatchPause
from legion.sessions.prompting import transcript_size
from legion.sessions.prompts import controller_prompt
from legion.sessions.screen_watch import ScreenWatch
from legion.sessions.workers import WorkerManager
from legion.store.actionlog import ActionLog, OutcomeKind

from .steps import DONE, StepResult, log_failure


class ControllerSession:
    """Where the project's controller session is, and what it shows: shared by both steps."""

    def __init__(self, project: Project, workers: WorkerManager, mode: str) -> None:
        self.project = project
        self.workers = workers
        self.mode = mode
        self.id = controller_session_id(project.settings.project_id)

    def transcript(self) -> Path:
        runtime = self.workers.runtimes.controller
        return runtime.transcript(self.project.root, self.id)

    def state(self) -> tuple[SessionState, float | None]:
        return controller_state_of(self.project, self.workers)

    def view(self) -> ControllerView:
        return observe_controller(self.project, self.workers)

    def prompt(self, reason: str) -> str:
        return controller_prompt(self.mode, reason, self.workers.runtimes.controller)


class ControllerSupervisor:
    """Keeps the controller running: restarts it when it is dead or stuck."""

    def __init__(
        self,
        controller: ControllerSession,
        judgments: JudgmentQueue,
        pause: DispatchPause,
        log: ActionLog,
        *,
        stale_after: float,
        restart_cooldown: float,
    ) -> None:
        self.controller = controller
        self.judgments = judgments
        self.pause = pause
        self.log = log
        self.stale_after = stale_after
        self.restart_cooldown = restart_cooldown
        self.last_restart = 0.0  # monotonic seconds; 0: never restarted by this daemon
        # The controller's screen while it has no transcript yet, and since when it shows that.
        self.untranscribed = ScreenWatch(controller.workers.windows)

    def run(self) -> StepResult:
        try:
            view = self.controller.view()
        except LegionError as exc:
            # tmux did not answer: the controller may well be running. Unknown is not dead.
            detail = f"controller state unknown, left alone: {exc}"
            log_failure(self.log, "controller_health", detail)
            return DONE
        state, activity = view.state, view.last_activity
        if view.unreachable is not None and view.window is not None:
            self._unreachable(view)
            return DONE
        stale = stale_mid_turn(state, activity, time.time(), self.stale_after)
        silent = self._stuck_before_transcript(state, activity)
        if state is not SessionState.DEAD and not stale and not silent:
            return DONE
        since = time.monotonic() - self.last_restart
        if self.last_restart and since < self.restart_cooldown:
            return DONE  # cooldown: try again on a later tick
        why = "stale" if stale else "not running"
        if silent:
            why = f"stale: no transcript, the same screen for {self.stale_after:g} s"
        # A (re)started controller is given every open item it has not handled yet: whatever
        # was typed into the previous one may have been lost with it.
        items = [item for item in self.judgments.open_items() if item.handled_at is None]
        reason = f"start ({why})"
        if items:
            reason += f"; needs judgment: {wake_reason(items)}"
        mark = transcript_size(self.controller.transcript())
        try:
            self.start(reason)
        except START_FAILURES as exc:
            count_failed_start(self.pause, log_record(self.log), str(exc))
            raise
        finally:
            # The cooldown counts from when the new controller is up: closing the old one may
            # take seconds, and two restarts must never come closer than the cooldown.
            self.last_restart = time.monotonic()
        fault_point("controller_started")
        self.judgments.delivered([item.id for item in items], mark)
        self.log.append("-", "restart_controller", OutcomeKind.DONE, why)
        return DONE

    def _unreachable(self, view: ControllerView) -> None:
        """A controller whose CLI could not reach the model waits for a person to fix that: it
        is stopped, marked failed with what its CLI said, and dispatch paused (its line says how
        to fix it); started again after the cooldown, as a dead one is."""
        assert view.window is not None
        workers = self.controller.workers
        workers.windows.close_window(view.window)
        why = f"the controller could not reach the model: {view.unreachable}"
        workers.supervisor.mark_on_bus(self.controller.id, AgentStatus.FAILED, why)
        fix = workers.runtimes.controller.no_credential(workers.env) or CREDENTIAL_HINT
        log_failure(self.log, "controller_health", f"{why} ({fix})")
        hold_unreachable(self.pause, log_record(self.log), why, fix)
        self.last_restart = time.monotonic()  # its next start waits the cooldown

    def _stuck_before_transcript(self, state: SessionState, activity: float | None) -> bool:
        """Whether the live controller has written no transcript, and its screen has shown the
        same thing, for `stale_after` seconds: a CLI stuck before its first turn (a first-run
        screen, a prompt it never took) would otherwise read as running forever. A screen that
        shows nothing yet is a CLI still loading (seconds on a busy machine), not one stuck."""
        workers = self.controller.workers
        window = None
        if state is SessionState.RUNNING and activity is None:
            window = workers.windows.controller_window()
        if window is None or window.pane_dead:
            self.untranscribed.keep_only(())
            return False
        self.untranscribed.keep_only((window.id,))
        now = time.monotonic()
        seen = self.untranscribed.look(window.id, workers.windows.screen(window.id), now)
        if not screen_stuck(seen, now, self.stale_after):
            return False
        return self.untranscribed.confirmed_still(window.id)  # not a spinner's frame

    def start(self, reason: str) -> None:
        controller = self.controller
        controller.workers.supervisor.start_session_window(
            CONTROLLER_WINDOW,
            controller.id,
            controller.prompt(reason),
            controller.project.root,
            {"LEGION_MODE": "controller", "LEGION_SESSION_ID": controller.id},
            issue=None,  # its capability covers the project: it (and its Oracle) act on any issue
            runtime=controller.workers.runtimes.controller,
        )


class ControllerWakeups:
    """Types the controller's wake-ups (the judgment queue's items) and notes them handled."""

    def __init__(self, controller: ControllerSession, judgments: JudgmentQueue, log: ActionLog):
        self.controller = controller
        self.judgments = judgments
        self.log = log

    def _idle_window(self) -> tuple[str | None, StepResult]:
        """The controller's window when it is idle (a prompt typed now is taken as a new turn);
        None when it is busy, blocked, dead or cannot be observed, or has only just ended its
        turn (then the step asks to run again soon)."""
        state, activity = self.controller.state()
        if state is not SessionState.IDLE:
            return None, DONE  # busy, blocked or dead: a prompt now would be lost or queued twice
        if settling(activity, time.time()):
            return None, StepResult(requeue_after=SETTLE_S)
        workers = self.controller.workers
        window = workers.windows.controller_window()
        return (None if window is None else window.id), DONE

    def _type(self, window_id: str, reason: str, items: list[Judgment]) -> None:
        """Type a wake-up into the idle controller. Its items count as delivered only once the
        controller's transcript has recorded the prompt."""
        ids = [item.id for item in items]
        transcript = self.controller.transcript()
        mark = transcript_size(transcript)
        workers = self.controller.workers
        try:
            accepted = workers.windows.type_prompt(
                window_id, self.controller.prompt(reason), transcript, mark
            )
        except LegionError:
            self.judgments.attempted(ids)
            raise
        if not accepted:
            self.judgments.attempted(ids)
            log_failure(self.log, "wake_controller", f"not taken by the controller: {reason}")
            return
        fault_point("judgment_typed")
        self.judgments.delivered(ids, mark)
        self.log.append("-", "wake_controller", OutcomeKind.DONE, reason)

    def due(self) -> list[Judgment]:
        """Open items not delivered yet (a handled item is never delivered again)."""
        return [
            item
            for item in self.judgments.open_items()
            if item.delivered_at is None and item.handled_at is None
        ]

    def deliver_judgments(self) -> StepResult:
        """Auto mode: wake the controller for the open judgment items not yet delivered, when
        it is idle; an item that cannot be delivered now stays pending and is tried next tick."""
        due = self.due()
        if not due:
            return DONE
        window, result = self._idle_window()
        if window is not None:
            self._type(window, f"wake: needs judgment: {wake_reason(due)}", due)
        return result

    def wake_llm_controller(self) -> StepResult:
        """LLM mode: the controller reconciles; wake it each tick it is idle, naming the
        judgment items it has not been given yet."""
        window, result = self._idle_window()
        if window is None:
            return result
        due = self.due()
        reason = "wake: tick"
        if due:
            reason += f"; needs judgment: {wake_reason(due)}"
        self._type(window, reason, due)
        return result

    def note_handled(self) -> StepResult:
        """Mark delivered items handled once the controller has ended a turn after receiving
        them: it is idle and its transcript grew past the delivery."""
        delivered = [
            item
            for item in self.judgments.open_items()
            if item.delivered_at is not None and item.handled_at is None
        ]
        if not delivered:
            return DONE
        state, _ = self.controller.state()
        if state is not SessionState.IDLE:
            return DONE
        size = transcript_size(self.controller.transcript())
        self.judgments.handled(
            item.id
            for item in delivered
            if item.delivered_mark is not None and transcript_grew(item.delivered_mark, size)
        )
        return DONE
