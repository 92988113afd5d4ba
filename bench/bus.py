"""Throughput and latency of the event bus on SQLite.

Prints figures (never asserts), with 50 agents registered on 10 branches of one project:
- posting: messages per second from one process, one `post` (one transaction) per message,
  then `post_many` in batches of 100 (one transaction per batch), each the median of a few
  rounds on a fresh bus; then one `post` per message from several processes at once. A third
  of the messages mention an agent (one delivery), a ninth mention two. Goal (issue 11):
  >= 5,000 messages/s.
- post -> pending delivery visible: from the start of `post` in one process until a second
  connection (as the daemon would have) sees the delivery, p50 and p99 over 1,000 messages.

Run: .venv/bin/python bench/bus.py [--messages N] [--processes P] [--rounds R]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path

from legion.bus.model import AgentRole, Channel, Draft
from legion.bus.stored import SqliteBus

AGENTS = 50
BRANCHES = 10
PROJECT = "bench"


def setup(path: Path) -> list[int]:
    """The bus with 50 agents (5 per branch, an orchestrator on main); their ids."""
    bus = SqliteBus(path)
    ids = [
        bus.register_agent(
            Channel(PROJECT, "main"),
            "legion",
            role=AgentRole.CONTROLLER,
            runtime="bench",
            session_id="s-legion",
        ).id
    ]
    roles = [AgentRole.PLAN, AgentRole.IMPLEMENT, AgentRole.REVIEW, AgentRole.FINISH]
    for n in range(AGENTS - 1):
        branch = f"legion/BEN-{n % BRANCHES}"
        role = roles[n // BRANCHES % len(roles)]
        name = f"{role.value}-{n // (BRANCHES * len(roles))}"
        ids.append(
            bus.register_agent(
                Channel(PROJECT, branch), name, role=role, runtime="bench", session_id=f"s-{n}"
            ).id
        )
    bus.close()
    return ids


def body_for(n: int) -> str:
    if n % 9 == 0:
        return f"message {n}: @legion @legion/BEN-1/plan-0 please look"
    if n % 3 == 0:
        return f"message {n}: @plan-0 the spec is ready"
    return f"message {n}: progress report, nothing to wake anyone for"


def post_each(path: Path, sender: int, branch: str, count: int, offset: int) -> float:
    """Post `count` messages, one transaction each; returns the seconds it took."""
    return timed_posts(path, sender, branch, count, offset)[0]


def timed_posts(
    path: Path, sender: int, branch: str, count: int, offset: int, batch: int = 0
) -> tuple[float, float]:
    """Post `count` messages, one transaction each or `batch` per transaction; returns the
    seconds it took and the CPU seconds this process spent (the machine may be busy)."""
    bus = SqliteBus(path)
    channel = Channel(PROJECT, branch)
    drafts = [Draft(sender, channel, body_for(n)) for n in range(offset, offset + count)]
    start, cpu = time.perf_counter(), time.process_time()
    if batch:
        for first in range(0, count, batch):
            bus.post_many(drafts[first : first + batch])
    else:
        for draft in drafts:
            bus.post(draft.sender_id, draft.channel, draft.body)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    bus.close()
    return elapsed, cpu


def _worker(args: tuple[str, int, str, int, int]) -> float:
    path, sender, branch, count, offset = args
    return post_each(Path(path), sender, branch, count, offset)


def throughput_many(path: Path, ids: list[int], messages: int, processes: int) -> float:
    share = messages // processes
    jobs = [
        (str(path), ids[1 + p], f"legion/BEN-{p % BRANCHES}", share, (p + 1) * 10_000_000)
        for p in range(processes)
    ]
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        pool.map(_worker, [(str(path), ids[1], "legion/BEN-0", 1, 99_000_000)])  # warm up
        start = time.perf_counter()
        pool.map(_worker, jobs)
        elapsed = time.perf_counter() - start
    return share * processes / elapsed


def latency(path: Path, samples: int) -> tuple[float, float]:
    """On a bus of its own (the throughput runs leave thousands of deliveries pending)."""
    ids = setup(path)
    poster = SqliteBus(path)
    daemon = SqliteBus(path)
    recipient = poster.agent(ids[2])  # plan-0 on legion/BEN-1, addressed in full from main
    channel = Channel(PROJECT, "main")
    seconds = []
    for n in range(samples):
        start = time.perf_counter()
        posted = poster.post(ids[0], channel, f"@{recipient.address} ping {n}")
        while not any(
            p.message.id == posted.message.id
            for p in daemon.pending_deliveries(recipient_id=recipient.id)
        ):
            pass
        seconds.append(time.perf_counter() - start)
        daemon.mark_delivered(posted.message.id, recipient.id)
    poster.close()
    daemon.close()
    cuts = statistics.quantiles(seconds, n=100)
    return cuts[49], cuts[98]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--samples", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    count = options.messages
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bus.db"
        ids = setup(path)
        # The machine may be busy: several rounds, each on a fresh bus, and their medians.
        rounds = []
        for r in range(options.rounds):
            fresh = Path(tmp) / f"round-{r}.db"
            ids = setup(fresh)
            rounds.append(
                (
                    timed_posts(fresh, ids[1], "legion/BEN-0", count, 0),
                    timed_posts(fresh, ids[1], "legion/BEN-2", count, count, options.batch),
                )
            )
        each = statistics.median(one[0][0] for one in rounds)
        each_cpu = statistics.median(one[0][1] for one in rounds)
        batched = statistics.median(one[1][0] for one in rounds)
        batched_cpu = statistics.median(one[1][1] for one in rounds)
        ids = setup(path)
        many = throughput_many(path, ids, count, options.processes)
        p50, p99 = latency(Path(tmp) / "latency.db", options.samples)
    print(f"{AGENTS} agents registered; goal >= 5,000 messages/s")
    print(
        f"post, one transaction per message: {count / each:,.0f} messages/s over {count:,} "
        f"({count / each_cpu:,.0f} per CPU-second of the poster), median of {options.rounds}"
    )
    print(
        f"post_many, {options.batch} messages per transaction: {count / batched:,.0f} "
        f"messages/s over {count:,} ({count / batched_cpu:,.0f} per CPU-second), "
        f"median of {options.rounds}"
    )
    print(
        f"post, one transaction per message, {options.processes} processes at once: "
        f"{many:,.0f} messages/s in all over {count:,}"
    )
    print(
        "post -> pending delivery visible to another connection: "
        f"p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms over {options.samples:,} messages"
    )


if __name__ == "__main__":
    main()
