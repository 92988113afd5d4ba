"""Rate limits and overload are the swarm's, not each session's: when the provider answers
429 (rate limited) or 529 (overloaded), the proxy holds every session's requests, not only the
one refused, until the reset the provider gave (else a backoff), then sends them on. A session
sees a slow answer, never the error; dispatch holds meanwhile (`why_held`), and `legion status`,
the action log and the TUI say so once.

`reset_after` is pure; `ModelHold` is the proxy's shared state (its threads wait on it), with
its one row in the project database (`model_hold`) for whoever else asks."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

from legion.core.budget import Limits
from legion.core.stamps import instant, stamp_at
from legion.store import Store, now
from legion.store.actionlog import ActionLog, OutcomeKind

from .budget import spent_limit

logger = logging.getLogger(__name__)

# What the provider answers when the account is rate limited, or the model overloaded.
HELD_STATUSES = frozenset({429, 529})
# The waits when the provider names no reset: doubling from the first, up to the last.
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
# Never wait longer at a time than this, whatever a header says (a clock far off, a typo).
MAX_HOLD_S = 900.0
# Anthropic's reset headers (RFC 3339 times), one per limit; OpenAI's are durations ("6m0s").
_ANTHROPIC_RESETS = re.compile(r"^anthropic-ratelimit-[a-z-]+-reset$")
_OPENAI_RESETS = re.compile(r"^x-ratelimit-reset-[a-z]+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def reset_after(headers: Mapping[str, str], at: datetime, streak: int) -> float:
    """Seconds until requests may go again, from a 429/529 answer's headers (lower-case
    names): `retry-after` (seconds or an HTTP date), else the soonest future reset the
    provider named, else a backoff doubling with `streak` (the holds in a row before this)."""
    wait = _retry_after(headers.get("retry-after", ""), at)
    if wait is None:
        resets = [
            seconds
            for name, value in headers.items()
            if (seconds := _reset_header(name, value, at)) is not None and seconds > 0
        ]
        wait = min(resets) if resets else None
    if wait is None:
        wait = min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** max(0, streak))
    return min(MAX_HOLD_S, max(0.0, wait))


def _retry_after(value: str, at: datetime) -> float | None:
    value = value.strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - at).total_seconds()


def _reset_header(name: str, value: str, at: datetime) -> float | None:
    if _ANTHROPIC_RESETS.match(name):
        try:
            when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return (when - at).total_seconds()
    if _OPENAI_RESETS.match(name):
        parts = _DURATION_PART.findall(value.strip())
        if not parts:
            return None
        unit = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
        return sum(float(number) * unit[kind] for number, kind in parts)
    return None


def describe_hold(status: int, until: datetime) -> str:
    what = "overloaded" if status == 529 else "rate limited"
    return (
        f"the model API is {what} ({status}) until {until.strftime('%H:%M:%S')} UTC: "
        "sessions' requests wait and no worker starts; it resumes by itself"
    )


class HoldRecord:
    """The hold in the project database, for `legion status`, a pass and the TUI."""

    def __init__(self, db: Store) -> None:
        self._db = db

    def active(self, at: datetime | None = None) -> str | None:
        """Why model requests are held now, or None (a hold whose time passed is over)."""
        with self._db.read() as conn:
            row = conn.execute("SELECT until, reason FROM model_hold WHERE id = 1").fetchone()
        if row is None:
            return None
        held = (at or datetime.now(UTC)).timestamp() < instant(str(row["until"]))
        return str(row["reason"]) if held else None

    def set(self, until: datetime, reason: str) -> None:
        stamp = stamp_at(until.timestamp())
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO model_hold (id, until, reason, since) VALUES (1, ?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET until = excluded.until, reason = excluded.reason",
                (stamp, reason, now()),
            )

    def clear(self) -> bool:
        """Forget the hold; whether there was one."""
        with self._db.write() as conn:
            return conn.execute("DELETE FROM model_hold").rowcount > 0


def why_held(db: Store, limits: Limits, at: datetime | None = None) -> str | None:
    """Why no worker should start at `at` (now by default) for want of the model (a
    provider's hold, the day's budget spent), or None."""
    held = HoldRecord(db).active(at)
    if held is not None:
        return held
    daily = spent_limit(db, Limits(daily_token_budget=limits.daily_token_budget), "", at)
    return None if daily is None else daily.describe()


class ModelHold:
    """The proxy's hold: its request threads `wait` on it; one that got a 429/529 `hold`s it
    for everyone; one that got through `passed`, which ends the streak of backoffs and, once
    the hold is over, says so in the log."""

    def __init__(
        self,
        open_db: Callable[[], Store],
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.open_db = open_db
        self.clock = clock
        self._lock = threading.Condition()
        self._until: datetime | None = None
        self._streak = 0
        self._recorded = False  # a hold is in the database and the log: to be closed

    def remaining(self) -> float:
        with self._lock:
            if self._until is None:
                return 0.0
            return max(0.0, (self._until - self.clock()).total_seconds())

    def wait(self, gone: Callable[[], bool] = lambda: False, step: float = 0.5) -> bool:
        """Until no hold is in force; False when `gone` says the asker left meanwhile."""
        while (left := self.remaining()) > 0:
            if gone():
                return False
            time.sleep(min(step, left))
        return True

    def hold(self, status: int, headers: Mapping[str, str]) -> float:
        """A 429/529 came back: hold every request until its reset. Returns the wait."""
        at = self.clock()
        with self._lock:
            wait = reset_after(headers, at, self._streak)
            self._streak += 1
            until = at + timedelta(seconds=wait)
            if self._until is not None and self._until >= until:
                return wait  # already held as long
            self._until = until
            first = not self._recorded
            self._recorded = True
        reason = describe_hold(status, until)
        self._write(lambda db: HoldRecord(db).set(until, reason))
        if first:
            self._write(
                lambda db: ActionLog(db).append("-", "model_hold", OutcomeKind.DEFERRED, reason)
            )
        return wait

    def passed(self) -> None:
        """A request got through: the streak ends, and a hold that was in force is over."""
        with self._lock:
            self._streak = 0
            if not self._recorded or (self._until is not None and self._until > self.clock()):
                return
            self._recorded = False
            self._until = None
        self._write(lambda db: HoldRecord(db).clear())
        self._write(
            lambda db: ActionLog(db).append(
                "-", "model_resume", OutcomeKind.DONE, "the model API answers again"
            )
        )

    def _write(self, write: Callable[[Store], object]) -> None:
        try:
            db = self.open_db()
        except Exception as exc:
            logger.warning("the model API's hold not recorded: %s", exc)
            return
        try:
            write(db)
        except Exception as exc:  # a hold not recorded still holds; the next one is recorded
            logger.warning("the model API's hold not recorded: %s", exc)
        finally:
            db.close()
