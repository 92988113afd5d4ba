"""Every benchmark, one after another, and the README's table of figures written from what
they printed, with the date, the commit and the machine (printed, never asserted).

Each benchmark runs as its own process (as `.venv/bin/python bench/NAME.py` runs it); what it
prints is its figures. While one runs, a line says which and for how long, so minutes of work
are never silent. With `--write`, the README's table between its two markers is replaced; a
benchmark that failed keeps its row and says so, with the figure it had before.

Run: .venv/bin/python bench/all.py [--write] [--only NAME ...] [--skip NAME ...]
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BEGIN = "<!-- bench/all.py: begin -->"
END = "<!-- bench/all.py: end -->"

# In the README's order: the benchmark and what its figures are of.
BENCHMARKS: tuple[tuple[str, str], ...] = (
    ("cli_latency", "`legion` cold start, `legion state --json` over 1,000 issues"),
    ("workers", "dispatch to the first transcript line; `legion workers --json` over 50"),
    ("swarm", "a worker's `worker-done` to the next window; model requests, auto and llm"),
    ("delivery", "a message to an idle agent; a daemon tick's CPU with 50 agents"),
    ("tick", "a whole daemon tick's CPU with 50 live workers, by step"),
    ("proxy", "what the model proxy adds to a streamed model call"),
    ("egress", "what the egress proxy adds to a confined fetch; its throughput"),
    ("session_relay", "a session's `say` and the controller's `state` through the daemon"),
    ("bus", "bus posts per second, one process and four"),
    ("tui", "the TUI's first paint and its reaction with 10,000 messages"),
    (
        "web",
        "the web view with 1,000 issues: the board, a change pushed, 50 idle pages; "
        "a push on PostgreSQL",
    ),
    (
        "decisions",
        "`legion why`, `legion log --replay` over 100,000 decisions; a local check; task sync",
    ),
    ("requests", "Linear and GitHub requests per pass and per hour"),
    ("runtimes", "the 3-issue demo on Claude Code, Codex and mixed"),
    ("faults", "`kill -9` at every named fault point"),
    ("fleet", "the store on SQLite and PostgreSQL; a host's upkeep; leader failover"),
    ("soak", "30 issues on two hosts under 15 minutes of faults: done once, nothing lost"),
)


@dataclass(frozen=True)
class Measured:
    name: str
    ok: bool
    lines: list[str]
    seconds: float


def run(name: str) -> Measured:
    """One benchmark in its own process, saying every 30 s that it still runs."""
    started = time.monotonic()
    done = threading.Event()

    def progress() -> None:
        while not done.wait(30):
            print(f"  ... {name} still running ({time.monotonic() - started:.0f} s)", flush=True)

    ticker = threading.Thread(target=progress, daemon=True)
    ticker.start()
    try:
        proc = subprocess.run(
            [sys.executable, str(ROOT / "bench" / f"{name}.py")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        done.set()
    lines = [line.rstrip() for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0:
        tail = [line for line in proc.stderr.splitlines() if line.strip()][-1:]
        lines = [f"failed (exit {proc.returncode}): {' '.join(tail) or 'no output'}"]
    return Measured(name, proc.returncode == 0, lines, time.monotonic() - started)


def _commit() -> str:
    found = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return found.stdout.strip() + (" with local changes" if dirty.stdout.strip() else "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(measured: dict[str, Measured], previous: dict[str, str]) -> str:
    """The README's section: when, where, and one row per benchmark."""
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    # A run of some benchmarks only keeps the others' rows: the line says which are new.
    partly = len(measured) < len(BENCHMARKS)
    which = ", ".join(f"`{name}`" for name, _ in BENCHMARKS if name in measured)
    lines = [
        BEGIN,
        f"Measured by `bench/all.py` on {today} at commit {_commit()}"
        + (f" ({which} only; the other rows are from earlier runs)" if partly else "")
        + f", on a {os.cpu_count()}-core machine with nothing else running (scripted model; "
        "the pinned Claude Code and Codex CLIs):",
        "",
        "| benchmark | of | figures |",
        "|---|---|---|",
    ]
    for name, what in BENCHMARKS:
        found = measured.get(name)
        if found is not None and found.ok:
            figures = "<br>".join(_cell(line) for line in found.lines)
        elif found is not None:
            before = previous.get(name)
            figures = _cell(found.lines[0]) + (f"<br>before: {before}" if before else "")
        else:
            figures = previous.get(name, "not measured")
        lines.append(f"| `bench/{name}.py` | {what} | {figures} |")
    lines.append(END)
    return "\n".join(lines)


def previous_rows(readme: str) -> dict[str, str]:
    """The figures each benchmark's row holds now (kept for what is not measured this time)."""
    if BEGIN not in readme or END not in readme:
        return {}
    section = readme[readme.index(BEGIN) : readme.index(END)]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| `bench/"):
            cells = line.split(" | ")
            name = cells[0].removeprefix("| `bench/").removesuffix(".py`")
            rows[name] = cells[-1].removesuffix(" |")
    return rows


def main() -> int:
    names = [name for name, _ in BENCHMARKS]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the README's table")
    parser.add_argument("--only", nargs="+", choices=names, default=None, metavar="NAME")
    parser.add_argument("--skip", nargs="+", choices=names, default=[], metavar="NAME")
    options = parser.parse_args()
    chosen = [n for n in (options.only or names) if n not in options.skip]
    measured: dict[str, Measured] = {}
    for name in chosen:
        print(f"== bench/{name}.py", flush=True)
        found = run(name)
        measured[name] = found
        for line in found.lines:
            print(f"  {line}", flush=True)
        print(f"  ({found.seconds:.0f} s)", flush=True)
    readme = README.read_text(encoding="utf-8")
    section = table(measured, previous_rows(readme))
    if options.write:
        if BEGIN not in readme or END not in readme:
            print(f"bench/all.py: the README has no {BEGIN} ... {END} section", file=sys.stderr)
            return 1
        start, end = readme.index(BEGIN), readme.index(END) + len(END)
        README.write_text(readme[:start] + section + readme[end:], encoding="utf-8")
        print("README.md: table written")
    else:
        print(section)
    return 0 if all(found.ok for found in measured.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
