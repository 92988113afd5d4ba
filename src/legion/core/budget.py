"""Token budgets: whether a session's next model request may go, from what was spent. Pure.

Two limits, both in tokens (input, output and cached, each counted once: `Usage.total`):
an issue's `token_budget` (raised by a human's answer to Legion's question, one budget more
than was used when it was asked: the allowance), and the project's `daily_token_budget`, over
every session's requests since 00:00 UTC. The proxy asks before it forwards a request
(`legion.proxy.budget`); a pass asks before it starts a worker (`legion.reconcile.starts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True, slots=True)
class Limits:
    """The project's budgets (None: unlimited)."""

    token_budget: int | None = None
    daily_token_budget: int | None = None

    @property
    def any(self) -> bool:
        return self.token_budget is not None or self.daily_token_budget is not None


@dataclass(frozen=True, slots=True)
class Spent:
    """What a limit was measured against: `used` of `allowed` tokens; `issue` "" for the day's."""

    issue: str
    used: int
    allowed: int

    @property
    def daily(self) -> bool:
        return not self.issue

    def describe(self) -> str:
        """One line: what is spent and what comes next."""
        if self.daily:
            return (
                f"the daily token budget is spent ({self.used:,} of {self.allowed:,} tokens "
                f"today); Legion starts no more model requests until 00:00 UTC"
            )
        return (
            f"{self.issue}'s token budget is spent ({self.used:,} of {self.allowed:,} "
            "tokens); its worker is stopped and a human is asked"
        )


def allowed_for(budget: int, allowance: int | None) -> int:
    """What an issue may use: its budget, or the allowance a human's answer gave when larger (a
    budget raised in the config since counts at once)."""
    return budget if allowance is None else max(budget, allowance)


def over_issue_budget(
    issue: str, used: int, budget: int | None, allowance: int | None
) -> Spent | None:
    """The issue's spend when its budget is spent, else None."""
    if budget is None or not issue:
        return None
    allowed = allowed_for(budget, allowance)
    return Spent(issue, used, allowed) if used >= allowed else None


def over_daily_budget(used_today: int, budget: int | None) -> Spent | None:
    """The day's spend when the daily budget is spent, else None."""
    if budget is None or used_today < budget:
        return None
    return Spent("", used_today, budget)


def day_start(at: datetime) -> datetime:
    """00:00 UTC of `at`'s day: where the daily budget's count begins."""
    utc = at.astimezone(UTC)
    return utc.replace(hour=0, minute=0, second=0, microsecond=0)


def day_start_iso(at: datetime) -> str:
    """`day_start` as the ledger records times (`legion.store.now`: ISO, UTC, seconds, `Z`)."""
    return day_start(at).strftime("%Y-%m-%dT%H:%M:%SZ")


def seconds_to_next_day(at: datetime) -> float:
    return (day_start(at) + timedelta(days=1) - at.astimezone(UTC)).total_seconds()
