"""A pass's one guard: every state-changing step runs under it. A `LegionError` becomes a
failed outcome and leaves the issue for the next pass; a backend's failure of one issue's step
backs off that issue alone (`legion.core.backoff`: retryable kinds for longer each time, the
others until the issue changes); a refused credential pauses dispatch; a rate limit on the
pass's own reads keeps every pass away until the reset. Outcomes go to the action log. What
lasts from one pass to the next (each issue's backoff, a rate limit's quiet) is `Backoffs`,
which the reconciler keeps."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from legion.core import backoff
from legion.core.decision_log import Decided, DecisionKey
from legion.errors import BackendError, BackendErrorKind, LegionError, NotFoundError
from legion.sessions.pause import DispatchPause
from legion.store.actionlog import ActionLog, OutcomeKind

from .outcomes import Outcome, Step

_NUMBERS = re.compile(r"\d+")


class Unknown(Exception):
    """What the pass needs to know could not be observed."""


@dataclass(slots=True)
class Backoffs:
    """What the reconciler remembers between passes of the backends' refusals: each issue held
    back by a failed step (`held`, on `clock`), and no pass before `quiet_until` (a rate limit
    on the pass's own reads: "rate limited, until ...")."""

    clock: Callable[[], float] = time.monotonic
    held: dict[str, backoff.Held] = field(default_factory=dict)
    quiet_until: float = 0.0
    # The last deferral logged of each (issue, action), its numbers left out: a step that
    # waits (for a workspace's setup, a turn's end) is logged when its reason changes, not
    # at every pass.
    deferrals: dict[tuple[str, str], str] = field(default_factory=dict)
    # Each issue's last decision logged (`legion.core.decision_log`): a skip is logged when it
    # changes. Read from the log at the first pass that writes, so a restart does not log
    # every skip again.
    decisions: dict[str, DecisionKey] | None = None

    def quiet_for(self) -> float:
        """Seconds until a rate-limited backend may be asked again (0 when it may now)."""
        return max(0.0, self.quiet_until - time.monotonic())


class PassGuard:
    """One pass's outcomes, and the guard its steps run under. `rate_limit_wait`: how long a
    rate limit that gave no reset keeps passes away (a tick)."""

    def __init__(
        self,
        log: ActionLog,
        pause: DispatchPause,
        backoffs: Backoffs,
        *,
        rate_limit_wait: float,
        dry_run: bool,
    ) -> None:
        self.log = log
        self.pause = pause
        self.backoffs = backoffs
        self.rate_limit_wait = rate_limit_wait
        self.dry_run = dry_run
        self.outcomes: list[Outcome] = []
        self.paused: str | None = None  # why dispatch is paused, as this pass knows it

    def record(
        self,
        issue: str,
        action: str,
        kind: OutcomeKind,
        detail: str = "",
        retry_after: float | None = None,
        *,
        decided: Decided | None = None,
    ) -> None:
        """An outcome of the pass, in the action log unless a dry run (a deferral when its
        reason changed); `decided`: the table's decision it carried out, kept with it."""
        self.outcomes.append(Outcome(issue, action, kind, detail, retry_after))
        if self.dry_run:
            return
        if decided is not None:
            self.last_decisions()[issue] = decided.key
        key = (issue, action)
        if kind is OutcomeKind.DEFERRED:
            gist = _NUMBERS.sub("#", detail)  # "tried again in 41 s" is the same reason at 40
            if self.backoffs.deferrals.get(key) == gist:
                return
            self.backoffs.deferrals[key] = gist
        else:
            self.backoffs.deferrals.pop(key, None)
        self.log.append(issue, action, kind, detail, decided=decided)

    def left_alone(self, issue: str, action: str, detail: str, decided: Decided) -> None:
        """A decision that leaves the issue as it is, in the action log only (the pass did
        nothing, so it is no outcome of the pass); never in a dry run."""
        if self.dry_run:
            return
        self.last_decisions()[issue] = decided.key
        self.log.append(issue, action, OutcomeKind.SKIPPED, detail, decided=decided)

    def last_decisions(self) -> dict[str, DecisionKey]:
        """Each issue's last decision logged: the log's, read once, then this process's."""
        if self.backoffs.decisions is None:
            self.backoffs.decisions = self.log.last_decisions()
        return self.backoffs.decisions

    def failed(
        self,
        issue: str,
        action: str,
        exc: LegionError,
        prefix: str = "",
        *,
        state: Hashable | None = None,
        decided: Decided | None = None,
    ) -> None:
        """Record a failure, and act on a backend's by its kind: a refused credential stops
        dispatching (said once, as the dispatch pause, until the next `legion start`). An
        issue's step (`state`: the issue as observed) backs off that issue alone
        (`legion.core.backoff`): a transient failure or a rate limit for longer each time, an
        invalid request or an item not found until the issue changes. A rate limit on the
        pass's own reads keeps every pass away until the reset the server gave."""
        if state is not None and (
            isinstance(exc, NotFoundError)
            or (isinstance(exc, BackendError) and exc.kind is not BackendErrorKind.AUTH)
        ):
            # A NotFoundError (an adapter's: the issue or its PR is gone) will not pass by
            # itself, like a backend's own not-found: logged once, tried when the issue changes.
            self.back_off(issue, action, exc, state, prefix, decided=decided)
            return
        if isinstance(exc, BackendError) and exc.kind is BackendErrorKind.RATE_LIMITED:
            wait = exc.retry_after if exc.retry_after is not None else self.rate_limit_wait
            if not self.dry_run:
                self.backoffs.quiet_until = max(self.backoffs.quiet_until, time.monotonic() + wait)
            self.record(
                issue,
                action,
                OutcomeKind.DEFERRED,
                f"{prefix}{exc}; next try in {wait:.0f} s",
                decided=decided,
            )
            return
        self.record(issue, action, OutcomeKind.FAILED, f"{prefix}{exc}", decided=decided)
        if isinstance(exc, BackendError) and exc.kind is BackendErrorKind.AUTH and not self.dry_run:
            reason = self.pause.hold(
                f"dispatch paused: {exc}; once fixed, start Legion again (`legion stop`, "
                "`legion start`)"
            )
            if reason is not None:
                self.paused = reason
                self.record("-", "pause_dispatch", OutcomeKind.FAILED, reason)

    def back_off(
        self,
        issue: str,
        action: str,
        exc: BackendError | NotFoundError,
        state: Hashable,
        prefix: str,
        *,
        decided: Decided | None = None,
    ) -> None:
        now = self.backoffs.clock()
        held = backoff.after_failure(
            self.backoffs.held.get(issue),
            state,
            now,
            retryable=exc.retryable if isinstance(exc, BackendError) else False,
            retry_after=exc.retry_after if isinstance(exc, BackendError) else None,
        )
        if not self.dry_run:
            self.backoffs.held[issue] = held
        wait = held.until - now
        if held.permanent:
            detail = f"{exc}; not tried again until {issue} changes (or in {wait / 60:.0f} min)"
        else:
            detail = f"{exc}; next try for {issue} in {wait:.0f} s"
        limited = isinstance(exc, BackendError) and exc.kind is BackendErrorKind.RATE_LIMITED
        kind = OutcomeKind.DEFERRED if limited else OutcomeKind.FAILED
        self.record(issue, action, kind, prefix + detail, decided=decided)

    def holding(self, issue: str, action: str, state: Hashable) -> bool:
        """Whether the issue's steps still back off; said in the pass's outcomes only (the
        failure that started it was logged once)."""
        held = self.backoffs.held.get(issue)
        wait = backoff.waiting(held, state, self.backoffs.clock())
        if held is None or wait <= 0:
            return False
        why = f"not tried again until {issue} changes" if held.permanent else "backing off"
        self.outcomes.append(
            Outcome(issue, action, OutcomeKind.DEFERRED, f"{why}; next try in {wait:.0f} s")
        )
        return True

    def observed(self, what: str, read: Callable[[], Any]) -> Any:
        """Read part of the world; a failure makes it unknown, and the pass stops."""
        try:
            return read()
        except LegionError as exc:
            self.failed("-", "observe", exc, f"{what} unknown, nothing done: ")
            raise Unknown from None

    def guarded(
        self,
        issue: str,
        action: str,
        step: Callable[[], Step | None],
        *,
        plan: bool = True,
        detail: str = "",
        state: Hashable | None = None,
        decided: Decided | None = None,
    ) -> None:
        """Run one state-changing step; a failure is recorded and leaves the issue for the
        next pass. In a dry run the step is only planned, unless `plan` is False: then it runs
        and must itself change nothing when `self.dry_run`. A step returning None records
        nothing (it had nothing to do, or recorded its own outcomes). With `state` (the issue
        as observed) a backend's failure backs off the issue, and success forgets it. With
        `decided` (the table's decision the step carries out), its outcome keeps what it was
        decided from."""
        if state is not None and self.holding(issue, action, state):
            return
        if self.dry_run and plan:
            self.record(issue, action, OutcomeKind.PLANNED, detail)
            return
        try:
            result = step()
        except LegionError as exc:
            self.failed(issue, action, exc, state=state, decided=decided)
            return
        if state is not None and not self.dry_run:
            self.backoffs.held.pop(issue, None)
        if result is not None:
            self.record(
                issue, action, result.kind, result.detail, result.retry_after, decided=decided
            )
