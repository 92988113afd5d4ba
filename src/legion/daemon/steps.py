"""A tick's steps: each is one job, run under one guard, and says when it wants to run again.

In the manner of controller-runtime's reconcile `Result`: a step returns a `StepResult` whose
`requeue_after` asks for the next tick sooner than the configured one (a worker finishing its
last message, a session whose turn has only just ended, a backend's rate limit that resets
soon); the daemon waits for the soonest. What a step cannot do is an error it raises; the
guard logs it and the daemon carries on. An issue whose step a backend refused backs off on
its own (`legion.core.backoff`, in the reconciler), so a step's error never stops the others.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from legion.errors import LegionError
from legion.store.actionlog import ActionLog, OutcomeKind

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepResult:
    """What a step asks of the loop: run again within `requeue_after` seconds (None: at the
    next tick, whenever that is)."""

    requeue_after: float | None = None


DONE = StepResult()


class Role(enum.Enum):
    """What this daemon is at a tick: the leader (on one machine, or by hand in manual mode,
    always), or a follower of a fleet another host leads, which runs only the workers the
    leader placed on it (`legion.sessions.placement`)."""

    LEADER = "leader"
    FOLLOWER = "follower"


class Where(enum.Enum):
    """Which daemons run a step."""

    LEADER_ONLY = "leader only"
    FOLLOWERS_ONLY = "followers only"
    EVERY_HOST = "every host"

    def runs_as(self, role: Role) -> bool:
        if self is Where.EVERY_HOST:
            return True
        return (role is Role.LEADER) == (self is Where.LEADER_ONLY)


@dataclass(frozen=True)
class Step:
    """A named part of a tick (its name is the action it logs a failure under), and which
    daemons run it."""

    name: str
    run: Callable[[], StepResult]
    where: Where = Where.LEADER_ONLY


def soonest(tick: float, results: Iterable[StepResult], floor: float = 0.05) -> float:
    """How long the daemon waits: the tick, or sooner when a step asked to be run again."""
    waits = [result.requeue_after for result in results if result.requeue_after is not None]
    return max(floor, min(tick, *waits)) if waits else tick


def log_failure(log: ActionLog, name: str, detail: str) -> None:
    """A step's failure, in the action log; in the daemon's log if even that fails."""
    try:
        log.append("-", name, OutcomeKind.FAILED, detail)
    except LegionError as exc:
        logger.error("%s failed: %s (not in the action log: %s)", name, detail, exc)
