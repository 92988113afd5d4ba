"""The day's token budget (`legion.core.budget`), pure, at given times: spent at its figure,
and counted from 00:00 UTC, whatever the clock's zone, so that midnight UTC starts a new day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from legion.core.budget import (
    Spent,
    day_start,
    day_start_iso,
    over_daily_budget,
    seconds_to_next_day,
)


def test_the_day_is_spent_at_its_budget_not_before() -> None:
    assert over_daily_budget(999, 1000) is None
    assert over_daily_budget(1000, 1000) == Spent("", 1000, 1000)
    assert over_daily_budget(5000, 1000) == Spent("", 5000, 1000)
    assert over_daily_budget(10**9, None) is None  # unset: unlimited


def test_a_spent_day_says_what_stops_and_until_when() -> None:
    spent = over_daily_budget(12_345, 10_000)
    assert spent is not None and spent.daily
    assert spent.describe() == (
        "the daily token budget is spent (12,345 of 10,000 tokens today); "
        "Legion starts no more model requests until 00:00 UTC"
    )


def test_the_day_begins_at_midnight_utc_whatever_the_clocks_zone() -> None:
    late = datetime(2025, 3, 1, 23, 59, 59, tzinfo=UTC)
    assert day_start(late) == datetime(2025, 3, 1, tzinfo=UTC)
    assert day_start(late + timedelta(seconds=1)) == datetime(2025, 3, 2, tzinfo=UTC)
    # 01:30 in UTC+2 is 23:30 UTC of the day before: that day's budget.
    east = datetime(2025, 3, 2, 1, 30, tzinfo=timezone(timedelta(hours=2)))
    assert day_start(east) == datetime(2025, 3, 1, tzinfo=UTC)
    # 22:00 in UTC-5 is 03:00 UTC of the next day.
    west = datetime(2025, 3, 1, 22, 0, tzinfo=timezone(timedelta(hours=-5)))
    assert day_start_iso(west) == "2025-03-02T00:00:00Z"  # as the ledger records times


def test_a_ledger_time_counts_in_the_day_it_falls_in() -> None:
    """The ledger compares ISO strings (`at >= day_start_iso`): the last second of a day is
    before the next day's start, its midnight is in it."""
    start = day_start_iso(datetime(2025, 3, 2, 8, 0, tzinfo=UTC))
    assert "2025-03-01T23:59:59Z" < start <= "2025-03-02T00:00:00Z"


def test_the_seconds_left_in_the_day() -> None:
    assert seconds_to_next_day(datetime(2025, 3, 1, 23, 59, 59, tzinfo=UTC)) == 1.0
    assert seconds_to_next_day(datetime(2025, 3, 1, tzinfo=UTC)) == 86_400.0
    east = datetime(2025, 3, 2, 1, 30, tzinfo=timezone(timedelta(hours=2)))  # 23:30 UTC
    assert seconds_to_next_day(east) == 1_800.0
