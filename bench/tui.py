"""How the TUI keeps up with a busy bus.

Prints figures (never asserts), on a temporary bus with 50 agents on 10 branches of one
project and 10,000 messages in one channel (the one the TUI opens), headless (Textual's
`run_test`) at 160x48:
- start to first paint: from constructing the app (its first reads of the bus included) until
  its first screen is composed and drawn;
- a new message -> on screen: another process posts to the open channel at random intervals
  (20-80 ms); each message counts from the start of its post until the TUI has written it into
  the open channel's log. p50 and p99. Goal (issue 12): p99 <= 250 ms;
- opening the 10,000-message channel again, and loading one page of older messages;
- resident memory (VmRSS now, and the peak, ru_maxrss) of the process running the TUI.

Run: .venv/bin/python bench/tui.py [--messages N] [--samples N]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import resource
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from legion.bus.model import Agent, AgentRole, Channel, Draft, Posted
from legion.bus.protocol import Bus
from legion.bus.stored import SqliteBus
from legion.core.model import Mode
from legion.errors import ConflictError
from legion.runtime.tmux import Attach
from legion.tui.app import LegionApp
from legion.tui.chat import MessageLog
from legion.tui.sources import ActionLogView, Board, Peek, TrackerInbox, Unavailable

AGENTS = 50
BRANCHES = 10
PROJECT = "bench"
BUSY = Channel(PROJECT, "legion/BEN-0")


class NoSources:
    """The views outside the bus, and the commands, are not measured here (it plays both the
    sources and the commands)."""

    def board(self, project: str | None) -> Board | Unavailable:
        return Unavailable("not measured")

    def peek(self, agent: Agent, lines: int) -> Peek | Unavailable:
        return Unavailable("not measured")

    def action_log(self, project: str | None, limit: int) -> ActionLogView | Unavailable:
        return Unavailable("not measured")

    def kill(self, bus: Bus, target: Agent, *, force: bool) -> Agent:
        raise ConflictError("not measured")

    def attach(self, bus: Bus, target: Agent, environ: Mapping[str, str]) -> Attach:
        raise ConflictError("not measured")

    def hand_over(self, bus: Bus, posted: Posted) -> None:
        return None

    def tracker_questions(self) -> TrackerInbox:
        return TrackerInbox((), ())

    def give_feedback(self, project: str, issue: str, text: str) -> str:
        raise ConflictError("not measured")

    def dispatch(self, project: str, issue: str, mode: Mode) -> str:
        raise ConflictError("not measured")


def setup(path: Path, messages: int) -> int:
    """50 agents (an orchestrator on main, the rest on 10 branches) and `messages` messages on
    the busy channel, a third of them with a mention; the id of the busy channel's poster."""
    bus = SqliteBus(path)
    bus.register_agent(
        Channel(PROJECT, "main"), "legion", role=AgentRole.CONTROLLER, runtime="b", session_id="l"
    )
    ids = []
    for n in range(AGENTS - 1):
        channel = Channel(PROJECT, f"legion/BEN-{n % BRANCHES}")
        agent = bus.register_agent(
            channel, f"worker-{n}", role=AgentRole.IMPLEMENT, runtime="b", session_id=f"s-{n}"
        )
        ids.append(agent.id)
    sender = ids[0]
    drafts = [
        Draft(sender, BUSY, f"step {n}: @worker-10 have a look" if n % 3 == 0 else f"step {n}")
        for n in range(messages)
    ]
    for first in range(0, len(drafts), 500):
        bus.post_many(drafts[first : first + 500])
    bus.close()
    return sender


def post_slowly(path: str, sender: int, count: int, seed: int) -> list[tuple[str, float]]:
    """In another process: post `count` messages at random intervals; each one's id and the
    moment (CLOCK_MONOTONIC, shared by every process) its post began."""
    pace = random.Random(seed)
    bus = SqliteBus(Path(path))
    times = []
    for n in range(count):
        time.sleep(pace.uniform(0.02, 0.08))
        start = time.monotonic()
        posted = bus.post(sender, BUSY, f"live {n}")
        times.append((posted.message.id, start))
    bus.close()
    return times


def rss_mib() -> tuple[float, float]:
    """(VmRSS now, peak ru_maxrss) in MiB."""
    now = 0.0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            now = int(line.split()[1]) / 1024
    return now, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def measure(path: Path, sender: int, samples: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    # The poster's process is started before the app: Textual's driver holds file
    # descriptors that a process cannot be spawned with.
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        pool.apply(time.sleep, (0,))  # the process is up
        start = time.perf_counter()
        app = LegionApp(
            lambda: SqliteBus(path), NoSources(), NoSources(), channel=BUSY, bus_file=path
        )
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            figures["first_paint"] = time.perf_counter() - start
            log = app.query_one(MessageLog)
            result = pool.apply_async(post_slowly, (str(path), sender, samples, 7))
            seen: dict[str, float] = {}
            shown = len(log.shown)
            while not (result.ready() and len(seen) >= samples):
                await asyncio.sleep(0.001)
                if len(log.shown) != shown:
                    now = time.monotonic()
                    for message in log.shown[shown:]:
                        seen.setdefault(message.id, now)
                    shown = len(log.shown)
            posted = result.get()
            delays = [seen[message_id] - began for message_id, began in posted]
            cuts = statistics.quantiles(delays, n=100)
            figures["p50"], figures["p99"], figures["worst"] = cuts[49], cuts[98], max(delays)

            began = time.perf_counter()
            app.open_channel(BUSY)
            await pilot.pause()
            figures["open"] = time.perf_counter() - began
            log.focus()
            log.scroll_home(animate=False)
            await pilot.pause()
            before = len(log.shown)
            began = time.perf_counter()
            await pilot.press("up")  # at the top: the page before
            await pilot.pause()
            figures["page"] = time.perf_counter() - began
            figures["paged"] = len(log.shown) - before
            figures["rss"], figures["max_rss"] = rss_mib()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=200)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bus.db"
        sender = setup(path, options.messages)
        figures = asyncio.run(measure(path, sender, options.samples))
    print(f"{AGENTS} agents, {options.messages:,} messages in the open channel, headless at 160x48")
    print(f"start to first paint: {figures['first_paint'] * 1000:.0f} ms")
    print(
        f"new message -> on screen (another process posting every 20-80 ms): "
        f"p50 {figures['p50'] * 1000:.0f} ms, p99 {figures['p99'] * 1000:.0f} ms, "
        f"worst {figures['worst'] * 1000:.0f} ms over {options.samples} messages "
        "(goal: p99 <= 250 ms)"
    )
    print(
        f"opening the channel again: {figures['open'] * 1000:.0f} ms; one page of older "
        f"messages ({figures['paged']:.0f}): {figures['page'] * 1000:.0f} ms"
    )
    print(
        f"resident memory: {figures['rss']:.0f} MiB now, {figures['max_rss']:.0f} MiB at "
        "the peak (the bus's setup included)"
    )


if __name__ == "__main__":
    main()
