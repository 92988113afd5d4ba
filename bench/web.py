"""The web view (`legion web`) on a project of 1,000 embedded issues.

Prints (never asserts): the board page's server time (goal <= 150 ms p95), how long a change
on the tracker takes to reach an open page as a push (goal <= 1 s p95), and what 50 open
pages cost the server while nothing changes (goal <= 5 % of a core); then the same push on a
fleet's store, PostgreSQL (a private server, as the tests run one; skipped without `initdb`),
where the change is another process's write NOTIFYing as it commits.

Run: .venv/bin/python bench/web.py [--issues N] [--pages N] [--changes N] [--only-postgresql]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from cli_latency import make_project
from common import ms
from legion.backends import open_backends
from legion.config import load_project
from legion.core.model import Status
from legion.core.web_access import Role
from legion.web.tokens import TokenStore, tokens_path

LEGION = Path(sys.executable).with_name("legion")


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve(repo: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [str(LEGION), "web", "--port", "0"], cwd=repo, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    for line in process.stdout:
        if "/login?token=" in line:
            return process, line.split()[-1].split("/login")[0]
    raise SystemExit("legion web printed no link")


def logged_in(base: str) -> httpx.Client:
    token = TokenStore(tokens_path(os.environ)).mint(f"bench{time.monotonic_ns()}", Role.VIEWER)
    client = httpx.Client(base_url=base, timeout=30)
    client.post("/login", data={"token": token}, headers={"origin": base})
    return client


def board_times(client: httpx.Client, runs: int) -> list[float]:
    client.get("/")  # warm
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get("/")
        samples.append(time.perf_counter() - started)
        assert response.status_code == 200
    return samples


class Stream:
    """One open page's live stream of the board: the pushes it got, with when."""

    def __init__(self, client: httpx.Client, base: str) -> None:
        self.got: list[tuple[float, str]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(client, base), daemon=True)
        self.thread.start()

    def _read(self, client: httpx.Client, base: str) -> None:
        with contextlib.suppress(httpx.HTTPError):  # the server stopped at the end
            self._stream(client, base)

    def _stream(self, client: httpx.Client, base: str) -> None:
        headers = {"origin": base}
        with client.stream("GET", "/events/board", headers=headers, timeout=None) as response:
            data: list[str] = []
            for line in response.iter_lines():
                if self.stop.is_set():
                    return
                if line.startswith("data: "):
                    data.append(line[6:])
                elif not line and data:
                    with self.lock:
                        self.got.append((time.monotonic(), "\n".join(data)))
                    data = []

    def first_holding(self, text: str, since: float, timeout: float) -> float | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for at, data in self.got:
                    if at >= since and text in data:
                        return at
            time.sleep(0.005)
        return None


def push_lags(base: str, client: httpx.Client, write: Callable[[str], None], n: int) -> list[float]:
    """From each of `n` changes (`write(title)`) until an open page is pushed a board that
    holds it."""
    watcher = Stream(client, base)
    time.sleep(2)
    lags = []
    for k in range(n):
        title = f"Changed {k}"
        started = time.monotonic()
        write(title)
        at = watcher.first_holding(title, started, 10)
        lags.append(10.0 if at is None else at - started)
    watcher.stop.set()
    return lags


def on_postgresql(root: Path, issues: int, changes: int) -> None:
    """The push on a PostgreSQL store: a change written by another process."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.support.postgres import PostgresServer

    try:
        server = PostgresServer()
    except Exception as exc:  # no PostgreSQL here: said, not measured
        print(f"on PostgreSQL: not measured ({exc})")
        return
    try:
        os.environ["LEGION_STORE"] = server.database()
        repo = make_project(root / "pg", issues)
        process, base = serve(repo)
        try:
            # This process is not the server's: its commit is announced by NOTIFY alone.
            backends = open_backends(load_project(repo))
            lags = push_lags(
                base,
                logged_in(base),
                lambda title: backends.tracker.create_issue(title, status=Status.TODO),
                changes,
            )
            backends.db.close()
            print(
                f"on PostgreSQL, {issues} issues: another process's change -> pushed to an open "
                f"page: p50 {ms(statistics.median(lags))}, p95 {ms(p95(lags))} over {changes} "
                "(goal: p95 <= 1 s)"
            )
        finally:
            process.terminate()
            process.wait(timeout=10)
    finally:
        os.environ.pop("LEGION_STORE", None)
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--issues", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--only-postgresql", action="store_true")
    options = parser.parse_args()
    if options.only_postgresql:
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
            os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
            os.environ["LEGION_STATE_HOME"] = str(Path(tmp) / "state" / "legion")
            on_postgresql(Path(tmp), 200, options.changes)
        return
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        os.environ["LEGION_STATE_HOME"] = str(Path(tmp) / "state" / "legion")
        repo = make_project(Path(tmp), options.issues)
        process, base = serve(repo)
        try:
            client = logged_in(base)
            board = board_times(client, 30)
            print(
                f"board page, {options.issues} issues: p50 {ms(statistics.median(board))}, "
                f"p95 {ms(p95(board))} over 30 (goal: p95 <= 150 ms)"
            )
            # A change made on the tracker, until an open page is pushed a board holding it.
            backends = open_backends(load_project(repo))
            lags = push_lags(
                base,
                client,
                lambda title: backends.tracker.create_issue(title, status=Status.TODO),
                options.changes,
            )
            print(
                f"a tracker change -> pushed to an open page: p50 {ms(statistics.median(lags))}, "
                f"p95 {ms(p95(lags))}, worst {ms(max(lags))} over {options.changes} "
                "(goal: p95 <= 1 s)"
            )
            # Many pages open, nothing changing: the server's CPU.
            pages = [Stream(logged_in(base), base) for _ in range(options.pages)]
            time.sleep(5)
            before, started = cpu_seconds(process.pid), time.monotonic()
            time.sleep(20)
            share = (cpu_seconds(process.pid) - before) / (time.monotonic() - started)
            print(
                f"{options.pages} open pages, nothing changing: the server uses "
                f"{100 * share:.1f} % of a core (goal <= 5 %)"
            )
            for page in pages:
                page.stop.set()
        finally:
            process.terminate()
            process.wait(timeout=10)
        on_postgresql(Path(tmp), 200, options.changes)


if __name__ == "__main__":
    main()
