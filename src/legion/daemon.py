"""The daemon: supervises the controller and the workers of one project in one tmux session.

Every tick (and at once when a `legion` command changed something) it touches the heartbeat,
keeps the controller alive (restarting it, with a cooldown, when its window is gone, its
session has been stuck mid-turn for too long, or it has written no transcript that long), kills
a worker only when two signals agree it is stuck, and, in `auto` mode, runs the reconciler and
delivers the judgment queue to the controller when it is idle. In `llm` mode the controller
does the reconciling itself and is woken every tick instead, with the queue's new items named
in the wake-up.

Liveness is read from the world, never from the daemon's memory, so a daemon that was killed
and started again adopts the running tmux session and carries on where the last one stopped.
What must outlive the daemon (the judgment queue, the dispatch pause) is in the project
database. What cannot be observed (tmux does not answer) is unknown, and nothing is done on it.

When the project's tracker or forge needs a credential, the daemon is the only process that
holds it: it serves the relay socket (`legion.relay`) from its start to its stop, and the
sessions' `legion` commands make their tracker and forge calls through it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import select
import signal
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from legion.actionlog import ActionLog, OutcomeKind
from legion.backends import Backends, open_backends, open_workers
from legion.bus.store import Bus, bus_path, open_bus
from legion.config import Project
from legion.core.ids import controller_session_id
from legion.core.liveness import (
    SETTLE_S,
    ScreenSeen,
    SessionState,
    screen_seen,
    screen_stuck,
    settling,
    stale_mid_turn,
    transcript_grew,
    worker_stuck,
)
from legion.daemon_link import heartbeat_file, pid_file, running_pid, wake_fifo
from legion.errors import ConflictError, LegionError, StoreError
from legion.faults import fault_point
from legion.judgments import Judgment, JudgmentQueue, wake_reason
from legion.pause import DispatchPause
from legion.prompts import controller_prompt
from legion.reconcile import START_FAILURES, Reconciler
from legion.relay import relay_needed
from legion.relay.server import RelayServer, relay_server
from legion.sessions.observer import CONTROLLER_WINDOW, controller_state_of
from legion.sessions.prompting import transcript_size, type_prompt
from legion.sessions.workers import WorkerManager
from legion.statefiles import open_private, touch_private, write_private
from legion.watch import Watcher, watch_lock

MODES = ("auto", "llm")


@dataclass
class DaemonConfig:
    mode: str = "auto"
    tick: float = 60.0
    stale_after: float = 600.0
    restart_cooldown: float = 60.0
    run_for: float | None = None  # stop after this many seconds (tests, the demo)
    stop_when: Any = None  # callable(Backends) -> bool, checked each tick (the demo)
    stop_on_pause: bool = False  # stop as soon as dispatch is paused (the demo)
    say_pause: bool = True  # print the pause line on stderr (the demo says it its own way)
    say_stop: bool = False  # say on stderr what a SIGINT/SIGTERM stops (`start --foreground`)
    # How long a blocked worker's question may wait for the controller's Oracle before it goes
    # to a human directly; None: `stale_after`.
    oracle_timeout: float | None = None


@dataclass
class _Memory:
    """What the daemon remembers between ticks; nothing it could not rebuild after a crash."""

    last_restart: float = 0.0
    # window id -> what its screen shows, and since when
    pane_hashes: dict[str, ScreenSeen] = field(default_factory=dict)
    pause_reported: str | None = None
    # What is wrong with the bus's database, once said; None while it works.
    bus_trouble: str | None = None
    # The controller's screen while it has no transcript yet, and since when it shows that.
    controller_untranscribed: ScreenSeen | None = None


class Daemon:
    def __init__(self, project: Project, config: DaemonConfig, env: Mapping[str, str]) -> None:
        if config.mode not in MODES:
            raise LegionError(f"unknown controller mode {config.mode!r} (known: auto, llm)")
        self.project = project
        self.config = config
        self.env = dict(env)
        # Its own calls go straight to the backends: it holds the credentials.
        self.backends: Backends = open_backends(project, direct=True)
        self.workers: WorkerManager = open_workers(project, self.backends, self.env)
        self.log = ActionLog(self.backends.db)
        self.judgments = JudgmentQueue(self.backends.db)
        self.pause = DispatchPause(self.backends.db)
        oracle_timeout = config.oracle_timeout
        self.reconciler = Reconciler(
            project,
            self.backends.tracker,
            self.backends.forge,
            self.workers,
            self.log,
            oracle=True,
            oracle_timeout=config.stale_after if oracle_timeout is None else oracle_timeout,
        )
        self.memory = _Memory()
        self._bus: Bus | None = None  # opened at the first delivery: a broken bus stops nothing
        self._stopping = False
        self.stopped_by: int | None = None  # the signal that stopped the run, if one did
        self.workers.should_stop = lambda: self._stopping  # no wait outlasts a stop
        self._next_wait = config.tick
        self._watcher: Watcher | None = None
        self._bus_failed_now = False  # a bus step failed on the bus's database this tick

    @property
    def paused_reason(self) -> str | None:
        """Why dispatch is paused (one line: the cause and the fix), or None when it is not."""
        return self.pause.reason()

    # -- lifecycle -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        state = self.project.state_dir
        with open_private(state / "daemon.lock") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                pid = running_pid(self.project)
                raise ConflictError(
                    f"Legion is already running for this project (pid {pid}); "
                    "`legion stop` stops it"
                ) from None
            write_private(pid_file(self.project), f"{os.getpid()}\n")
            try:
                yield
            finally:
                pid_file(self.project).unlink(missing_ok=True)
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._stopping and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now, mid-pass
        self._stopping = True
        self.stopped_by = signum  # the demo says it was interrupted, not out of time
        if self.config.say_stop:
            name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            print(
                f"legion: {name}: stopping the daemon (pid {os.getpid()}) once this pass ends; "
                "the controller and workers keep running (`legion stop --all` closes them)",
                file=sys.stderr,
                flush=True,
            )

    def run(self) -> None:
        with self._exclusive():
            previous = {
                sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)
            }
            fifo = wake_fifo(self.project)
            with contextlib.suppress(FileNotFoundError):
                fifo.unlink()
            os.mkfifo(fifo, 0o600)
            relay: RelayServer | None = None
            # Read-write, so the FIFO never reports end-of-file when a writer goes away.
            fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
            started = time.monotonic()
            self.log.append(
                "-",
                "daemon_start",
                OutcomeKind.DONE,
                f"pid {os.getpid()}, {self.config.mode} mode",
            )
            # A start is the user's word that the cause of a pause is fixed.
            cleared = self.pause.clear()
            if cleared is not None:
                self.log.append("-", "resume_dispatch", OutcomeKind.DONE, f"was: {cleared}")
            try:
                relay = self._start_relay()  # before the first tick starts any session
                while not self._stopping:
                    self.tick()
                    if self._finished(started):
                        break
                    self._wait(fd)
            finally:
                os.close(fd)
                if relay is not None:
                    relay.stop()
                with contextlib.suppress(FileNotFoundError):
                    fifo.unlink()
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
                if self._bus is not None:
                    self._bus.close()
                self.log.append("-", "daemon_stop", OutcomeKind.DONE, f"pid {os.getpid()}")

    def _start_relay(self) -> RelayServer | None:
        """The relay socket, when sessions need one; the daemon holds the project's lock, so a
        socket left by a killed daemon is replaced."""
        if not relay_needed(self.project.settings):
            return None
        project = self.project
        server = relay_server(project.state_dir, lambda: open_backends(project, direct=True))
        server.start()
        return server

    def _finished(self, started: float) -> bool:
        if self.config.run_for is not None and time.monotonic() - started >= self.config.run_for:
            return True
        if self.config.stop_on_pause and self.memory.pause_reported is not None:
            return True
        stop_when = self.config.stop_when
        return bool(stop_when is not None and stop_when(self.backends))

    def _wait(self, fd: int) -> None:
        """Sleep until the next tick, or until a `legion` command signals a change."""
        deadline = time.monotonic() + self._next_wait
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
                time.sleep(0.02)  # let a burst of changes settle into one pass
                with contextlib.suppress(BlockingIOError):
                    os.read(fd, 4096)
                return

    # -- one tick ------------------------------------------------------------------------------

    def tick(self) -> None:
        heartbeat = heartbeat_file(self.project)
        touch_private(heartbeat)
        self._next_wait = self.config.tick
        self._step("controller_health", self.ensure_controller)
        self._step("worker_health", self.kill_stuck_workers)
        self._step("wake_controller", self.note_handled)
        # Bus messages before the controller's own wake-ups: a wake-up typed first would keep
        # an idle controller busy (or just active) at every tick, and a message would wait for
        # a quiet moment that never comes. Statuses before delivery: both steps share one look
        # at the sessions, and a delivery's "busy" must not be undone by a look taken before it.
        self._watcher = None  # a new look (on the bus as it is now)
        self._check_bus()
        self._step("deliver_messages", self._bus_steps)
        self._bus_works()
        if self.config.mode == "auto":
            self._step("reconcile", self._reconcile)
            self._step("wake_controller", self.deliver_judgments)
        else:
            self._step("wake_controller", self.wake_llm_controller)
        self._step("pause_dispatch", self._report_pause)

    def _step(self, name: str, step: Any) -> None:
        """One part of a tick. Whatever goes wrong is logged and the daemon carries on: it is the
        thing that must not stop."""
        try:
            step()
        except StoreError as exc:
            if not self._bus_failed(name, exc):
                self._log_failure(name, str(exc))
        except LegionError as exc:
            self._log_failure(name, str(exc))
        except Exception as exc:
            self._log_failure(name, f"internal error: {type(exc).__name__}: {exc}")

    def _log_failure(self, name: str, detail: str) -> None:
        try:
            self.log.append("-", name, OutcomeKind.FAILED, detail)
        except LegionError:
            print(f"legion daemon: {name} failed: {detail}", file=sys.stderr, flush=True)

    def _reconcile(self) -> None:
        quiet = self.reconciler.quiet_for()
        if quiet > 0:  # a backend is rate limited: ask nothing until its reset
            self._next_wait = min(self.config.tick, quiet)
            return
        outcomes = self.reconciler.run()
        # A worker that said it is done may still be finishing its last message: look again
        # when the reconciler says, rather than a whole tick later.
        waits = [o.retry_after for o in outcomes if o.retry_after is not None]
        if waits:
            self._next_wait = max(0.05, min(self.config.tick, *waits))

    def _report_pause(self) -> None:
        """Say once, on stderr (the daemon's log when it runs in the background), that dispatch
        is paused and why; the reconciler wrote the same line to the action log."""
        reason = self.paused_reason
        quiet = not self.config.say_pause
        if reason is not None and reason != self.memory.pause_reported and not quiet:
            print(f"legion: {reason}", file=sys.stderr, flush=True)
        self.memory.pause_reported = reason

    def _start_failed(self, cause: str) -> None:
        reason = self.pause.start_failed(cause)
        if reason is not None:
            self.log.append("-", "pause_dispatch", OutcomeKind.FAILED, reason)

    # -- the controller ------------------------------------------------------------------------

    @property
    def controller_session(self) -> str:
        return controller_session_id(self.project.settings.project_id)

    def controller_transcript(self) -> Path:
        runtime = self.workers.controller_runtime
        return runtime.transcript(self.env, self.project.root, self.controller_session)

    def controller_state(self) -> tuple[SessionState, float | None]:
        return controller_state_of(self.project, self.workers)

    def _transcript_size(self) -> int:
        return transcript_size(self.controller_transcript())

    def ensure_controller(self) -> None:
        try:
            state, activity = self.controller_state()
        except LegionError as exc:
            # tmux did not answer: the controller may well be running. Unknown is not dead.
            self._log_failure("controller_health", f"controller state unknown, left alone: {exc}")
            return
        stale = stale_mid_turn(state, activity, time.time(), self.config.stale_after)
        silent = self._stuck_before_transcript(state, activity)
        if state is not SessionState.DEAD and not stale and not silent:
            return
        since = time.monotonic() - self.memory.last_restart
        if self.memory.last_restart and since < self.config.restart_cooldown:
            return  # cooldown: try again on a later tick
        why = "stale" if stale else "not running"
        if silent:
            why = f"stale: no transcript, the same screen for {self.config.stale_after:g} s"
        # A (re)started controller is given every open item it has not handled yet: whatever
        # was typed into the previous one may have been lost with it.
        items = [item for item in self.judgments.open_items() if item.handled_at is None]
        reason = f"start ({why})"
        if items:
            reason += f"; needs judgment: {wake_reason(items)}"
        mark = self._transcript_size()
        try:
            self.start_controller(reason)
        except START_FAILURES as exc:
            self._start_failed(str(exc))
            raise
        finally:
            # The cooldown counts from when the new controller is up: closing the old one may
            # take seconds, and two restarts must never come closer than the cooldown.
            self.memory.last_restart = time.monotonic()
        fault_point("controller_started")
        self.judgments.delivered([item.id for item in items], mark)
        self.log.append("-", "restart_controller", OutcomeKind.DONE, why)

    def _stuck_before_transcript(self, state: SessionState, activity: float | None) -> bool:
        """Whether the live controller has written no transcript, and its screen has shown the
        same thing, for `stale_after` seconds: a CLI stuck before its first turn (a first-run
        screen, a prompt it never took) would otherwise read as running forever. A screen that
        shows nothing yet is a CLI still loading (seconds on a busy machine), not one stuck."""
        window = None
        if state is SessionState.RUNNING and activity is None:
            window = self.workers.tmux.find_window(self.workers.session, CONTROLLER_WINDOW)
        if window is None or window.pane_dead:
            self.memory.controller_untranscribed = None
            return False
        screen = self.workers.tmux.capture(window.id, lines=60)
        digest = hashlib.sha256(screen.encode()).hexdigest() if screen.strip() else ""
        now = time.monotonic()
        seen = screen_seen(self.memory.controller_untranscribed, window.id, digest, now)
        self.memory.controller_untranscribed = seen
        return screen_stuck(seen, now, self.config.stale_after)

    def start_controller(self, reason: str) -> None:
        self.workers.start_session_window(
            CONTROLLER_WINDOW,
            self.controller_session,
            controller_prompt(self.config.mode, reason, self.workers.controller_runtime),
            self.project.root,
            {"LEGION_MODE": "controller", "LEGION_SESSION_ID": self.controller_session},
            issue=None,  # its capability covers the project: it (and its Oracle) act on any issue
        )

    def _idle_controller_window(self) -> str | None:
        """The controller's window when it is idle (a prompt typed now is taken as a new turn);
        None when it is busy, blocked, dead or cannot be observed, or has only just ended its
        turn (then the next tick comes soon)."""
        state, activity = self.controller_state()
        if state is not SessionState.IDLE:
            return None  # busy, blocked or dead: a prompt now would be lost or queued twice
        if settling(activity, time.time()):
            self._next_wait = min(self._next_wait, SETTLE_S)
            return None
        window = self.workers.tmux.find_window(self.workers.session, CONTROLLER_WINDOW)
        return None if window is None else window.id

    def _type_to_controller(self, window_id: str, reason: str, items: list[Judgment]) -> None:
        """Type a wake-up into the idle controller. Its items count as delivered only once the
        controller's transcript has recorded the prompt."""
        ids = [item.id for item in items]
        transcript = self.controller_transcript()
        mark = transcript_size(transcript)
        try:
            prompt = controller_prompt(self.config.mode, reason, self.workers.controller_runtime)
            accepted = type_prompt(self.workers.tmux, window_id, prompt, transcript, mark)
        except LegionError:
            self.judgments.attempted(ids)
            raise
        if not accepted:
            self.judgments.attempted(ids)
            self._log_failure("wake_controller", f"not taken by the controller: {reason}")
            return
        fault_point("judgment_typed")
        self.judgments.delivered(ids, mark)
        self.log.append("-", "wake_controller", OutcomeKind.DONE, reason)

    def due_judgments(self) -> list[Judgment]:
        """Open items not delivered yet (a handled item is never delivered again)."""
        return [
            item
            for item in self.judgments.open_items()
            if item.delivered_at is None and item.handled_at is None
        ]

    def deliver_judgments(self) -> None:
        """Auto mode: wake the controller for the open judgment items not yet delivered, when
        it is idle; an item that cannot be delivered now stays pending and is tried next tick."""
        due = self.due_judgments()
        if not due:
            return
        window = self._idle_controller_window()
        if window is None:
            return
        self._type_to_controller(window, f"wake: needs judgment: {wake_reason(due)}", due)

    def wake_llm_controller(self) -> None:
        """LLM mode: the controller reconciles; wake it each tick it is idle, naming the
        judgment items it has not been given yet."""
        window = self._idle_controller_window()
        if window is None:
            return
        due = self.due_judgments()
        reason = "wake: tick"
        if due:
            reason += f"; needs judgment: {wake_reason(due)}"
        self._type_to_controller(window, reason, due)

    def note_handled(self) -> None:
        """Mark delivered items handled once the controller has ended a turn after receiving
        them: it is idle and its transcript grew past the delivery."""
        delivered = [
            item
            for item in self.judgments.open_items()
            if item.delivered_at is not None and item.handled_at is None
        ]
        if not delivered:
            return
        state, _ = self.controller_state()
        if state is not SessionState.IDLE:
            return
        size = self._transcript_size()
        self.judgments.handled(
            item.id
            for item in delivered
            if item.delivered_mark is not None and transcript_grew(item.delivered_mark, size)
        )

    # -- the bus -------------------------------------------------------------------------------

    @property
    def bus(self) -> Bus:
        if self._bus is None:
            self._bus = open_bus(self.env)
        return self._bus

    def _drop_bus(self) -> None:
        """Close the bus's connection: the next use opens the file afresh."""
        bus, self._bus = self._bus, None
        self._watcher = None  # it holds the old connection
        if bus is not None:
            with contextlib.suppress(Exception):  # a broken connection is dropped all the same
                bus.close()

    def _check_bus(self) -> None:
        """A bus file put back from a copy (or moved aside) while the daemon runs: the open
        connection would go on reading the old file, and nothing would be delivered."""
        if self._bus is not None and self._bus.replaced():
            self._drop_bus()
            self.log.append(
                "-", "bus", OutcomeKind.DONE, f"{bus_path(self.env)} was replaced: reopened"
            )

    def _bus_failed(self, name: str, exc: StoreError) -> bool:
        """Whether `exc` is the bus's database failing (corrupt, unreadable, locked too long):
        then its connection is dropped, so each tick opens it afresh until it works again, and
        the failure is logged once, not at every tick."""
        if not str(exc).startswith(f"{bus_path(self.env)}:"):
            return False  # the project's own database: the step's failure, logged as usual
        self._drop_bus()
        if self.memory.bus_trouble is None:
            self._log_failure(name, f"{exc} (the bus is opened afresh at each tick until it works)")
        self.memory.bus_trouble = str(exc)
        self._bus_failed_now = True
        return True

    def _bus_works(self) -> None:
        """After a tick's bus steps: say once that a bus which failed works again."""
        failed, self._bus_failed_now = self._bus_failed_now, False
        if not failed and self.memory.bus_trouble is not None:
            self.memory.bus_trouble = None
            self.log.append("-", "bus", OutcomeKind.DONE, "the bus works again")

    @property
    def watcher(self) -> Watcher:
        """The project's statuses and deliveries (`legion.watch`), on one look at the
        sessions per tick, shared by both steps (a new one each tick)."""
        if self._watcher is None:
            self._watcher = Watcher(
                self.project,
                self.workers,
                self.bus,
                self.log,
                resume=True,
                paused=lambda: self.paused_reason,
            )
        return self._watcher

    def _bus_steps(self) -> None:
        """Statuses, then deliveries, under the project's watch lock: a `legion say` or a TUI
        delivering while no daemon ran finishes first, and this tick then finds it done."""
        with watch_lock(self.project):
            self._step("agent_status", self.sync_agent_statuses)
            self._step("deliver_messages", self.deliver_messages)

    def deliver_messages(self) -> None:
        """Hand each pending message to the agents of this project it addresses
        (`Watcher.deliver`); a session whose turn has only just ended is come back to soon."""
        self.watcher.deliver()
        if self.watcher.retry_in is not None:
            self._next_wait = min(self._next_wait, self.watcher.retry_in)

    def sync_agent_statuses(self) -> None:
        """Keep each agent's status on the bus true to its session (`Watcher.sync_statuses`)."""
        self.watcher.sync_statuses()

    # -- workers -------------------------------------------------------------------------------

    def kill_stuck_workers(self) -> None:
        """Kill a worker only when two signals agree: no transcript activity for `stale_after`
        seconds, and a screen that has not changed for as long. (Comparing with the last tick
        alone is not enough: ticks can come a moment apart, and a thinking CLI's spinner shows
        the same frame again within seconds.)"""
        seen: dict[str, ScreenSeen] = {}
        now = time.monotonic()
        # tmux not answering raises here: nothing is killed on what cannot be seen.
        for view in self.workers.views():
            # Idle counts too: a worker that ended its turn without finishing its mode (it still
            # holds worker-active, or the reconciler would have retired it) is as stuck.
            if view.state not in (SessionState.RUNNING, SessionState.IDLE) or view.window is None:
                continue
            screen = self.workers.tmux.capture(view.window.id, lines=60)
            digest = hashlib.sha256(screen.encode()).hexdigest()
            before = self.memory.pane_hashes.get(view.window.id)
            screen_now = seen[view.window.id] = screen_seen(before, view.window.id, digest, now)
            # A worker with no transcript yet is starting: its age counts from its start.
            last = view.last_activity or _timestamp(view.record.started_at)
            if worker_stuck(last, time.time(), screen_now, now, self.config.stale_after):
                self.workers.tmux.kill_window(view.window.id)
                quiet_for = f"{self.config.stale_after:g} s"
                self.log.append(
                    view.record.issue,
                    "kill_stuck_worker",
                    OutcomeKind.DONE,
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
