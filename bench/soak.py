"""A swarm that runs for a long while under faults (issue 39): `--issues` issues on two hosts
of one project sharing a private PostgreSQL server, the real Claude Code CLI on the scripted
model, and for `--minutes` minutes a fault every `--fault-every` seconds, of a kind drawn at
random (`--seed`): a worker, a daemon or a host's tmux server killed with SIGKILL, the
database restarted, or a host lost (every process of it killed at once) and back a while
later. Then the swarm runs on without faults until every issue is Done, everything is
stopped, and the soak checks what it left:

- every issue Done exactly once: one PR each, merged once (one merge commit on the shared
  remote's main), no commit twice on main, no comment of a worker posted twice;
- no work lost: every commit ever at the tip of a `legion/` branch, on either host's clone or
  on the shared remote, is on main, or each of its changes is (the same patch: a commit made
  just before its host was lost, and made again by the worker that took the issue over), and
  so is every issue's feature and retro (`tests.support.campaign.work_problems`, the kill
  campaign's check);
- never two live processes on one session (sampled from /proc all through the run);
- no process left behind once everything was stopped (`tests.support.reaper`);
- the daemons' resident memory, threads and open files, sampled every few seconds, flat after
  warm-up: a daemon's growth (`growth`) under 10 % in each.

A daemon killed starts afresh, so growth is judged per daemon process, on those that lived at
least a third of the run. So that some do, the faults that end a daemon (a daemon killed, a
host lost) strike beta in the first half of the faults and alpha in the second: alpha's first
daemon lives through the first half, beta's last through the second (and alpha, which leads at
first, loses the lead when struck). Every other fault strikes either host.

The workers are the kill campaign's (`tests.support.campaign.issue_scenarios`): idempotent, as
the worker skill asks a real model to be, since a killed worker is run again. A worker restarted
three times within 15 minutes makes Legion ask a human (`user-input-needed`) by design; the
faults are the cause, so the soak answers as the question asks (it removes the label) and
counts how often it was asked. Any other question stays unanswered (and the soak fails).

Figures printed; the soak exits 1 when a check fails. Everything runs on 127.0.0.1, stops by
itself (the faults' minutes, then at most `--finish-minutes` to finish), and every process it
started is stopped at the end, however it ends.

Run: .venv/bin/python bench/soak.py [--issues 30] [--minutes 15] [--fault-every 30] [--seed N]
     [--quick]   (--quick: 6 issues, 2 minutes; needs the pinned Claude Code and PostgreSQL)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support import reaper  # noqa: E402
from tests.support.campaign import (  # noqa: E402
    SESSION_MODES,
    BranchWatch,
    issue_scenarios,
    work_problems,
)
from tests.support.cli_forks import ForkServer  # noqa: E402
from tests.support.fleet import (  # noqa: E402
    Sampler,
    another_host,
    kill_host,
    on_host,
    session_processes,
    shared_project,
)
from tests.support.postgres import PostgresServer  # noqa: E402
from tests.support.processes import SessionWatch  # noqa: E402
from tests.support.swarm import Daemon, Swarm, open_swarm, session_uuid  # noqa: E402

from common import bench_environment  # noqa: E402
from legion.core.model import Label  # noqa: E402
from legion.demo.swarm_script import controller_scenarios  # noqa: E402
from legion.reconcile.answers import RESTARTS_QUESTION  # noqa: E402

FAULTS = ("worker", "daemon", "tmux", "database", "host")
# Shorter than the default minute, so a lost host's issues move soon; long enough that the
# database's restart (a few seconds) lapses no lease.
HOST_TIMEOUT = 20.0
HOST_BACK_S = 2 * HOST_TIMEOUT  # a lost host comes back this long after it was lost
DATABASE_DOWN_S = (2.0, 5.0)  # the database stays down this long (at random) when restarted
TICK = 2.0
SETTINGS = {
    "LEGION_CHECKPOINT_EVERY": "5",  # a lost host loses at most 5 s of a turn's work
    "LEGION_STALE_AFTER": "20",  # a worker whose turn ended unfinished starts again
    "LEGION_RESTART_COOLDOWN": "5",
}
SAMPLE_EVERY = 5.0
WARM_UP = 0.2  # of a daemon's samples, the first fifth is its warm-up
GROWTH_LIMIT = 0.10
PROGRESS_EVERY = 15.0
ASKED = Label.USER_INPUT_NEEDED.value
ACTIVE = Label.WORKER_ACTIVE.value
MARK = "SOAK_REAPER_RUN"  # in every process this one starts: what is left of them is found


def growth(values: Sequence[float]) -> float | None:
    """How much `values` (samples in time order) grew after warm-up: the first fifth dropped,
    the median of the last quarter of the rest over the median of its first quarter, less one
    (0.05: grew 5 %). None when too few samples are left to tell (fewer than 8) or the first
    quarter's median is 0."""
    kept = list(values)[int(len(values) * WARM_UP) :]
    quarter = len(kept) // 4
    if quarter < 2:
        return None
    first = statistics.median(kept[:quarter])
    last = statistics.median(kept[-quarter:])
    return None if first == 0 else last / first - 1


@dataclass
class Host:
    name: str
    swarm: Swarm
    daemon: Daemon | None = None
    back_at: float | None = None  # when a lost host comes back (monotonic)

    def start(self) -> None:
        self.daemon = Daemon(self.swarm, tick=TICK).start()
        self.back_at = None

    @property
    def pid(self) -> int | None:
        daemon = self.daemon
        proc = None if daemon is None else daemon.proc
        return None if proc is None or proc.poll() is not None else proc.pid


def fd_kind(target: str, sockets: Mapping[int, str] | None = None) -> str:
    """What an open file is, from its link in /proc/PID/fd: a socket as `sockets` names it by
    its inode (`socket_names`; else `socket`), `pipe`, an anonymous inode's name, or the file's
    path with its digits made `N` (a log, a database, its WAL)."""
    if target.startswith("socket:"):
        inode = int(target.removeprefix("socket:[").rstrip("]") or 0)
        return (sockets or {}).get(inode, "socket")
    if target.startswith("pipe:"):
        return "pipe"
    if target.startswith("anon_inode:"):
        return target
    return re.sub(r"\d+", "N", target)


def socket_names(pid: int) -> dict[int, str]:
    """Process `pid`'s sockets by inode, each named by what it is for, from its /proc/PID/net
    tables: `tcp :P` a connection accepted on (or the listener at) its own port P, `tcp to :P`
    one it made to port P, `unix PATH` (digits made `N`) or `unix` (no name: a socketpair or
    the client's end). What is unreadable is left out (said `socket`)."""
    names: dict[int, str] = {}
    tcp: list[tuple[int, int, bool, int]] = []  # local port, remote port, listening, inode
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                cols = line.split()
                local, remote = (
                    int(cols[1].rsplit(":", 1)[1], 16),
                    int(cols[2].rsplit(":", 1)[1], 16),
                )
                tcp.append((local, remote, cols[3] == "0A", int(cols[9])))
    listening = {local for local, _, listens, _ in tcp if listens}
    for local, remote, _, inode in tcp:
        names[inode] = f"tcp :{local}" if local in listening else f"tcp to :{remote}"
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/net/unix").read_text().splitlines()[1:]:
            cols = line.split()
            path = re.sub(r"\d+", "N", cols[7]) if len(cols) > 7 else ""
            names[int(cols[6])] = f"unix {path}".strip()
    return names


@dataclass
class Life:
    """One daemon process's samples: (seconds into the soak, RSS KiB, threads, open files)."""

    host: str
    pid: int
    samples: list[tuple[float, int, int, int]] = field(default_factory=list)
    # What each sample's open files were (`fd_kind`): what a growth is made of.
    kinds: list[Counter[str]] = field(default_factory=list)

    def files_grown(self) -> str:
        """The open files the last sample holds and the first after warm-up did not, and
        back: `+2 socket, -1 pipe`."""
        first, last = self.kinds[int(len(self.kinds) * WARM_UP)], self.kinds[-1]
        more, fewer = last - first, first - last
        said = [f"+{n} {kind}" for kind, n in sorted(more.items())]
        said += [f"-{n} {kind}" for kind, n in sorted(fewer.items())]
        return ", ".join(said) or "the same kinds"

    @property
    def seconds(self) -> float:
        return self.samples[-1][0] - self.samples[0][0] if self.samples else 0.0


class DaemonSampler(Sampler):
    """Every daemon's resident memory, threads and open files, from /proc, every few seconds."""

    every = SAMPLE_EVERY

    def __init__(self, hosts: list[Host], started: float) -> None:
        super().__init__()
        self.hosts = hosts
        self.started = started
        self.lives: dict[int, Life] = {}

    def sample(self) -> None:
        for host in self.hosts:
            pid = host.pid
            if pid is None:
                continue
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                names = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue  # it died meanwhile
            kinds: Counter[str] = Counter()
            sockets = socket_names(pid)
            for name in names:
                with contextlib.suppress(OSError):  # closed meanwhile
                    kinds[fd_kind(os.readlink(f"/proc/{pid}/fd/{name}"), sockets)] += 1
            files = len(names)
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            rss = int(fields["VmRSS"].split()[0])
            threads = int(fields["Threads"])
            life = self.lives.setdefault(pid, Life(host.name, pid))
            life.samples.append((time.monotonic() - self.started, rss, threads, files))
            life.kinds.append(kinds)


@dataclass
class Fault:
    at: float  # seconds into the soak
    kind: str
    detail: str


class Soak:
    def __init__(self, hosts: list[Host], server: PostgresServer, seed: int, started: float):
        self.hosts = hosts
        self.by_name = {host.name: host for host in hosts}
        self.server = server
        self.random = random.Random(seed)
        self.started = started
        self.faults: list[Fault] = []
        self.answered: list[str] = []  # the issues whose restarts question the soak answered

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def say(self, line: str) -> None:
        """Progress, on stderr: stdout holds the figures only (`bench/all.py` tables them)."""
        print(f"[{self.elapsed():6.0f} s] {line}", file=sys.stderr, flush=True)

    # -- the faults ------------------------------------------------------------------------------

    def workers(self) -> dict[str, list[int]]:
        """The live Claude Code processes of the project's workers (not its controller's)."""
        controller = session_uuid(self.hosts[0].swarm, "controller")
        return {sid: pids for sid, pids in session_processes().items() if sid != controller}

    def strike(self, first_half: bool) -> None:
        """One fault, of a kind drawn among those that can strike now."""
        up = [host for host in self.hosts if host.back_at is None]
        # The faults that end a daemon strike beta first, alpha later (the module says why).
        ended = self.by_name["beta" if first_half else "alpha"]
        kinds = ["database", "tmux"]
        if self.workers():
            kinds.append("worker")
        if ended.back_at is None:
            kinds.append("daemon")
            if len(up) == len(self.hosts):
                kinds.append("host")
        kind = self.random.choice([k for k in FAULTS if k in kinds])
        if kind == "worker":
            sid, pids = self.random.choice(sorted(self.workers().items()))
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            detail = f"session {sid[:8]}'s Claude Code (pid {', '.join(map(str, pids))})"
        elif kind == "daemon":
            assert ended.daemon is not None
            pid = ended.pid
            ended.daemon.kill()
            time.sleep(self.random.uniform(0.5, 3.0))  # as a supervisor starts it again
            ended.start()
            detail = f"{ended.name}'s daemon (pid {pid}), started again"
        elif kind == "tmux":
            host = self.random.choice(up)
            server = (host.swarm.tmux("list-sessions", "-F", "#{pid}").split() or [""])[0]
            if server:
                with contextlib.suppress(OSError):
                    os.kill(int(server), signal.SIGKILL)
            detail = f"{host.name}'s tmux server (pid {server or 'none running'})"
        elif kind == "database":
            down = self.random.uniform(*DATABASE_DOWN_S)
            self.server.stop()  # a fast shutdown: every connection cut, nothing committed lost
            time.sleep(down)
            self.server.start()
            detail = f"PostgreSQL restarted, down {down:.1f} s"
        else:
            assert ended.daemon is not None
            kill_host(ended.swarm, ended.daemon)
            ended.back_at = time.monotonic() + HOST_BACK_S
            detail = f"{ended.name} lost (every process killed), back in {HOST_BACK_S:g} s"
        self.faults.append(Fault(self.elapsed(), kind, detail))
        self.say(f"fault {len(self.faults)}: {kind}: {detail}")

    def bring_back(self, *, all_now: bool = False) -> None:
        for host in self.hosts:
            if host.back_at is not None and (all_now or time.monotonic() >= host.back_at):
                host.start()
                self.say(f"{host.name} back: its daemon started again")

    # -- watching ----------------------------------------------------------------------------------

    def issues(self) -> list[dict[str, Any]] | None:
        """Every issue, as `legion issue list --json` shows it; None while the store is away."""
        try:
            return list(self.hosts[0].swarm.json("issue", "list"))
        except Exception:  # a store restarting: the next look will tell
            return None

    def answer(self, issues: list[dict[str, Any]]) -> None:
        """Stands in for the human Legion asks about a worker that keeps dying (restarted
        `REDISPATCH_LIMIT` times within 15 minutes): the cause is the soak's faults, so the
        flag goes, as the question asks. Any other question stays unanswered."""
        swarm = self.hosts[0].swarm
        for issue in issues:
            if ASKED not in issue["labels"]:
                continue
            name = issue["identifier"]
            said = [c for c in swarm.json("issue", "comments", name) if c["author"] == "legion"]
            if said and RESTARTS_QUESTION in said[-1]["body"]:
                swarm.legion("issue", "label", name, "--remove", ASKED)
                self.answered.append(name)
                self.say(f"{name}: Legion asked a human about its restarts; answered")

    def progress(self, total: int) -> bool:
        """Says where the swarm stands; whether every issue is Done with no worker on it."""
        found = self.issues()
        kinds = Counter(fault.kind for fault in self.faults)
        said = ", ".join(f"{kind} {kinds[kind]}" for kind in FAULTS if kinds[kind])
        faults = f"faults {len(self.faults)}{f' ({said})' if said else ''}"
        if found is None:
            self.say(f"the store did not answer; {faults}")
            return False
        with contextlib.suppress(Exception):  # the store went away meanwhile: next time
            self.answer(found)
        done = [i for i in found if i["status"] == "Done" and ACTIVE not in i["labels"]]
        self.say(f"Done {len(done)}/{total}; {faults}")
        return len(found) == total and len(done) == total


def run(args: argparse.Namespace, folder: Path) -> int:
    """The soak in `folder`: its hosts set up, run, faulted, finished, stopped and checked."""
    server = PostgresServer()
    try:
        url = server.database()
        bench_environment(folder / "alpha-home")
        repo, remote = shared_project(folder, url)
        home = Path(os.environ["HOME"])
        with (
            open_swarm(folder, repo, home) as made,
            another_host("beta", repo, folder, url, HOST_TIMEOUT) as beta,
        ):
            alpha = on_host(made, "alpha", home, url, HOST_TIMEOUT)
            return soak(args, server, [Host("alpha", alpha), Host("beta", beta)], remote)
    finally:
        server.close()


def soak(args: argparse.Namespace, server: PostgresServer, hosts: list[Host], remote: Path) -> int:
    issues = [f"LEG-{n}" for n in range(1, args.issues + 1)]
    for host in hosts:
        host.swarm.env |= SETTINGS
        scenarios = host.swarm.server.script.scenarios
        scenarios.extend(controller_scenarios("auto"))  # type: ignore[arg-type]
        for issue in issues:
            scenarios.extend(issue_scenarios(issue))
    alpha = hosts[0].swarm
    for issue in issues:
        alpha.legion("issue", "create", f"Feature {issue.split('-')[1]}")
    sessions = {session_uuid(alpha, "controller")} | {
        session_uuid(alpha, f"{issue}:{mode}") for issue in issues for mode in SESSION_MODES
    }
    clones = [host.swarm.repo for host in hosts]
    started = time.monotonic()
    state = Soak(hosts, server, args.seed, started)
    sampler = DaemonSampler(hosts, started)
    finished = False
    with (
        SessionWatch(sessions, interval=0.5) as watch,
        BranchWatch(remote, *clones, every=2.0) as branches,
    ):
        try:
            for host in hosts:  # alpha first: it leads
                host.start()
            sampler.start()
            state.say(f"{len(issues)} issues; alpha and beta up; faults for {args.minutes:g} min")
            faulting = time.monotonic()
            faults_end = faulting + args.minutes * 60
            next_fault = faulting + args.fault_every
            next_word = faulting
            while time.monotonic() < faults_end:
                state.bring_back()
                now = time.monotonic()
                if now >= next_fault:
                    state.strike(first_half=now < faulting + args.minutes * 30)
                    # Every `fault_every` s; a fault that took long (a daemon started again
                    # waits for it) leaves the swarm half that time before the next.
                    since = time.monotonic() + args.fault_every / 2
                    next_fault = max(next_fault + args.fault_every, since)
                if time.monotonic() >= next_word:
                    state.progress(len(issues))
                    next_word = time.monotonic() + PROGRESS_EVERY
                time.sleep(0.5)
            state.bring_back(all_now=True)
            state.say("faults over: the swarm finishes")
            finish_end = time.monotonic() + args.finish_minutes * 60
            while time.monotonic() < finish_end and not finished:
                finished = state.progress(len(issues))
                if not finished:
                    time.sleep(PROGRESS_EVERY)
            ran_for = state.elapsed()
        finally:
            sampler.stop()
            for host in hosts:
                if host.daemon is not None:
                    host.daemon.stop()
    problems = [] if finished else [f"not every issue Done within {args.finish_minutes:g} min"]
    problems += outcome(alpha, issues, remote, branches, watch)
    figures = daemon_figures(sampler, ran_for)
    report(state, args.minutes, issues, not problems, ran_for, figures)
    problems += figures.problems
    if problems:
        # What the soak's store held goes with it: the action log is kept in the folder.
        kept = remote.parent / "actions.json"
        kept.write_text(alpha.legion("log", "-n", "100000", "--json", check=False).stdout)
    for problem in problems:
        print(f"FAILED: {problem}", file=sys.stderr, flush=True)
    return 1 if problems else 0


def outcome(
    swarm: Swarm, issues: list[str], remote: Path, branches: BranchWatch, watch: SessionWatch
) -> list[str]:
    """What the swarm left, as the module says it must be."""
    problems = []
    if watch.overlaps:
        problems.append(f"two processes ran one session at once: {watch.overlaps[:2]}")
    listed = {issue["identifier"]: issue["status"] for issue in swarm.json("issue", "list")}
    if sorted(listed) != sorted(issues):
        problems.append(f"issues lost or added: {sorted(listed)}")
    not_done = sorted(issue for issue, status in listed.items() if status != "Done")
    if not_done:
        problems.append(f"not Done: {not_done}")
    prs = Counter(pr["issue"] for pr in swarm.json("pr", "list"))
    twice = sorted(issue for issue, count in prs.items() if count > 1)
    if twice or sorted(prs) != sorted(issues):
        problems.append(f"not one PR for each issue: {dict(prs)}")
    for issue in issues:
        said = Counter(
            (comment["author"], comment["body"])
            for comment in swarm.json("issue", "comments", issue)
            if comment["author"] != "legion"
        )
        repeated = [body[:40] for (_, body), count in said.items() if count > 1]
        if repeated:
            problems.append(f"{issue}: a comment posted twice: {repeated}")
    return problems + work_problems(remote, issues, branches.tips, branches.repos)


@dataclass
class DaemonFigures:
    lines: list[str]
    problems: list[str]


def daemon_figures(sampler: DaemonSampler, ran_for: float) -> DaemonFigures:
    """Each daemon's growth, judged on those that lived at least a third of the run."""
    lines, problems = [], []
    judged = [life for life in sampler.lives.values() if life.seconds >= ran_for / 3]
    for life in sorted(judged, key=lambda life: (life.host, life.samples[0][0])):
        cells = []
        for index, what, unit in ((1, "RSS", "MiB"), (2, "threads", ""), (3, "open files", "")):
            values = [sample[index] for sample in life.samples]
            grew = growth(values)
            kept = values[int(len(values) * WARM_UP) :]
            first = statistics.median(kept[: len(kept) // 4 or 1])
            last = statistics.median(kept[-(len(kept) // 4 or 1) :])
            scale = 1024 if unit == "MiB" else 1
            shown = f"{what} {first / scale:.0f} -> {last / scale:.0f}{unit and ' ' + unit}"
            cells.append(f"{shown} ({'?' if grew is None else f'{grew:+.0%}'})")
            if grew is None or grew >= GROWTH_LIMIT:
                made_of = f" ({life.files_grown()})" if what == "open files" else ""
                problems.append(f"{life.host}'s daemon {life.pid}: {shown}, growth {grew}{made_of}")
        lines.append(
            f"  {life.host}'s daemon, {life.seconds / 60:.1f} min, {len(life.samples)} samples: "
            + ", ".join(cells)
        )
    if not judged:
        problems.append("no daemon lived a third of the run: growth not judged")
    others = len(sampler.lives) - len(judged)
    return DaemonFigures(
        [
            f"daemons after warm-up (first {WARM_UP:.0%} of samples dropped), first quarter's "
            f"median -> last quarter's, every {SAMPLE_EVERY:g} s (limit +{GROWTH_LIMIT:.0%}; "
            f"{others} shorter-lived daemon processes not judged):",
            *lines,
        ],
        problems,
    )


def report(
    state: Soak,
    minutes: float,
    issues: list[str],
    passed: bool,
    ran_for: float,
    figures: DaemonFigures,
) -> None:
    """The figures, on stdout; `passed`: whether the swarm's outcome passed its checks."""
    kinds = Counter(fault.kind for fault in state.faults)
    print(
        f"{len(issues)} issues on 2 hosts (PostgreSQL), {len(state.faults)} faults in "
        f"{minutes:g} min ({', '.join(f'{kind} {kinds[kind]}' for kind in FAULTS)}); "
        f"the run took {ran_for / 60:.1f} min",
        flush=True,
    )
    print(
        f"Legion asked a human about a worker that kept dying {len(state.answered)} times "
        f"({len(set(state.answered))} issues; the soak answered, as a human would)",
        flush=True,
    )
    if passed:
        print(
            "every issue Done exactly once (one PR, one merge on the shared remote; no commit "
            "or worker's comment twice); no work lost (every legion/ branch tip's changes on "
            "main); no session run by two processes at once",
            flush=True,
        )
    else:
        print("the swarm's outcome FAILED its checks (below, on stderr)", flush=True)
    for line in figures.lines:
        print(line, flush=True)


@contextlib.contextmanager
def everything_stopped(folder: Path) -> Iterator[list[str]]:
    """Whatever this soak started is found and stopped at the end, however it ends; the
    processes still running once the soak stopped everything itself are listed, each by its
    pid and command line (what it left behind, a failure)."""
    mark = uuid.uuid4().hex
    os.environ[MARK] = mark
    left: list[str] = []
    try:
        yield left
    finally:
        ForkServer.stop_shared()  # the soak's own `legion` runner, not Legion's
        time.sleep(2)  # a fence notices its tmux session gone within a second
        left.extend(described(pid) for pid in reaper.find((MARK, mark), [str(folder)]))
        reaper.reap((MARK, mark), [str(folder)])


def described(pid: int) -> str:
    """A process by its pid and command line (cut short), as the soak reports one."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"{pid} (gone)"
    line = " ".join(part.decode(errors="replace") for part in argv if part)
    return f"{pid} {line[:160]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--issues", type=int, default=30)
    parser.add_argument("--minutes", type=float, default=15.0, help="of faults")
    parser.add_argument("--fault-every", type=float, default=30.0, help="seconds")
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument(
        "--finish-minutes", type=float, default=25.0, help="at most, after the faults"
    )
    parser.add_argument("--quick", action="store_true", help="6 issues, 2 minutes of faults")
    args = parser.parse_args()
    if args.quick:
        args.issues, args.minutes = 6, 2.0
    for name in list(os.environ):
        if name.startswith("LEGION_"):
            del os.environ[name]
    # A SIGTERM stops the soak as Ctrl-C does: everything it started is stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    folder = Path(tempfile.mkdtemp(prefix="legion-soak-"))
    code = 1
    try:
        with everything_stopped(folder) as left:
            code = run(args, folder)
        if left:
            print(f"FAILED: {len(left)} processes left behind: {left}", file=sys.stderr)
            code = 1
        else:
            print("processes left behind once stopped: none", flush=True)
        return code
    finally:
        if code == 0:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            print(f"the soak's folder is kept: {folder}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
