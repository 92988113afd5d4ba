"""What a project's sessions spent, as the daemon's model proxy metered it (`legion usage`'s
ledger): by issue, phase, runtime and model, with its cost where `[prices]` has the model;
by day; and how close the token budgets are. Read once, typed; the web view draws it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from legion.core.budget import allowed_for, day_start_iso

if TYPE_CHECKING:
    from legion.backends import Backends
    from legion.config import Project
    from legion.proxy.ledger import UsageRow

DAYS_SHOWN = 14


@dataclass(frozen=True, slots=True)
class IssueSpend:
    issue: str
    tokens: int
    budget: int | None  # the issue's budget with what a person allowed past it; None: none


@dataclass(frozen=True, slots=True)
class Spend:
    rows: list[UsageRow]
    costs: list[float | None]  # each row's, None where no price is known
    days: list[tuple[str, int]]  # (YYYY-MM-DD, tokens) for the last DAYS_SHOWN days, each day
    today: int
    daily_budget: int | None
    issues: list[IssueSpend]  # most spent first

    @property
    def total(self) -> int:
        return sum(row.used.total for row in self.rows)

    @property
    def cost(self) -> float | None:
        known = [cost for cost in self.costs if cost is not None]
        return sum(known) if known else None


def read_spend(project: Project, backends: Backends, at: datetime | None = None) -> Spend:
    from legion.proxy.budget import Allowances
    from legion.proxy.ledger import UsageLedger

    now = at or datetime.now(UTC)
    ledger = UsageLedger(backends.db)
    rows = ledger.rows()
    prices = project.settings.prices
    costs = [prices[row.model].cost(row.used) if row.model in prices else None for row in rows]
    first = (now - timedelta(days=DAYS_SHOWN - 1)).date()
    used = dict(ledger.by_day(first.isoformat()))
    days = [
        (day, used.get(day, 0))
        for day in ((first + timedelta(days=n)).isoformat() for n in range(DAYS_SHOWN))
    ]
    limits = project.settings.limits
    totals: dict[str, int] = {}
    for row in rows:
        if row.issue:
            totals[row.issue] = totals.get(row.issue, 0) + row.used.total
    allowances = Allowances(backends.db)
    issues = [
        IssueSpend(
            issue,
            tokens,
            None
            if limits.token_budget is None
            else allowed_for(limits.token_budget, allowances.get(issue)),
        )
        for issue, tokens in sorted(totals.items(), key=lambda kv: -kv[1])
    ]
    today = ledger.total(since=day_start_iso(now))
    return Spend(rows, costs, days, today, limits.daily_token_budget, issues)
