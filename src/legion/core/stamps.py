"""One timestamp format for everything Legion prints: RFC 3339 in UTC, to the second."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload


@overload
def utc_stamp(value: str) -> str: ...
@overload
def utc_stamp(value: None) -> None: ...
@overload
def utc_stamp(value: str | None) -> str | None: ...


def utc_stamp(value: str | None) -> str | None:
    """`2026-01-02T03:04:05Z` for any ISO 8601 time (the bus keeps milliseconds, Linear and
    GitHub send their own); a value that is not one is returned as it is."""
    if not value:
        return value
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # Legion's own stamps are UTC
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def instant(value: str) -> float:
    """Seconds since the epoch of an ISO 8601 time (UTC when it names no zone); 0 for a value
    that is not one."""
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def stamp_at(seconds: float) -> str:
    """`utc_stamp` of a time in seconds since the epoch (as the project database records)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
