"""Waiting for what a test stands on, never for a fixed time: a condition, polled under a
deadline long enough for a loaded machine, or a number of a daemon's ticks, counted on the
heartbeat file it touches as each tick starts."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def wait_until(
    what: str,
    check: Callable[[], Any],
    timeout: float = 45.0,
    *,
    interval: float = 0.25,
    explain: Callable[[], str] | None = None,
) -> Any:
    """`check()`'s first true answer, asked every `interval` seconds; fails, saying `what`
    (and `explain()`, where the wait stood, read at that moment), after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    stood = ""
    if explain is not None:
        try:
            stood = f"\n{explain()}"
        except Exception as error:  # a report never hides the timeout it reports
            stood = f"\n(could not say where it stood: {error})"
    raise AssertionError(f"timed out waiting for {what} (last: {last!r}){stood}")


def heartbeat_stamp(heartbeat: Path) -> int | None:
    """When the daemon last touched its heartbeat (ns), None before its first tick."""
    try:
        return os.stat(heartbeat).st_mtime_ns
    except FileNotFoundError:
        return None


def wait_for_ticks(heartbeat: Path, ticks: int, *, timeout: float = 60.0) -> None:
    """Return once the daemon whose heartbeat this is has run `ticks` whole ticks after the
    call: a tick starts by touching the heartbeat, so `ticks + 1` touches seen mean the first
    `ticks` of them ran to their end. A touch missed between two looks only makes the wait
    longer, never shorter."""
    seen = 0
    last = heartbeat_stamp(heartbeat)
    deadline = time.monotonic() + timeout
    while seen < ticks + 1:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {ticks} ticks ({seen} touches seen)")
        time.sleep(0.01)
        beat = heartbeat_stamp(heartbeat)
        if beat != last and beat is not None:
            seen += 1
        last = beat
