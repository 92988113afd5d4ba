"""Budgets enforced where the tokens are spent: before the proxy forwards a session's request,
it asks whether the issue's `token_budget` or the project's `daily_token_budget` is spent
(`legion.core.budget`), counting from the ledger. A refused request never reaches the model;
the daemon then stops the session (`legion.daemon.budget_step`).

What a human's answer allowed an issue past its budget is kept here too (`Allowances`): the
pass that reads the answer on the tracker writes it, the proxy reads it, and neither has to ask
the other."""

from __future__ import annotations

from datetime import UTC, datetime

from legion.core.budget import Limits, Spent, day_start_iso, over_daily_budget, over_issue_budget
from legion.store import Store, now

from .ledger import Spender, UsageLedger

# The status and error type a refused request gets: Claude Code shows "API Error: 402 <the
# message>" and does not retry (checked against the pinned CLI; a 400 of another type is
# retried, a 403 is shown as a failed login).
REFUSED_STATUS = 402
REFUSED_TYPE = "billing_error"


class Allowances:
    """Tokens an issue may use past its budget, as a human's answer allowed (the tracker holds
    the answer; this is the figure read from it)."""

    def __init__(self, db: Store) -> None:
        self._db = db

    def get(self, issue: str) -> int | None:
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT allowed FROM token_allowance WHERE issue = ?", (issue,)
            ).fetchone()
        return None if row is None else int(row["allowed"])

    def set(self, issue: str, allowed: int) -> None:
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO token_allowance (issue, allowed, at) VALUES (?, ?, ?) "
                "ON CONFLICT (issue) DO UPDATE SET allowed = excluded.allowed, at = excluded.at",
                (issue, allowed, now()),
            )


def spent_limit(db: Store, limits: Limits, issue: str, at: datetime | None = None) -> Spent | None:
    """The limit a request for `issue` ("" : no issue's) would go past, or None when it may go:
    the day's budget first (it stops everything), then the issue's."""
    if not limits.any:
        return None
    ledger = UsageLedger(db)
    if limits.daily_token_budget is not None:
        today = day_start_iso(at or datetime.now(UTC))
        daily = over_daily_budget(ledger.total(since=today), limits.daily_token_budget)
        if daily is not None:
            return daily
    if not issue or limits.token_budget is None:
        return None
    return over_issue_budget(
        issue, ledger.total(issue=issue), limits.token_budget, Allowances(db).get(issue)
    )


def refusal_message(spender: Spender, spent: Spent) -> str:
    """What the session's CLI shows when its request is refused."""
    who = spender.issue or "this session"
    return f"Legion's model proxy refused {who}'s request: {spent.describe()}"
