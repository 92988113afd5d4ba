"""The fleet's figures (printed, never asserted): the store on SQLite and on a real PostgreSQL
server on this machine, what one host's heartbeat and lease cost the store each round, how
long the lead takes to pass to another host when its holder stops renewing it, how soon a
message posted on one host wakes the addressee's daemon on another (the bus's NOTIFY), and how
soon an issue whose host was lost runs again on another (two `legion start` daemons, the real
Claude Code CLI on the scripted model, as the end-to-end tests run them).

Runs a private PostgreSQL server (Debian's `postgresql` package, as the tests do: see
`tests/support/postgres.py`), on 127.0.0.1.

Run: .venv/bin/python bench/fleet.py [--writes 300] [--failovers 5] [--messages 200]
     [--host-losses 3]   (the host losses need the pinned Claude Code: legion doctor --install)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.model_server import bash, text  # noqa: E402
from tests.support.fleet import (  # noqa: E402
    another_host,
    kill_host,
    leads,
    on_host,
    sessions_of,
    shared_project,
)
from tests.support.postgres import PostgresServer  # noqa: E402
from tests.support.swarm import Daemon, open_swarm, runs_until  # noqa: E402
from tests.support.waits import wait_until  # noqa: E402

from common import bench_environment  # noqa: E402
from legion.bus.model import AgentRole, Channel  # noqa: E402
from legion.bus.stored import PostgresBus  # noqa: E402
from legion.core.liveness import SessionState  # noqa: E402
from legion.core.model import Mode  # noqa: E402
from legion.daemon.bus_listener import BusListener  # noqa: E402
from legion.fleet.hosts import Fleet  # noqa: E402
from legion.sessions.placement import HostSessions, Report, Seen  # noqa: E402
from legion.sessions.registry import Registry  # noqa: E402
from legion.store import Store  # noqa: E402
from legion.store.postgres import PgConnection, PostgresStore  # noqa: E402
from legion.store.sqlite import SqliteStore  # noqa: E402
from legion.trackers.local import LocalTracker  # noqa: E402

HOST_TIMEOUT = 6.0  # the host loss's: short, as in the tests, so trials are quick


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def timed(action: Callable[[], object], count: int) -> list[float]:
    spent = []
    for _ in range(count):
        started = time.perf_counter()
        action()
        spent.append(time.perf_counter() - started)
    return spent


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def store_latency(name: str, store: Store, writes: int) -> None:
    tracker = LocalTracker(store, issue_key="LEG")
    created = timed(lambda: tracker.create_issue("a benchmark issue"), writes)
    labelled = timed(lambda: tracker.update_labels("LEG-1", add=["worker-done"]), writes)
    listed = timed(tracker.list_issues, 20)
    print(
        f"{name:10}: create an issue p50 {ms(statistics.median(created))}, "
        f"p99 {ms(p99(created))}; a label p50 {ms(statistics.median(labelled))}; "
        f"list {writes} issues p50 {ms(statistics.median(listed))}"
    )


class Counting:
    """The statements the PostgreSQL store sends, by kind, while it is on."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self._execute = PgConnection.execute

    def __enter__(self) -> Counting:
        original = self._execute
        seen = self.seen

        def execute(conn: PgConnection, sql: str, parameters: object = (), /) -> object:
            seen[" ".join(sql.split()[:2])] += 1
            return original(conn, sql, parameters)  # type: ignore[arg-type]

        PgConnection.execute = execute  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        PgConnection.execute = self._execute  # type: ignore[method-assign]


def heartbeat_cost(store: PostgresStore, rounds: int) -> None:
    fleet = Fleet(store)
    fleet.join("bench", 8, 60.0)
    with Counting() as counting:
        spent = timed(lambda: (fleet.heartbeat("bench", 8), fleet.lead("bench", 60.0)), rounds)
    per_round = sum(counting.seen.values()) / rounds
    print(
        f"one host's heartbeat and lease, each round (every third of host_timeout): "
        f"{per_round:.0f} statements in 2 transactions (and in each, BEGIN, the project's lock "
        "and COMMIT), "
        f"p50 {ms(statistics.median(spent))}, p99 {ms(p99(spent))} over {rounds}"
    )
    # 100 hosts x 20 sessions: each host does this every host_timeout / 3 (20 s by default).
    hosts, every = 100, 20.0
    print(
        f"  100 hosts at host_timeout 60 s: {hosts * 2 / every:.0f} write transactions/s and "
        f"{hosts * per_round / every:.0f} statements/s for the fleet's own upkeep"
    )


def host_tick_cost(url: str, hosts: int, sessions: int, ticks: int) -> None:
    """What one follower's own steps send to the store at each tick, and what a leader's look
    at its workers adds, with `hosts` hosts running `sessions` workers each: the statements
    `daemon/host_step.py`, the stuck-worker check and the roster send (the commands asked of
    the host, the registry read by the report, the reaper and the retired-window sweep, and
    the reports written), every worker mid-turn with a moving transcript (each report
    changes: the most it writes), and no command pending."""
    store = PostgresStore(url, str(uuid.uuid4()), create=True)
    try:
        fleet = Fleet(store)
        registry = Registry(store)
        placement = HostSessions(store)
        names = [f"host-{n}" for n in range(hosts)]
        workers: dict[str, list[int]] = {}
        for name in names:
            fleet.join(name, sessions, 60.0)
            workers[name] = [
                registry.start(
                    f"LEG-{len(names) * n + names.index(name) + 1}",
                    Mode.IMPLEMENT,
                    f"{name}-{n}",
                    f"w-{name}-{n}",
                    Path(),
                    host=name,
                ).id
                for n in range(sessions)
            ]
        follower = names[-1]
        before = {
            wid: report for wid, report in placement.reports().items() if report.host == follower
        }
        with Counting() as counting:
            for tick in range(ticks):
                placement.pending(follower)  # the commands
                for _ in range(3):  # the report's, the reaper's and the sweep's registry read
                    registry.current()
                states: dict[int, Seen] = {
                    wid: (SessionState.RUNNING, 1000.0 + tick, None) for wid in workers[follower]
                }
                placement.report(follower, states, before)
                before = {
                    wid: Report(follower, state, activity, 0.0)
                    for wid, (state, activity, _) in states.items()
                }
        per_tick = sum(counting.seen.values()) / ticks
        with Counting() as counting:
            for _ in range(ticks):
                fleet.hosts(60.0)
                placement.reports()
        remote = sum(counting.seen.values()) / ticks
    finally:
        store.close()
    print(
        f"a follower's own steps at each tick, {hosts} hosts x {sessions} workers, every worker "
        f"mid-turn: {per_tick:.0f} statements (its reports in one write transaction); "
        f"a leader's look at the other hosts' workers adds {remote:.0f} per look"
    )


def failover(url: str, trials: int, duration: float) -> None:
    """Host a leads and stops renewing (its host died); host b asks every third of the lease's
    time, as a daemon does: how long from a's last renewal until b leads."""
    times = []
    for _ in range(trials):
        store = PostgresStore(url, str(uuid.uuid4()), create=True)
        fleet = Fleet(store)
        fleet.join("a", 2, 60.0)
        fleet.join("b", 2, 60.0)
        assert fleet.lead("a", duration) is not None
        died = time.monotonic()
        led = threading.Event()

        def follower(fleet: Fleet = fleet, led: threading.Event = led) -> None:
            while not led.is_set():
                if fleet.lead("b", duration) is not None:
                    led.set()
                    return
                time.sleep(duration / 3)

        thread = threading.Thread(target=follower)
        thread.start()
        thread.join(duration * 3)
        times.append(time.monotonic() - died)
        store.close()
    print(
        f"leader failover, the leader's host gone with a {duration:g} s lease (host_timeout), "
        f"the follower asking every third of it: median {statistics.median(times):.2f} s, "
        f"max {max(times):.2f} s over {trials} (bound: the lease + a third of it, "
        f"{duration * 4 / 3:.2f} s)"
    )


def cross_host_wakeups(url: str, messages: int) -> None:
    """One host posts to an agent of a project whose daemon listens on another connection (as
    on another host): from before the post until the listener wakes the daemon's loop. The
    rest of a delivery (typing into the session) is the same as on one machine."""
    channel = Channel("app", "legion/leg-1")
    poster = PostgresBus(url)
    worker = poster.register_agent(
        channel, "implement", role=AgentRole.IMPLEMENT, runtime="bench", session_id=None
    )
    human = poster.human().id
    woken = threading.Event()
    listener = BusListener(url, lambda: "app", woken.set)
    listener.start()
    try:
        listener.listening.wait(10)
        time.sleep(0.2)
        spent = []
        for n in range(messages):
            woken.clear()
            started = time.perf_counter()
            poster.post(human, channel, f"@{worker.address} message {n}")
            woken.wait(5)
            spent.append(time.perf_counter() - started)
    finally:
        listener.stop()
        poster.close()
    print(
        f"a message posted on one host -> the addressee's daemon woken on another: "
        f"p50 {ms(statistics.median(spent))}, p99 {ms(p99(spent))} over {messages} "
        "(the post's transaction and its NOTIFY included)"
    )


def _host_loss_trial(folder: Path, url: str, host_timeout: float) -> tuple[float, float]:
    """The e2e test's host loss (`tests/e2e/test_fleet.py::test_an_issue_outlives_its_host`),
    timed: an implementer works on alpha, the leader, past its first checkpoint on the shared
    remote; every process of alpha is killed. From the kill, how long until beta leads, and
    until a live process runs the implementer's session again (on beta, from /proc)."""
    bench_environment(folder / "alpha-home")
    repo, remote = shared_project(folder, url)
    home = Path(os.environ["HOME"])
    with (
        open_swarm(folder, repo, home) as alpha_swarm,
        another_host("beta", repo, folder, url, host_timeout) as beta,
    ):
        alpha = on_host(alpha_swarm, "alpha", home, url, host_timeout)
        for swarm in (alpha, beta):
            swarm.env["LEGION_CHECKPOINT_EVERY"] = "1"
        release = alpha.workspace_root / "leg-1" / ".release"  # never made
        plan = "legion issue comment LEG-1 --body '## Plan' && legion issue label LEG-1 "
        plan += "--add worker-done --remove worker-active"
        alpha.server.add_scenario("plan mode for LEG-1", [[bash(plan)], [text("Planned.")]])
        alpha.server.add_scenario(
            "implement mode for LEG-1",
            [[bash("echo kept > kept.txt")], [bash(runs_until(release))], [text("-")]],
        )
        beta.server.add_scenario("implement mode for LEG-1", [[text("Going on on beta.")]])
        alpha.legion("issue", "create", "Keep a file")
        project_id = alpha.json("config")["settings"]["project_id"]["value"]
        implementer = str(uuid.uuid5(uuid.UUID(project_id), "LEG-1:implement"))
        first = Daemon(alpha).start()
        wait_until("alpha leads", lambda: leads(alpha, "alpha"), timeout=60)
        with Daemon(beta):
            checkpoint = "refs/legion/checkpoints/LEG-1:workspace/kept.txt"
            wait_until(
                "the checkpoint on the shared remote",
                lambda: (
                    subprocess.run(
                        ["git", "--git-dir", str(remote), "cat-file", "-e", checkpoint],
                        capture_output=True,
                        check=False,
                    ).returncode
                    == 0
                ),
                timeout=120,
            )
            on_alpha = set(sessions_of(implementer))
            killed = time.monotonic()
            kill_host(alpha, first)
            led = wait_until("beta leads", lambda: leads(beta, "beta") and time.monotonic())
            running = wait_until(
                "the implementer running on beta",
                lambda: set(sessions_of(implementer)) - on_alpha and time.monotonic(),
                timeout=120,
                interval=0.1,
            )
    return led - killed, running - killed


def host_loss(server: PostgresServer, trials: int, host_timeout: float) -> None:
    """Host loss -> the issue running again on another host, with the real Claude Code CLI on
    the scripted model (`_host_loss_trial`), each trial on a database of its own."""
    saved = dict(os.environ)
    leading, running = [], []
    try:
        for _ in range(trials):
            with tempfile.TemporaryDirectory(prefix="lgb-") as folder:
                led, ran = _host_loss_trial(Path(folder), server.database(), host_timeout)
            leading.append(led)
            running.append(ran)
            os.environ.clear()
            os.environ.update(saved)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    print(
        f"host loss (every process killed) -> its implementer running again on another host, "
        f"host_timeout {host_timeout:g} s: median {statistics.median(running):.1f} s, "
        f"max {max(running):.1f} s over {trials} (goal <= 2 x host_timeout, "
        f"{2 * host_timeout:g} s); of which the other host leading: median "
        f"{statistics.median(leading):.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--failovers", type=int, default=5)
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument(
        "--host-losses", type=int, default=3, help="trials of a host lost (0: none)"
    )
    args = parser.parse_args()
    server = PostgresServer()
    try:
        with tempfile.TemporaryDirectory() as folder:
            lite = SqliteStore(Path(folder) / "legion.db")
            store_latency("SQLite", lite, args.writes)
            lite.close()
        url = server.database()
        pg = PostgresStore(url, str(uuid.uuid4()), create=True)
        # The test server's settings: fsync off, so a commit costs no disk flush here.
        store_latency("PostgreSQL", pg, args.writes)
        heartbeat_cost(pg, 200)
        host_tick_cost(url, 3, 10, 50)
        pg.close()
        failover(url, args.failovers, 3.0)
        cross_host_wakeups(url, args.messages)
        if args.host_losses:
            host_loss(server, args.host_losses, HOST_TIMEOUT)
    finally:
        server.close()


if __name__ == "__main__":
    main()
