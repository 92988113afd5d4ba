"""Timing spans: where a hand-off's time goes, across the processes that make it.

Off unless `LEGION_TRACE` names a file; then every span (a named step, the issue it was for,
its wall-clock start and end, the process) is one JSON line appended to that file. Wall-clock
times, because a hand-off crosses processes: a worker's `legion complete` writes the label and
wakes the daemon, whose pass retires the worker and starts the next. Sessions inherit the
variable from the daemon, so their `legion` commands trace into the same file.
`bench/swarm.py` reads it back into a per-step breakdown; `docs/performance.md` says how to
read one by hand.

A span costs one environment lookup when tracing is off. A line is written with one
`write(2)` on a file opened `O_APPEND`, so concurrent writers never interleave within a line.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TRACE_ENV = "LEGION_TRACE"


@dataclass(frozen=True, slots=True)
class Span:
    name: str
    issue: str
    start: float  # seconds since the epoch
    end: float
    pid: int

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "issue": self.issue,
            "start": self.start,
            "end": self.end,
            "pid": self.pid,
        }


def trace_file() -> Path | None:
    value = os.environ.get(TRACE_ENV, "")
    return Path(value) if value else None


def record(span: Span) -> None:
    """Append one span to the trace file, if tracing is on. Never fails the traced work."""
    path = trace_file()
    if path is None:
        return
    line = (json.dumps(span.to_json()) + "\n").encode()
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


@contextlib.contextmanager
def span(name: str, issue: str = "-") -> Iterator[None]:
    """Time the block as step `name` (of `issue`, when it is one issue's)."""
    if trace_file() is None:
        yield
        return
    start = time.time()
    try:
        yield
    finally:
        record(Span(name, issue, start, time.time(), os.getpid()))


def mark(name: str, issue: str = "-") -> None:
    """An instant: something happened now (the daemon woke up)."""
    if trace_file() is not None:
        now = time.time()
        record(Span(name, issue, now, now, os.getpid()))


def read_spans(path: Path) -> list[Span]:
    """The spans of a trace file, in the order they ended; a torn last line is skipped."""
    spans: list[Span] = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return spans
    for line in text.splitlines():
        try:
            item = json.loads(line)
            spans.append(
                Span(
                    str(item["name"]),
                    str(item["issue"]),
                    float(item["start"]),
                    float(item["end"]),
                    int(item["pid"]),
                )
            )
        except (ValueError, KeyError, TypeError):
            continue
    return spans


_IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9]*-\d+$")


def process_started() -> float | None:
    """When this process started (seconds since the epoch), from /proc; None without it."""
    try:
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22: since boot, in clock ticks
        # /proc/stat's btime is whole seconds: the boot clock gives it to the microsecond.
        boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    except (OSError, ValueError, IndexError):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def command_span(args: list[str]) -> Iterator[None]:
    """A `legion` command, from its process's start (interpreter start-up included) to its
    end, named by its first words and the issue it names: "legion issue label" for LEG-3."""
    words = [arg for arg in args[:2] if not arg.startswith("-") and not _IDENTIFIER.match(arg)]
    issue = next((arg.upper() for arg in args if _IDENTIFIER.match(arg)), "-")
    start = process_started() or time.time()
    try:
        yield
    finally:
        record(Span(" ".join(["legion", *words]), issue, start, time.time(), os.getpid()))
