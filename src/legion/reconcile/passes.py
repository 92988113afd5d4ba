"""One reconcile pass's skeleton: the order of its phases, and the `Reconciler` that runs passes
under the project's reconcile lock and keeps what lasts between them (each issue's backoff, a
rate limit's quiet). Each phase's job is a module of its own: `cleanup` (finished workers,
Done workspaces), `routing` (questions and judgments), `transitions` (the table's actions),
`starts` (admission of every worker start)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import suppress
from functools import partial

from legion.config import Project
from legion.core.decide import Action
from legion.core.decision_log import Decided, worth_logging
from legion.core.fleet import HostState, worker_capacity
from legion.core.model import Status
from legion.daemon_link import running_pid
from legion.diagnostics.tracing import span
from legion.files.locking import LOCK_TIMEOUT_S, exclusive
from legion.fleet.hosts import Fleet, this_host
from legion.forges.base import Forge
from legion.proxy.limits import why_held
from legion.reconcile.judgments import JudgmentQueue
from legion.reconcile.observe import IssueState, KnownLiveWorkers, Snapshot, observe
from legion.sessions.pause import DispatchPause
from legion.sessions.roster import WorkerView
from legion.sessions.workers import WorkerManager
from legion.store.actionlog import ActionLog
from legion.trackers.base import Tracker
from legion.trackers.splits import Splits
from legion.workspaces.base import Workspaces

from .cleanup import retire_finished, sweep_workspaces
from .context import PassContext
from .guard import Backoffs, PassGuard, Unknown
from .last_read import LastRead, on_a_service
from .outcomes import Outcome
from .routing import JudgmentRouter
from .starts import Starts
from .transitions import Transitions

# Later phases first: finishing work in flight beats starting new work.
PRIORITY: tuple[Action, ...] = (
    Action.RELAY_USER_FEEDBACK,
    Action.CLOSE_EPIC,
    Action.DISPATCH_FINISHER,
    Action.TRANSITION_TO_RETRO,
    Action.RESUME_IMPLEMENTER_FOR_RETRO,
    Action.RESUME_IMPLEMENTER_FOR_CHANGES,
    Action.RESUME_IMPLEMENTER_FOR_CHECKS,
    Action.TRANSITION_TO_NEEDS_REVIEW,
    Action.DISPATCH_REVIEWER,
    Action.REMOVE_WORKER_ACTIVE_AND_REDISPATCH,
    Action.REMOVE_STALE_WORKER_DONE,
    Action.TRANSITION_TO_IN_PROGRESS,
    Action.DISPATCH_IMPLEMENTER,
    Action.TRANSITION_TO_TODO,
    Action.DISPATCH_PLANNER,
    Action.DISPATCH_ARCHITECT,
)


def in_priority_order(snapshot: Snapshot) -> list[IssueState]:
    """The issues with a mechanical action, latest phase first, then by identifier."""
    order = {action: index for index, action in enumerate(PRIORITY)}
    todo = [s for s in snapshot.issues if s.decision.action.is_mechanical]
    todo.sort(key=lambda s: (order.get(s.decision.action, len(order)), s.issue.identifier))
    return todo


class Reconciler:
    """Runs passes for one project, one at a time under its reconcile lock, and keeps what
    lasts between them: each issue's backoff and a rate limit's quiet.

    `oracle`: whether a controller takes blocked workers' questions (the daemon runs one). With
    it, a blocked worker becomes an `oracle` item of the judgment queue, and only goes straight to
    a human when the controller has not answered or escalated it within `oracle_timeout` seconds
    (default: the `stale_after` setting), or ended a turn after receiving it without doing
    either. Without it (no daemon), the question goes straight to a human.
    """

    def __init__(
        self,
        project: Project,
        tracker: Tracker,
        forge: Forge,
        workers: WorkerManager,
        log: ActionLog,
        *,
        oracle: bool = False,
        oracle_timeout: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        workspaces: Workspaces | None = None,
        await_starts: bool = True,
    ) -> None:
        """`workspaces`: where Done issues' workspaces are swept from (the project's, when
        none is given). `await_starts`: whether a pass waits for the workers it started to
        begin; the daemon does not (it follows them up between its ticks), so that no hand-off
        waits for another worker's CLI to start up."""
        from legion.backends import open_workspaces

        self.project = project
        self.tracker = tracker
        self.forge = forge
        self.workers = workers
        self.workspaces = open_workspaces(project) if workspaces is None else workspaces
        self.log = log
        self.wip_limit = project.settings.wip_limit
        self.token_budget = project.settings.token_budget
        self.judgments = JudgmentQueue(log.db)
        self.pause = DispatchPause(log.db)
        self.oracle = oracle
        self.oracle_timeout = (
            project.settings.stale_after if oracle_timeout is None else oracle_timeout
        )
        self.backoffs = Backoffs(clock)
        self.await_starts = await_starts
        self.last_read = LastRead(log.db)  # what a pass read of a service, for the boards

    @property
    def clock(self) -> Callable[[], float]:
        """What each issue's backoff is timed on (`clock=`; a test sets its own)."""
        return self.backoffs.clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self.backoffs.clock = clock

    def quiet_for(self) -> float:
        """Seconds until a rate-limited backend may be asked again (0 when it may now)."""
        return self.backoffs.quiet_for()

    def run(
        self,
        *,
        dry_run: bool = False,
        wait: float = LOCK_TIMEOUT_S,
        on_wait: Callable[[str], None] | None = None,
        as_start: bool = False,
        only: str | None = None,
    ) -> list[Outcome]:
        """One pass. Another pass in progress is waited for, up to `wait` seconds (`on_wait`
        is told once whom it waits for); then ConflictError, naming the holder. `as_start`
        (with `dry_run`): as the first pass of a daemon `legion start` starts now would see it,
        with a daemon to host the workers and no dispatch pause (a start clears it). `only`
        (with `dry_run`): that issue's plan alone (`legion why`), the others not observed."""
        lock = self.project.state_dir / "reconcile.lock"
        with exclusive(lock, timeout=wait, on_wait=on_wait):
            plan = _Pass(self, dry_run, as_start=as_start and dry_run)
            plan.only = only if dry_run else None
            return plan.run()


class _Pass:
    """One pass's phases, in order; each is handed the workers as last observed."""

    def __init__(self, owner: Reconciler, dry_run: bool, *, as_start: bool = False) -> None:
        self.o = owner
        self.as_start = as_start
        self.only: str | None = None  # a dry run of one issue
        self.ctx = PassContext(
            tracker=owner.tracker,
            forge=owner.forge,
            workers=owner.workers,
            workspaces=owner.workspaces,
            log=owner.log,
            judgments=owner.judgments,
            pause=owner.pause,
            guard=PassGuard(
                owner.log,
                owner.pause,
                owner.backoffs,
                rate_limit_wait=owner.project.settings.tick,
                dry_run=dry_run,
            ),
            dry_run=dry_run,
        )

    def run(self) -> list[Outcome]:
        with suppress(Unknown):
            self._phases()
        return self.ctx.guard.outcomes

    def _observe_workers(self) -> list[WorkerView]:
        with span("pass: observe workers"):
            views: list[WorkerView] = self.ctx.guard.observed(
                "workers", self.o.workers.roster.views
            )
        return views

    def _phases(self) -> None:
        ctx, guard, o = self.ctx, self.ctx.guard, self.o
        guard.paused = (
            None if self.as_start else guard.observed("the dispatch pause", o.pause.reason)
        )
        views = self._observe_workers()
        with span("pass: list issues"):
            listed = guard.observed("issues", o.tracker.list_issues)
        if self.only is not None:
            listed = [issue for issue in listed if issue.identifier == self.only]
        issues = {issue.identifier: issue for issue in listed}
        before = len(guard.outcomes)
        router = JudgmentRouter(ctx, oracle=o.oracle, oracle_timeout=o.oracle_timeout)
        with span("pass: retire finished"):
            retire_finished(ctx, views, issues)
        with span("pass: route blocked"):
            router.route_blocked(views, issues)
        views = self._observe_workers()
        live = {view.record.issue for view in views if view.state.is_live}
        # The issues are read again only when retiring or routing wrote to some: on a real
        # tracker every read is a request against an hourly budget.
        fresh = None if len(guard.outcomes) > before else listed
        with span("pass: observe issues"):
            snapshot: Snapshot = guard.observed(
                "issues",
                lambda: observe(
                    o.project.settings.project_id,
                    o.tracker,
                    o.forge,
                    KnownLiveWorkers(live, o.workers.roster.latest_modes()),
                    issues=fresh,
                    opt_in=o.project.settings.backlog_opt_in_labels,
                    epic_children=Splits(o.log.db).epic_children(),
                ),
            )
        for error in snapshot.errors:
            guard.failed("-", "observe", error, "pull requests unknown: ")
        if on_a_service(o.project.settings) and not self.ctx.dry_run and not snapshot.errors:
            # What this pass read, for the boards: shown at once, with no request of theirs.
            guard.guarded("-", "keep_reading", partial(keep_reading, o, snapshot), plan=False)
        limits = o.project.settings.limits
        held = guard.observed("the model's hold", partial(why_held, o.log.db, limits))
        host, capacity = this_host(o.project.settings)
        if o.workers.in_fleet:
            # The fleet's hosts that take sessions, less the controller on this one: each
            # start is placed on one with room (`legion.core.fleet.place`).
            capacity = guard.observed("the fleet's room", partial(fleet_capacity, o))
        draining = guard.observed("this host's drain", partial(Fleet(o.log.db).draining, host))
        starts = Starts(
            ctx,
            views,
            wip_limit=o.wip_limit,
            token_budget=o.token_budget,
            model_held=held,
            hosted=self.as_start or running_pid(o.project) is not None,
            await_starts=o.await_starts,
            capacity=capacity,
            draining=bool(draining),
            known=o.workers.roster.latest_modes().keys(),
        )
        transitions = Transitions(ctx, views, starts)
        for state in in_priority_order(snapshot):
            transitions.execute(state)
        log_left_alone(guard, snapshot)
        with span("pass: await starts"):
            guard.guarded("-", "worker_start", starts.collect, plan=False)
        with span("pass: judgment queue"):
            guard.guarded(
                "-", "judgment_queue", partial(router.sync_judgments, snapshot, views), plan=False
            )
        done = {s.issue.identifier for s in snapshot.issues if s.issue.status is Status.DONE}
        with span("pass: sweep workspaces"):
            guard.guarded(
                "-", "sweep_workspaces", partial(sweep_workspaces, ctx, views, done), plan=False
            )


def keep_reading(o: Reconciler, snapshot: Snapshot) -> None:
    """Keep the pass's reading of a service's tracker and forge (`reconcile.last_read`): each
    issue with the pull request the forge gave for it."""
    prs = {
        s.issue.identifier: pr for s in snapshot.issues if (pr := s.pr or s.closed_pr) is not None
    }
    o.last_read.keep([s.issue for s in snapshot.issues], prs)


def log_left_alone(guard: PassGuard, snapshot: Snapshot) -> None:
    """The issues the table leaves as they are (a skip, or an issue for the controller's
    judgment), each logged with what it was decided from when its decision changed
    (`legion.core.decision_log.worth_logging`): a person asking why an issue sits still finds
    the moment it started to, and why."""
    if guard.dry_run:
        return  # nothing is logged, so nothing need be read
    last = guard.last_decisions()
    for state in snapshot.issues:
        verdict, observation = state.verdict, state.observation
        if verdict is None or observation is None or verdict.decision.action.is_mechanical:
            continue
        issue = state.issue.identifier
        if not worth_logging(last.get(issue), verdict):
            continue
        note = state.note
        guard.left_alone(
            issue,
            verdict.decision.action.value,
            verdict.why + (f": {note}" if note else ""),
            Decided(observation, verdict),
        )


def fleet_capacity(o: Reconciler) -> int:
    """How many workers the fleet's open hosts run at once: their capacities, less the
    controller this leader runs."""
    hosts, _ = Fleet(o.log.db).hosts(o.project.settings.host_timeout)
    return worker_capacity(h.capacity for h in hosts if h.state is HostState.UP)
