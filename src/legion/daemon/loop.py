"""The daemon's lifecycle: one process per project, holding its lock, its relay socket and its
wake pipe, running a tick's steps (`legion.daemon.steps`) until it is stopped. Each step is one
job in its own module; the daemon only runs them, in order, and waits for the soonest requeue.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any

from legion.backends import Backends, open_backends, open_workers
from legion.bus import bus_store
from legion.bus.sessions import project_channel_name
from legion.config import Project
from legion.daemon_link import (
    heartbeat_file,
    poke,
    running_pid,
    wake_fifo,
)
from legion.diagnostics import log as logs
from legion.diagnostics.tracing import mark, span
from legion.errors import LegionError, StoreError, StoreUnreachableError
from legion.files.private import private_folder, touch_private
from legion.fleet.fence import FenceProcess
from legion.fleet.hosts import FencedStore, host_name
from legion.proxy.egress import EgressProxy
from legion.proxy.server import ModelProxy
from legion.reconcile import Reconciler
from legion.reconcile.judgments import JudgmentQueue
from legion.relay.server import RelayServer
from legion.sessions.pause import DispatchPause
from legion.sessions.placement import wake_name
from legion.sessions.workers import WorkerManager
from legion.store import open_store
from legion.store.actionlog import ActionLog, OutcomeKind

from .budget_step import BudgetStop
from .bus_listener import BusListener
from .bus_steps import BusSteps
from .checkpoint_step import WorkspaceCheckpoints
from .checks_step import local_checks_step
from .claims import project_claimed
from .controller import ControllerSession, ControllerSupervisor, ControllerWakeups
from .fleet_step import FleetMembership
from .host_step import HostWork
from .idle_step import IdleSpendWatch
from .reaper import StuckWorkerReaper
from .reconcile_step import PauseReport, ReconcileStep
from .servers import start_egress_proxy, start_model_proxy, start_relay
from .start_followup_step import LOOK_EVERY_S, StartFollowUp
from .steps import DONE, Role, Step, StepResult, Where, log_failure, soonest
from .task_sync_step import task_sync_step

# However often the wake pipe is poked (any session can write it), a pass starts at most this
# long after the one before: a burst of pokes is one more pass, not one each (issue 35).
MIN_PASS_GAP_S = 0.25

logger = logging.getLogger(__name__)

# `manual`: the daemon hosts sessions (their model proxy and relay, the bus, budgets, health)
# but runs no controller and no reconcile pass: every worker is started by hand.
MODES = ("auto", "llm", "manual")


@dataclass
class _Servers:
    """What sessions reach a running daemon through, each once started."""

    relay: RelayServer | None = None
    model_proxy: ModelProxy | None = None
    egress_proxy: EgressProxy | None = None

    def stop(self) -> None:
        for server in (self.relay, self.model_proxy, self.egress_proxy):
            if server is not None:
                server.stop()  # the model proxy's file stays: the next start takes its port


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


class Daemon:
    def __init__(self, project: Project, config: DaemonConfig, env: Mapping[str, str]) -> None:
        if config.mode not in MODES:
            raise LegionError(
                f"unknown controller mode {config.mode!r} (known: {', '.join(MODES)})"
            )
        self.project = project
        self.config = config
        self.env = dict(env)
        # Its own calls go straight to the backends: it holds the credentials. Its store is
        # fenced by the leader lease while it leads (`legion.fleet.hosts`).
        self.fenced = FencedStore(open_store(project), host_name(project.settings))
        self.backends: Backends = open_backends(project, direct=True, store=self.fenced)
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
            oracle=config.mode != "manual",  # manual: no controller to ask
            oracle_timeout=config.stale_after if oracle_timeout is None else oracle_timeout,
            await_starts=False,  # followed up between ticks: `start_follow_up`
        )
        self.start_follow_up = StartFollowUp(self.workers, self.pause, self.log)
        self.budget_stop = BudgetStop(
            self.workers,
            self.backends.tracker,
            self.log,
            project.settings.token_budget,
            wake=lambda: poke(wake_fifo(project)),
        )
        controller = ControllerSession(project, self.workers, config.mode)
        self.membership = FleetMembership(
            project,
            self.fenced,
            self.log,
            stop_sessions=self._stop_sessions_now,
            wake=lambda: poke(wake_fifo(project)),
            unreachable=self._unreachable,
            sessions_running=self.workers.windows.running,
        )
        self.supervisor = ControllerSupervisor(
            controller,
            self.judgments,
            self.pause,
            self.log,
            stale_after=config.stale_after,
            restart_cooldown=config.restart_cooldown,
        )
        self.wakeups = ControllerWakeups(controller, self.judgments, self.log)
        self.reaper = StuckWorkerReaper(
            self.workers, self.log, stale_after=config.stale_after, pause=self.pause
        )
        self.delivery = BusSteps(project, self.workers, self.log, self.env, self.pause.reason)
        # With the bus in PostgreSQL, a post on another host wakes this daemon.
        bus_url = bus_store(self.env)
        self.bus_listener = (
            None
            if bus_url is None
            else BusListener(
                bus_url,
                lambda: project_channel_name(project),
                lambda: poke(wake_fifo(project)),
                # A start the leader asks of this host wakes it too.
                also=wake_name(project.settings.project_id, host_name(project.settings)),
            )
        )
        self.idle_spend = IdleSpendWatch(
            self.workers,
            self.backends.tracker,
            self.log,
            project.settings.idle_spend_limit,
            project.settings.regenerable,
            last_post=self.delivery.last_post,
        )
        # In a fleet, each checkpoint goes to the shared remote: the host that takes an issue
        # over from a lost one restores it from there.
        self.checkpoints = WorkspaceCheckpoints(
            self.workers,
            self.log,
            project.settings.checkpoint_every,
            remote=self.workers.shared_remote,
        )
        self.pause_report = PauseReport(self.pause, say=config.say_pause)
        self.local_checks = local_checks_step(project, self.backends.forge, self.workers, self.log)
        self.task_sync = task_sync_step(self.workers, self.backends.tracker, self.log)
        self.steps = self._steps()
        self._stopping = False
        self.stopped_by: int | None = None  # the signal that stopped the run, if one did
        self.workers.starts.should_stop = lambda: self._stopping  # no wait outlasts a stop
        self._next_wait = config.tick
        self._pass_started = 0.0  # time.monotonic() when the last tick began
        self._store_down: str | None = None  # why the store's server cannot be reached
        self._store_down_now = False  # a step of this tick found it so

    def _steps(self) -> list[Step]:
        """A tick, in order, each step saying which daemons run it (`Where`): the leader runs
        the controller and the reconcile pass; in a fleet, every host carries out what was
        asked of it and reports its workers (`legion.daemon.host_step`), and a follower also
        closes the windows the leader retired and sweeps its own workspaces (the leader sweeps
        in its pass). What a tick runs is this list filtered by the daemon's role at the tick.

        A follower carries out the leader's commands first (a start asked of it is what woke
        it), follows its starts up at once, and reports before it delivers; the leader does
        its own work first, then what other hosts asked of it, and reports last. Those three
        steps are listed twice, once where each role runs them. Bus messages before the
        controller's own wake-ups: a wake-up typed first would keep an idle controller busy
        (or just active) at every tick, and a message would wait for a quiet moment that
        never comes. Statuses before delivery: both share one look at the sessions, and a
        delivery's "busy" must not be undone by a look taken before it."""
        mode = self.config.mode
        controlled = mode != "manual"
        every, leader, followers = Where.EVERY_HOST, Where.LEADER_ONLY, Where.FOLLOWERS_ONLY
        work = HostWork(self.workers, self.log) if self.membership.in_fleet else None
        follow_up = self.start_follow_up.run
        steps = [
            Step("host_commands", work.commands, followers) if work else None,
            Step("worker_start", follow_up, followers) if work else None,
            Step("budget_stop", self.budget_stop.run, leader),
            Step("idle_spend", self.idle_spend.run, leader),
            Step("controller_health", self.supervisor.run, leader) if controlled else None,
            Step("exited_sessions", self._exited_sessions, every),
            Step("worker_health", self.reaper.run, every),
            Step("close_retired", work.close_retired, followers) if work else None,
            Step("session_reports", work.report, followers) if work else None,
            Step("wake_controller", self.wakeups.note_handled, leader) if controlled else None,
            Step("deliver_messages", self._bus_steps, every),
            # The leader follows up here the starts its own pass made (between ticks too).
            Step("worker_start", follow_up, leader) if mode == "auto" else None,
            # Before the pass: a check that ended is what it decides on.
            Step("local_checks", self.local_checks.run, leader) if self.local_checks else None,
            Step("reconcile", ReconcileStep(self.reconciler).run, leader)
            if mode == "auto"
            else None,
            Step("wake_controller", self.wakeups.deliver_judgments, leader)
            if mode == "auto"
            else None,
            Step("wake_controller", self.wakeups.wake_llm_controller, leader)
            if mode == "llm"
            else None,
            Step("checkpoint", self.checkpoints.run, every),
            # Each host mirrors its own workers' task lists (their files are on its disk).
            Step("task_sync", self.task_sync.run, every) if self.task_sync else None,
            Step("sweep_workspaces", work.sweep, followers) if work else None,
            Step("pause_dispatch", self.pause_report.run, leader),
            # An answer for one of the leader's own workers may come through another host.
            Step("host_commands", work.commands, leader) if work else None,
            Step("session_reports", work.report, leader) if work else None,
        ]
        return [step for step in steps if step is not None]

    def _role(self) -> Role | None:
        """What this daemon is at this tick. A follower (another host leads) runs no
        controller and no pass: it runs the workers the leader placed on it, and waits to
        lead. By hand (manual mode) a host runs the sessions started on it either way. None:
        on one machine, a daemon that has not taken the lease yet does nothing until it has."""
        if self.membership.leading or self.config.mode == "manual":
            return Role.LEADER
        return Role.FOLLOWER if self.membership.in_fleet else None

    def _exited_sessions(self) -> StepResult:
        """The sessions whose CLI exited by itself lose their capability, as every session
        Legion ends does (`SessionWindows.end_exited`)."""
        self.workers.windows.end_exited()
        return DONE

    @property
    def paused_reason(self) -> str | None:
        """Why dispatch is paused (one line: the cause and the fix), or None when it is not."""
        return self.pause.reason()

    # -- lifecycle -----------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._stopping and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now, mid-pass
        self._stopping = True
        self.stopped_by = signum  # the demo says it was interrupted, not out of time
        if self.config.say_stop:
            name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            logger.info(
                "%s: stopping the daemon (pid %d) once this pass ends; the controller and "
                "workers keep running (`legion stop --all` closes them)",
                name,
                os.getpid(),
            )

    def run(self) -> None:
        with project_claimed(self.project, self.config.mode) as serving:
            previous = {
                sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)
            }
            fifo = wake_fifo(self.project)
            private_folder(fifo.parent)
            with contextlib.suppress(FileNotFoundError):
                fifo.unlink()
            os.mkfifo(fifo, 0o600)
            servers = _Servers()
            # Read-write, so the FIFO never reports end-of-file when a writer goes away.
            fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
            started = time.monotonic()
            logger.info("daemon started (pid %d, %s mode)", os.getpid(), self.config.mode)
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
            fence: FenceProcess | None = None
            try:
                fence = self._start_fence()
                self.membership.start()
                if self.bus_listener is not None:
                    self.bus_listener.start()
                # Before the first tick starts any session.
                self._serve(servers)
                serving()  # `legion dispatch` waited for this: sessions find the proxy now
                while not self._stopping:
                    self.tick()
                    if self._finished(started):
                        break
                    self._wait(fd)
            finally:
                self._leave(fence)
                if self.bus_listener is not None:
                    self.bus_listener.stop()
                os.close(fd)
                servers.stop()
                with contextlib.suppress(FileNotFoundError):
                    fifo.unlink()
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
                self.delivery.close()
                self.log.append("-", "daemon_stop", OutcomeKind.DONE, f"pid {os.getpid()}")
                logger.info("daemon stopped (pid %d)", os.getpid())

    def _serve(self, servers: _Servers) -> None:
        """Start what sessions reach the daemon through: the relay, the model proxy and the
        egress proxy, each put in `servers` as it runs (stopped with it, whatever fails)."""
        sender = self.checkpoints.sender  # a fleet's: done is said once sent
        servers.relay = start_relay(
            self.project,
            self.env,
            self.fenced,
            before_done=None if sender is None else sender.before_done,
        )
        servers.model_proxy = start_model_proxy(
            self.project,
            self.env,
            self.backends.db,
            self.workers.runtimes.controller.name,
            refused=self.budget_stop.refused,
        )
        servers.egress_proxy = start_egress_proxy(self.project, self.backends.db)

    def _start_fence(self) -> FenceProcess | None:
        """In a fleet, the fence that closes this host's sessions if the daemon dies while it
        leads (`legion.fleet.fence`); on one machine, none."""
        if not self.membership.in_fleet:
            return None
        windows = self.workers.windows
        fence = FenceProcess(windows.tmux, windows.session, self.project.state_dir / "daemon.lock")
        self.membership.on_lease = fence.lease_until
        return fence

    def _leave(self, fence: FenceProcess | None) -> None:
        """Leave the fleet. A lease kept for the sessions that go on runs out with them still
        here, and the fence closes them then (unless a daemon here takes it back first)."""
        kept = self.membership.stop()
        if fence is None:
            return
        if kept:
            fence.close()
        else:
            fence.release()

    def _finished(self, started: float) -> bool:
        if self.config.run_for is not None and time.monotonic() - started >= self.config.run_for:
            return True
        if self.config.stop_on_pause and self.pause_report.reported is not None:
            return True
        stop_when = self.config.stop_when
        return bool(stop_when is not None and stop_when(self.backends))

    def _wait(self, fd: int) -> None:
        """Sleep until the next tick, or until a `legion` command signals a change; meanwhile,
        follow up the workers the last pass started."""
        deadline = time.monotonic() + self._next_wait
        while not self._stopping:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            starting = self.start_follow_up.pending
            try:
                ready, _, _ = select.select(
                    [fd], [], [], min(remaining, LOOK_EVERY_S if starting else 1.0)
                )
            except InterruptedError:
                continue
            if not ready and starting:
                self._run(Step("worker_start", self.start_follow_up.run))
            if self.membership.changed():
                return
            if ready:
                # Every poke so far is answered by the one pass that follows; no wait for more
                # (a burst's later pokes make one more pass, which costs less than a wait
                # every hand-off would pay).
                mark("daemon woken")
                _drain(fd)
                early = self._pass_started + MIN_PASS_GAP_S - time.monotonic()
                if early > 0:
                    time.sleep(early)
                    _drain(fd)  # the pokes of the gap are answered by the same pass
                return

    # -- one tick ------------------------------------------------------------------------------

    def _stop_sessions_now(self) -> bool:
        """This host's lease lapsed (or, a follower, its heartbeat): every session it runs ends
        now, before another host may start it under the same id (`WorkerManager.close_now`: a
        CLI slow to exit would otherwise run beside its successor). Whether there was a tmux
        session to close."""
        return self.workers.close_now()

    def _unreachable(self, why: str) -> None:
        """The store's server cannot be reached: said once, on the daemon's log (the action
        log is in the store), and once more when it answers again; steps wait meanwhile."""
        self._store_down_now = True
        if self._store_down is None:
            self._store_down = why
            logger.warning("%s; every step waits until it answers", why)

    def _store_back(self) -> None:
        down, self._store_down_now = self._store_down_now, False
        if not down and self._store_down is not None:
            self._store_down = None
            logger.info("the store answers again")
            with contextlib.suppress(LegionError):
                self.log.append("-", "store", OutcomeKind.DONE, "the store answers again")

    def tick(self) -> None:
        self._pass_started = time.monotonic()
        touch_private(heartbeat_file(self.project))
        # One look at the windows serves every step, until one opens or closes a window.
        with span("tick"), self.workers.windows.one_look():
            results = [self._run(Step("fleet", self.membership.follow))]
            self.workers.leading_epoch = self.membership.leading_epoch
            role = self._role()
            steps = [step for step in self.steps if role is not None and step.where.runs_as(role)]
            for step in steps:
                results.append(self._run(step))
                if self._store_down_now:
                    break  # the rest would wait for the store's server too: next tick
        self._store_back()
        self._next_wait = soonest(self.config.tick, results)

    def _run(self, step: Step) -> StepResult:
        """One part of a tick. Whatever goes wrong is logged and the daemon carries on: it is the
        thing that must not stop."""
        try:
            with span(f"tick: {step.name}"), logs.context(step=step.name):
                return step.run()
        except StoreUnreachableError as exc:
            self._unreachable(str(exc))
        except StoreError as exc:
            if not self.delivery.failed(step.name, exc):
                log_failure(self.log, step.name, str(exc))
        except LegionError as exc:
            log_failure(self.log, step.name, str(exc))
        except Exception as exc:
            log_failure(self.log, step.name, f"internal error: {type(exc).__name__}: {exc}")
        return StepResult()

    def _bus_steps(self) -> StepResult:
        """Statuses, then deliveries, under the project's watch lock."""
        self.delivery.begin()
        try:
            with self.delivery.locked():
                statuses = self._run(Step("agent_status", self.delivery.sync_statuses))
                delivered = self._run(Step("deliver_messages", self.delivery.deliver))
        finally:
            self.delivery.end()
        return StepResult(requeue_after=soonest(self.config.tick, [statuses, delivered], 0.0))


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


def _drain(fd: int) -> None:
    """Read every poke waiting in the wake pipe."""
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 4096):
            pass
