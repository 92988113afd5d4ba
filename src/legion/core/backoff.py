"""Per-issue backoff after a tracker or forge refused an issue's step.

A failure that may pass (a timeout, a 5xx, a rate limit) is tried again after a delay that
doubles with each failure in a row, from `BASE_S` up to `CAP_S`, and never sooner than the
server's own `retry_after`. A failure that will not pass by itself (an invalid request, an item
not found) is reported once and not tried again until the issue's observed state changes (a
person or a worker did something), or after `PERMANENT_S` in case the cause was outside it.
Success or a change of the issue's state forgets the issue's failures. One issue's backoff never
delays another issue: each issue has its own.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

BASE_S = 30.0
CAP_S = 15 * 60.0
PERMANENT_S = 60 * 60.0


@dataclass(frozen=True, slots=True)
class Held:
    """An issue's failures in a row, and until when its steps wait."""

    failures: int
    until: float
    permanent: bool
    state: Hashable  # the observed state when it failed


def delay(
    failures: int, retry_after: float | None = None, *, base: float = BASE_S, cap: float = CAP_S
) -> float:
    """How long to wait after the `failures`-th transient failure in a row: `base`, doubled
    with each failure after the first, at most `cap`, never sooner than `retry_after`."""
    exponential = min(cap, base * 2.0 ** max(0, failures - 1))
    return max(exponential, retry_after or 0.0)


def after_failure(
    previous: Held | None,
    state: Hashable,
    now: float,
    *,
    retryable: bool,
    retry_after: float | None = None,
) -> Held:
    """The issue's backoff after one more failure of its step in `state`."""
    failures = 1 if previous is None or previous.state != state else previous.failures + 1
    if not retryable:
        return Held(failures, now + PERMANENT_S, True, state)
    return Held(failures, now + delay(failures, retry_after), False, state)


def waiting(held: Held | None, state: Hashable, now: float) -> float:
    """Seconds the issue's steps still wait (0: try now). A changed state ends the wait."""
    if held is None or held.state != state:
        return 0.0
    return max(0.0, held.until - now)
