"""Admission: whether a worker may start on an issue now, and if not, why. The one decision
every start asks, each asker passing the facts it has:

- the reconciler's pass (`reconcile/starts.py`): the dispatch pause, a provider's hold or the
  day's budget spent, the WIP limit, the hosts' capacity, a draining host, the issue's token
  budget, a daemon to host the session;
- `legion dispatch` and the TUI's `d` (`services/dispatch.py`): who asks (the controller is
  bounded by the issue's phase), the issues it waits for (unless forced);
- the worker manager, under its lock (`sessions/workers.py`): a live worker on the issue, and
  a daemon to host the session (`sessions/supervisor.py`).

A fact an asker does not have is no reason. Some of the pass's limits are not a person's: one
who dispatches by hand decides past the pause and a hold (the model proxy still refuses a spent
budget's requests); the WIP limit holds a dispatch too, unless forced (`legion dispatch
--force`). Pure: facts in, one refusal (the first, in `ORDER`) out."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from legion.core import roles
from legion.core.budget import Spent
from legion.core.model import Mode, Status


class Reason(Enum):
    """Why a start is refused, in the order they are asked."""

    ROLE = "role"  # the asker may not start this mode on this phase
    BLOCKED = "blocked"  # the issue waits for another one, not Done
    PAUSED = "paused"  # the dispatch pause (failed starts)
    MODEL_HELD = "model_held"  # a provider's hold, or the day's token budget spent
    WIP = "wip"  # the WIP limit reached
    CAPACITY = "capacity"  # the hosts run as many sessions as they may
    DRAINING = "draining"  # this host takes no new issue
    BUDGET = "budget"  # the issue's token budget spent: a human decides
    NO_DAEMON = "no_daemon"  # no daemon runs to host the session
    DAEMON_STARTING = "daemon_starting"  # its daemon runs, but serves no session yet
    LIVE_WORKER = "live_worker"  # the issue already has a live worker

    @property
    def waits(self) -> bool:
        """Whether the start comes by itself once the reason passes (a later pass starts it),
        as opposed to a refusal that needs someone to act first."""
        return self in WAITS


WAITS = frozenset(
    {
        Reason.PAUSED,
        Reason.MODEL_HELD,
        Reason.WIP,
        Reason.CAPACITY,
        Reason.DRAINING,
        Reason.DAEMON_STARTING,
    }
)


@dataclass(frozen=True)
class Refusal:
    reason: Reason
    detail: str  # one line, for the action log, `legion dispatch`'s error and the TUI


@dataclass(frozen=True)
class Load:
    """The sessions running against their limits: `code_workers` count toward `wip_limit`
    (every mode but review), `sessions` toward `capacity` (`max_sessions`, the fleet's sum)."""

    code_workers: int
    sessions: int
    wip_limit: int | None = None
    capacity: int | None = None
    in_fleet: bool = False


@dataclass(frozen=True)
class StartFacts:
    """What an asker knows of a start of `mode`'s worker on `issue` (neither: any session's
    start, the controller's included); None (or empty) is not known, or not this asker's to
    weigh."""

    issue: str = ""
    mode: Mode | None = None
    asked_by: str | None = None  # by hand: who (`roles.CONTROLLER`, a worker's mode, "")
    status: Status | None = None  # the issue's, for `asked_by`'s bounds
    force: bool = False  # started though the issue waits for another
    waiting_for: tuple[str, ...] = ()  # blockers not Done, each "LEG-2 (In Progress)"
    paused: bool = False
    model_held: str | None = None  # `proxy.limits.why_held`'s line
    load: Load | None = None
    draining: bool = False  # this host drains, and the issue never had a worker here
    budget_spent: Spent | None = None
    hosted: bool | None = None  # whether a daemon runs to host the session
    serving: bool | None = None  # whether that daemon serves sessions yet (relay, model proxy)
    daemon_for: str = ""  # the project's folder, said when no daemon runs
    live_worker: str | None = None  # the issue's live worker: "window (state)"


def counts_toward_wip(mode: Mode) -> bool:
    """Reviewers are short-lived and exempt; every other worker writes code or plans."""
    return mode is not Mode.REVIEW


def refusal(facts: StartFacts) -> Refusal | None:
    """The first reason, in `Reason`'s order, that `facts` give against the start; None when
    the start may go."""
    for check in ORDER:
        found = check(facts)
        if found is not None:
            return found
    return None


def _role(f: StartFacts) -> Refusal | None:
    if f.asked_by is None or f.status is None or f.mode is None:
        return None
    said = roles.dispatch_refusal(f.asked_by, f.status, f.mode, force=f.force)
    return None if said is None else Refusal(Reason.ROLE, said)


def _blocked(f: StartFacts) -> Refusal | None:
    if f.force or not f.waiting_for:
        return None
    return Refusal(
        Reason.BLOCKED,
        f"{f.issue} is blocked by {', '.join(f.waiting_for)}: Legion starts no worker on it "
        f"until they are Done (`legion issue block {f.issue} --remove ISSUE`, or --force to "
        "start one anyway)",
    )


def _paused(f: StartFacts) -> Refusal | None:
    if not f.paused:
        return None
    return Refusal(Reason.PAUSED, "dispatch paused (`legion status` says why)")


def _model_held(f: StartFacts) -> Refusal | None:
    return None if f.model_held is None else Refusal(Reason.MODEL_HELD, f.model_held)


def _wip(f: StartFacts) -> Refusal | None:
    load = f.load
    if load is None or load.wip_limit is None or f.mode is None:
        return None
    if not counts_toward_wip(f.mode):
        return None
    if load.code_workers < load.wip_limit:
        return None
    return Refusal(Reason.WIP, f"WIP limit {load.wip_limit} reached")


def _capacity(f: StartFacts) -> Refusal | None:
    load = f.load
    if load is None or load.capacity is None or load.sessions < load.capacity:
        return None
    where = "the fleet's hosts run" if load.in_fleet else "this host runs"
    return Refusal(
        Reason.CAPACITY, f"{where} {load.sessions} sessions, their capacity (`max_sessions`)"
    )


def _draining(f: StartFacts) -> Refusal | None:
    if not f.draining:
        return None
    return Refusal(
        Reason.DRAINING, "this host is draining: it takes no new issue (`legion host drain`)"
    )


def _budget(f: StartFacts) -> Refusal | None:
    spent = f.budget_spent
    if spent is None:
        return None
    return Refusal(Reason.BUDGET, f"token budget spent ({spent.used:,} of {spent.allowed:,})")


def _no_daemon(f: StartFacts) -> Refusal | None:
    if f.hosted is None:
        return None
    if f.hosted:
        # A session started before the daemon's model proxy is up would find none, and be
        # given the model key itself: it waits for the daemon to serve.
        if f.serving is False:
            return Refusal(
                Reason.DAEMON_STARTING,
                f"the daemon for {f.daemon_for or 'the project'} has not started serving "
                "sessions yet (its relay and model proxy)",
            )
        return None
    if not f.daemon_for:  # the pass's words: a pass run by hand while no daemon runs
        return Refusal(Reason.NO_DAEMON, "no daemon runs to host the worker (`legion start`)")
    return Refusal(
        Reason.NO_DAEMON,
        f"no daemon runs for {f.daemon_for}, and a session starts only under it (it holds "
        "the model key and Legion's state; sessions never do): start it first with `legion "
        "start`, or `legion start --mode manual` to start workers only by hand",
    )


def _live_worker(f: StartFacts) -> Refusal | None:
    if f.live_worker is None:
        return None
    return Refusal(
        Reason.LIVE_WORKER,
        f"{f.issue} already has a live worker: window {f.live_worker}; see `legion workers`",
    )


ORDER = (
    _role,
    _blocked,
    _paused,
    _model_held,
    _wip,
    _capacity,
    _draining,
    _budget,
    _no_daemon,
    _live_worker,
)
