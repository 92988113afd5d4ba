"""The swarm's status, read once into a typed report: the daemon, the controller, the workers,
WIP, the dispatch pause, the judgment queue, kept workspaces, tokens and the last actions.
`legion status` renders it (text or JSON); anything else that shows the swarm reads the same
report, so what counts as "not started" or "unknown" is decided here only."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from legion.config import Project
from legion.core.liveness import SessionState
from legion.core.usage import Usage
from legion.daemon_link import daemon_ready, heartbeat_file, hosts_controller, running_pid
from legion.errors import LegionError
from legion.fleet.hosts import Fleet, Host, host_name, hosts_line
from legion.proxy import ProxyAccess, read_access
from legion.proxy.egress_refusals import RefusalCount, refusal_counts
from legion.sandbox import Sandbox, reported
from legion.store import in_fleet

if TYPE_CHECKING:
    from legion.backends import Backends
    from legion.reconcile.judgments import Judgment
    from legion.sessions.pause import PauseState
    from legion.sessions.roster import WorkerView
    from legion.sessions.workers import WorkerManager
    from legion.store.actionlog import Entry


# A session that is not running while no daemon runs: it ended with the swarm (`legion stop
# --all`, the end of `legion demo`), or ran past a stop; nothing restarts it before a start.
# With a daemon running, one not running is "dead": the daemon restarts or resumes it.
STOPPED = "stopped"
# The controller's states when no session of it lives here.
NOT_HERE = ("dead", STOPPED, "not started", "none (manual mode)")


def shown_state(state: SessionState, daemon_runs: bool) -> str:
    """A session's state as `legion status` and `legion workers` say it to people."""
    if state is SessionState.DEAD and not daemon_runs:
        return STOPPED
    return state.value


@dataclass(frozen=True)
class KeptWorkspace:
    issue: str
    reason: str  # why the sweep keeps it (unsaved work, ignored files), or why it could not look


@dataclass(frozen=True)
class StatusReport:
    daemon_pid: int | None
    heartbeat_age_s: float | None
    daemon_serving: bool  # its relay and model proxy up: sessions start (`daemon_ready`)
    controller_window: str
    controller_runtime: str
    # running, idle, blocked, dead (a daemon runs, to restart it); "stopped" (it ran, and no
    # daemon runs); "not started" (no window, transcript or daemon ever); "unknown" when tmux
    # did not answer; "on host X, the leader" on a fleet's follower
    controller_state: str
    controller_transcript_age_s: float | None
    workers: list[WorkerView] | None  # None: tmux did not answer, so which run is unknown
    unknown: str | None  # why the workers are unknown
    code_workers: int | None  # live workers that count against the WIP limit
    wip_limit: int | None
    pause: PauseState
    judgments: list[Judgment]
    kept_workspaces: list[KeptWorkspace]
    usage: Mapping[str, Mapping[str, Usage]]  # by issue a worker is on, by phase
    last_actions: list[Entry]
    now: float  # when it was read (ages are relative to it)
    # How Claude Code sessions reach the model: through the daemon's proxy (None: no daemon
    # runs, so a session started now is given the model key itself).
    model_proxy: ProxyAccess | None = None
    # Why no model request goes now (the provider's rate limit, the day's budget), or None.
    model_held: str | None = None
    # The fleet's host the controller runs on, when not this one (the leader's), else None.
    controller_host: str | None = None
    # How sessions run: confined by bubblewrap, or why not (`legion.sandbox`).
    sandbox: Sandbox | None = None
    # The fleet's hosts (`legion.fleet.hosts`), and the store's time they are measured against.
    hosts: list[Host] = field(default_factory=list)
    store_now: float = 0.0
    # Where confined sessions may connect besides the model (`sandbox_egress`), and the
    # connections the egress proxy refused lately, by session and destination.
    egress: tuple[str, ...] = ()
    egress_refused: list[RefusalCount] = field(default_factory=list)

    @property
    def egress_line(self) -> str:
        """One line: what confined sessions may reach besides the model."""
        if not self.egress:
            return "nothing but the model (sandbox_egress is empty)"
        return ", ".join(self.egress)

    @property
    def sandbox_line(self) -> str:
        """One line: whether sessions are confined, said loudly when they are not."""
        found = self.sandbox
        if found is None:
            return "NONE: sessions run unconfined (unknown)"
        return found.summary

    @property
    def model_line(self) -> str:
        """One line: who holds the model key, said plainly when the sessions do."""
        access = self.model_proxy
        if access is None:
            return "no daemon runs its proxy, so no session starts (`legion start`)"
        if access.holds_credential:
            return f"through the daemon's proxy ({access.url}); the daemon holds the key"
        return (
            f"through the daemon's proxy ({access.url}), metered; sessions use their own "
            "login (the daemon holds no key)"
        )

    def to_json(self, usage_json: Any) -> dict[str, Any]:
        """What `legion status --json` prints; `usage_json` renders an issue's phases."""
        data: dict[str, Any] = {
            "daemon": {
                "pid": self.daemon_pid,
                "heartbeat_age_s": self.heartbeat_age_s,
                "serving": self.daemon_serving,
            },
            "controller": {
                "window": self.controller_window,
                "runtime": self.controller_runtime,
                "state": self.controller_state,
                "transcript_age_s": self.controller_transcript_age_s,
                "host": self.controller_host,
            },
            "workers": None
            if self.workers is None
            else [view.to_json(self.now) for view in self.workers],
            "wip": {"code_workers": self.code_workers, "limit": self.wip_limit},
            "dispatch_paused": None if self.pause.reason is None else self.pause.to_json(),
            "judgments": [item.to_json() for item in self.judgments],
            "kept_workspaces": [
                {"issue": kept.issue, "reason": kept.reason} for kept in self.kept_workspaces
            ],
            # The tokens of each issue a worker is on, by phase (`legion issue show` for any).
            "usage": {issue: usage_json(phases) for issue, phases in self.usage.items()},
            "last_actions": [entry.to_json() for entry in self.last_actions],
            "model_proxy": None
            if self.model_proxy is None
            else {
                "url": self.model_proxy.url,
                "holds_credential": self.model_proxy.holds_credential,
                "credential_held_for": sorted(self.model_proxy.credentials),
            },
            "model_held": self.model_held,
            "sandbox": None
            if self.sandbox is None
            else {"confined": self.sandbox.confined, "why": self.sandbox.why},
        }
        data["hosts"] = [host.to_json(self.store_now) for host in self.hosts]
        data["egress"] = {
            "allowed": list(self.egress),
            "refused": [count.to_json() for count in self.egress_refused],
        }
        if self.unknown is not None:
            data["unknown"] = self.unknown
        return data

    @property
    def fleet_line(self) -> str | None:
        """The hosts in one line (`legion.fleet.hosts.hosts_line`); None on a fleet of one."""
        return hosts_line(self.hosts)


def read_status(project: Project, backends: Backends, workers: WorkerManager) -> StatusReport:
    """The project's status now. tmux that does not answer makes the workers unknown (and the
    controller's state `unknown`), never "none running"."""
    from legion.core.admission import counts_toward_wip
    from legion.proxy.limits import why_held
    from legion.reconcile.judgments import JudgmentQueue
    from legion.sessions.observer import CONTROLLER_WINDOW, controller_state_of
    from legion.sessions.pause import DispatchPause
    from legion.store.actionlog import ActionLog

    now = time.time()
    daemon = running_pid(project)
    try:
        beat: float | None = round(now - heartbeat_file(project).stat().st_mtime, 1)
    except OSError:
        beat = None  # no daemon ever ran here
    unknown: str | None = None
    views: list[WorkerView] | None
    activity: float | None
    try:
        views = workers.roster.views()
        controller, activity = controller_state_of(project, workers)
        state = controller.value
        if state == "dead" and activity is None and daemon is None and beat is None:
            state = "not started"  # no window, no transcript, no daemon ever: never ran
        elif state == "dead" and daemon is None:
            state = STOPPED  # ended with the swarm: nothing is to restart it before a start
        elif state == "dead" and daemon is not None and not hosts_controller(project):
            state = "none (manual mode)"  # the daemon runs no controller
    except LegionError as exc:  # tmux did not answer: what runs is unknown, not nothing
        unknown = str(exc)
        views, state, activity = None, "unknown", None
    hosts, store_now = Fleet(backends.db).hosts(project.settings.host_timeout)
    # In a fleet the controller runs on the leader's host: a follower has no window of it.
    leader = next((host.name for host in hosts if host.leader), None)
    elsewhere = (
        in_fleet(project.settings) and leader is not None and leader != host_name(project.settings)
    )
    controller_host = leader if elsewhere and state in NOT_HERE else None
    if controller_host is not None:
        state = f"on host {controller_host}, the leader"
    code = None
    if views is not None:
        code = sum(1 for v in views if v.state.is_live and counts_toward_wip(v.record.mode))
    usage: dict[str, dict[str, Usage]] = {}
    for issue in sorted({view.record.issue for view in views or []}):
        usage |= workers.roster.usage(issue)
    return StatusReport(
        daemon_pid=daemon,
        heartbeat_age_s=beat,
        daemon_serving=daemon is not None and daemon_ready(project),
        controller_window=CONTROLLER_WINDOW,
        controller_runtime=workers.runtimes.controller.name,
        controller_state=state,
        controller_host=controller_host,
        controller_transcript_age_s=None if activity is None else round(now - activity, 1),
        workers=views,
        unknown=unknown,
        code_workers=code,
        wip_limit=project.settings.wip_limit,
        pause=DispatchPause(backends.db).state(),
        judgments=JudgmentQueue(backends.db).open_items(),
        kept_workspaces=_kept_workspaces(project, backends, views),
        usage=usage,
        last_actions=ActionLog(backends.db).tail(10),
        now=now,
        model_proxy=None if daemon is None else read_access(project.state_dir),
        model_held=why_held(backends.db, project.settings.limits),
        sandbox=reported(project.settings.sandbox, project.env),
        hosts=hosts,
        store_now=store_now,
        egress=project.settings.sandbox_egress,
        egress_refused=refusal_counts(backends.db),
    )


def _kept_workspaces(
    project: Project, backends: Backends, views: list[WorkerView] | None
) -> list[KeptWorkspace]:
    """The workspaces of Done issues the sweep keeps (unsaved work, ignored files), and why."""
    from legion.backends import open_workspaces
    from legion.workspaces.sweep import sweep_done

    if views is None:
        return []  # tmux did not answer: which workers live is unknown
    live = {view.record.issue for view in views if view.state.is_live}
    try:
        results = sweep_done(backends.tracker, open_workspaces(project), live, dry_run=True)
    except LegionError as exc:
        return [KeptWorkspace("-", str(exc))]
    return [KeptWorkspace(r.issue, r.reason) for r in results if not r.would_remove]


@dataclass(frozen=True)
class RunningSession:
    """A session of the project whose process runs: the controller's or a worker's."""

    window: str
    issue: str | None = None  # None: the controller
    mode: str | None = None

    @property
    def name(self) -> str:
        return "the controller" if self.issue is None else f"{self.issue} {self.mode}"

    def to_json(self) -> dict[str, Any]:
        if self.issue is None:
            return {"kind": "controller", "window": self.window}
        return {"kind": "worker", "issue": self.issue, "mode": self.mode, "window": self.window}


def running_sessions(project: Project, workers: WorkerManager) -> list[RunningSession]:
    """The project's sessions whose process runs now (live: running, idle or blocked), the
    controller first (`legion stop` says which it leaves running, or stopped). Raises
    `LegionError` when tmux does not answer."""
    from legion.sessions.observer import CONTROLLER_WINDOW, controller_state_of

    found = []
    controller, _ = controller_state_of(project, workers)
    if controller.is_live:
        found.append(RunningSession(CONTROLLER_WINDOW))
    for view in workers.roster.views(here_only=True):
        if view.state.is_live:
            found.append(
                RunningSession(view.record.window, view.record.issue, view.record.mode.value)
            )
    return found
