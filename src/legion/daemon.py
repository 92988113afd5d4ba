"""The daemon: supervises the controller and the workers of one project in one tmux session.

Every tick (and at once when a `legion` command changed something) it touches the heartbeat,
keeps the controller alive (restarting it, with a cooldown, when its window is gone or its
session has been stuck mid-turn for too long), kills a worker only when two signals agree it is
stuck, and, in `auto` mode, runs the reconciler and wakes the controller only for what needs
judgment. In `llm` mode the controller does the reconciling itself and is woken instead.

Liveness is read from the world, never from the daemon's memory, so a daemon that was killed
and started again adopts the running tmux session and carries on where the last one stopped.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import select
import signal
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from legion.actionlog import ActionLog
from legion.backends import Backends, open_backends, open_workers
from legion.config import Project
from legion.core.decide import Action
from legion.core.ids import controller_session_id
from legion.core.model import Status
from legion.daemon_link import heartbeat_file, pid_file, running_pid, wake_fifo
from legion.errors import ConflictError, LegionError
from legion.reconcile import Reconciler
from legion.runtime.claude_paths import newest_activity
from legion.runtime.transcript import summarize_file
from legion.runtime.workers import WorkerManager, WorkerState, classify

CONTROLLER_WINDOW = "main"
SOON_S = 0.5
MODES = ("auto", "llm")


def controller_prompt(mode: str, reason: str) -> str:
    if mode == "llm":
        return f"/legion-controller {reason}"
    return (
        f"/legion-controller {reason} (auto mode: the daemon carries out the mechanical "
        "actions; handle only what needs judgment)"
    )


def controller_state_of(
    project: Project, workers: WorkerManager
) -> tuple[WorkerState, float | None]:
    """The controller's state (as a worker's) and its last transcript activity."""
    window = workers.tmux.find_window(workers.session, CONTROLLER_WINDOW)
    sid = controller_session_id(project.settings.project_id)
    transcript = workers.claude.transcript(workers.env, project.root, sid)
    alive = window is not None and not window.pane_dead
    summary = summarize_file(transcript) if alive else None
    return classify(alive, summary), newest_activity(transcript)


@dataclass
class DaemonConfig:
    mode: str = "auto"
    tick: float = 60.0
    stale_after: float = 600.0
    restart_cooldown: float = 60.0
    run_for: float | None = None  # stop after this many seconds (tests, the demo)
    stop_when: Any = None  # callable(Backends) -> bool, checked each tick (the demo)


@dataclass
class _Memory:
    """What the daemon remembers between ticks; nothing it could not rebuild after a crash."""

    last_restart: float = 0.0
    judgment_key: str = ""
    last_wake: float = 0.0
    pane_hashes: dict[str, str] = field(default_factory=dict)


class Daemon:
    def __init__(self, project: Project, config: DaemonConfig, env: Mapping[str, str]) -> None:
        if config.mode not in MODES:
            raise LegionError(f"unknown controller mode {config.mode!r} (known: auto, llm)")
        self.project = project
        self.config = config
        self.env = dict(env)
        self.backends: Backends = open_backends(project)
        self.workers: WorkerManager = open_workers(project, self.backends, self.env)
        self.log = ActionLog(self.backends.db)
        self.reconciler = Reconciler(
            project, self.backends.tracker, self.backends.forge, self.workers, self.log
        )
        self.memory = _Memory()
        self._stopping = False
        self._look_again_soon = False

    # -- lifecycle -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        state = self.project.state_dir
        state.mkdir(parents=True, exist_ok=True)
        with (state / "daemon.lock").open("a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                pid = running_pid(self.project)
                raise ConflictError(
                    f"Legion is already running for this project (pid {pid}); "
                    "`legion stop` stops it"
                ) from None
            pid_file(self.project).write_text(f"{os.getpid()}\n")
            try:
                yield
            finally:
                pid_file(self.project).unlink(missing_ok=True)
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._stopping = True

    def run(self) -> None:
        with self._exclusive():
            previous = {
                sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)
            }
            fifo = wake_fifo(self.project)
            with contextlib.suppress(FileNotFoundError):
                fifo.unlink()
            os.mkfifo(fifo, 0o600)
            # Read-write, so the FIFO never reports end-of-file when a writer goes away.
            fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
            started = time.monotonic()
            self.log.append(
                "-", "daemon_start", "done", f"pid {os.getpid()}, {self.config.mode} mode"
            )
            try:
                while not self._stopping:
                    self.tick()
                    if self._finished(started):
                        break
                    self._wait(fd)
            finally:
                os.close(fd)
                with contextlib.suppress(FileNotFoundError):
                    fifo.unlink()
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
                self.log.append("-", "daemon_stop", "done", f"pid {os.getpid()}")

    def _finished(self, started: float) -> bool:
        if self.config.run_for is not None and time.monotonic() - started >= self.config.run_for:
            return True
        stop_when = self.config.stop_when
        return bool(stop_when is not None and stop_when(self.backends))

    def _wait(self, fd: int) -> None:
        """Sleep until the next tick, or until a `legion` command signals a change."""
        pause = SOON_S if self._look_again_soon else self.config.tick
        deadline = time.monotonic() + pause
        while not self._stopping:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
            except InterruptedError:
                continue
            if ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(fd, 4096)
                time.sleep(0.05)  # let a burst of changes settle into one pass
                with contextlib.suppress(BlockingIOError):
                    os.read(fd, 4096)
                return

    # -- one tick ------------------------------------------------------------------------------

    def tick(self) -> None:
        heartbeat = heartbeat_file(self.project)
        heartbeat.touch()
        self._step("controller_health", self.ensure_controller)
        self._step("worker_health", self.kill_stuck_workers)
        if self.config.mode == "auto":
            self._step("reconcile", self._reconcile)
            self._step("wake_controller", self.wake_for_judgment)
        else:
            self._step("wake_controller", self.wake_llm_controller)

    def _step(self, name: str, step: Any) -> None:
        """One part of a tick. Whatever goes wrong is logged and the daemon carries on: it is the
        thing that must not stop."""
        try:
            step()
        except LegionError as exc:
            self._log_failure(name, str(exc))
        except Exception as exc:
            self._log_failure(name, f"internal error: {type(exc).__name__}: {exc}")

    def _log_failure(self, name: str, detail: str) -> None:
        try:
            self.log.append("-", name, "failed", detail)
        except LegionError:
            print(f"legion daemon: {name} failed: {detail}", flush=True)

    def _reconcile(self) -> None:
        outcomes = self.reconciler.run()
        # A worker that said it is done is still finishing its last message: look again soon
        # rather than a whole tick later.
        self._look_again_soon = any(
            o.outcome == "deferred" and "finishing" in o.detail for o in outcomes
        )

    # -- the controller ------------------------------------------------------------------------

    @property
    def controller_session(self) -> str:
        return controller_session_id(self.project.settings.project_id)

    def controller_transcript(self) -> Path:
        return self.workers.claude.transcript(self.env, self.project.root, self.controller_session)

    def controller_state(self) -> tuple[WorkerState, float | None]:
        return controller_state_of(self.project, self.workers)

    def ensure_controller(self) -> None:
        state, activity = self.controller_state()
        stale = (
            state is WorkerState.RUNNING
            and activity is not None
            and time.time() - activity > self.config.stale_after
        )
        if state is not WorkerState.DEAD and not stale:
            return
        since = time.monotonic() - self.memory.last_restart
        if self.memory.last_restart and since < self.config.restart_cooldown:
            return  # cooldown: try again on a later tick
        reason = "stale" if stale else "not running"
        self.start_controller(f"start ({reason})")
        self.memory.last_restart = time.monotonic()
        self.log.append("-", "restart_controller", "done", reason)

    def start_controller(self, reason: str) -> None:
        self.workers.start_session_window(
            CONTROLLER_WINDOW,
            self.controller_session,
            controller_prompt(self.config.mode, reason),
            self.project.root,
            {"LEGION_MODE": "controller", "LEGION_SESSION_ID": self.controller_session},
        )

    def wake(self, reason: str) -> None:
        state, _ = self.controller_state()
        if state is not WorkerState.IDLE:
            return  # busy, blocked or dead: a prompt now would be lost or queued twice
        window = self.workers.tmux.find_window(self.workers.session, CONTROLLER_WINDOW)
        if window is None:
            return
        self.workers.tmux.send_text(window.id, controller_prompt(self.config.mode, reason))
        self.memory.last_wake = time.monotonic()
        self.log.append("-", "wake_controller", "done", reason)

    def wake_for_judgment(self) -> None:
        """Auto mode: wake the controller only when something needs judgment, once per change."""
        items = []
        for issue in self.backends.tracker.list_issues():
            if issue.status is Status.TRIAGE:
                items.append(f"{issue.identifier}:triage")
        for entry in self.log.tail(50):
            if entry.action == Action.INVESTIGATE_NO_PR.value:
                items.append(f"{entry.issue}:investigate_no_pr")
        key = hashlib.sha256("|".join(sorted(set(items))).encode()).hexdigest()
        if not items or key == self.memory.judgment_key:
            return
        self.memory.judgment_key = key
        self.wake(f"wake: needs judgment: {', '.join(sorted(set(items)))}")

    def wake_llm_controller(self) -> None:
        """LLM mode: the controller reconciles; wake it each tick it is idle."""
        self.wake("wake: tick")

    # -- workers -------------------------------------------------------------------------------

    def kill_stuck_workers(self) -> None:
        """Kill a worker only when two signals agree: no transcript activity for `stale_after`
        seconds, and a pane that did not change since the last tick."""
        seen: dict[str, str] = {}
        for view in self.workers.views():
            # Idle counts too: a worker that ended its turn without finishing its mode (it still
            # holds worker-active, or the reconciler would have retired it) is as stuck.
            if view.state not in (WorkerState.RUNNING, WorkerState.IDLE) or view.window is None:
                continue
            screen = self.workers.tmux.capture(view.window.id, lines=60)
            digest = hashlib.sha256(screen.encode()).hexdigest()
            seen[view.window.id] = digest
            # A worker with no transcript yet is starting: its age counts from its start.
            last = view.last_activity or _timestamp(view.record.started_at)
            quiet = time.time() - last > self.config.stale_after
            unchanged = self.memory.pane_hashes.get(view.window.id) == digest
            if quiet and unchanged:
                self.workers.tmux.kill_window(view.window.id)
                quiet_for = f"{self.config.stale_after:g} s"
                self.log.append(
                    view.record.issue,
                    "kill_stuck_worker",
                    "done",
                    f"{view.record.window}: no transcript activity for {quiet_for} "
                    "and no change on screen",
                )
        self.memory.pane_hashes = seen


def _timestamp(iso: str) -> float:
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()  # unreadable: treat as just started, never as stuck


def stop(project: Project, timeout: float = 20.0) -> int | None:
    """SIGTERM the running daemon and wait for it to go; its pid, or None if none ran."""
    pid = running_pid(project)
    if pid is None:
        return None
    if pid > 0:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if running_pid(project) is None:
            return pid
        time.sleep(0.1)
    raise LegionError(f"the daemon (pid {pid}) did not stop within {timeout:g} s")
