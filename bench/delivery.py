"""Message delivery to an idle agent, and what a daemon tick costs (printed, never asserted).

Runs Legion's real daemon (`legion.daemon.Daemon`) on a real project (`init_project` in a temp
git repository; XDG_STATE_HOME, XDG_CONFIG_HOME, HOME and CLAUDE_CONFIG_DIR in a temp folder)
with a private tmux server (`tmux -S <tmp>/sock -f /dev/null`).

1. Delivery latency (issue 11, goal p99 <= 200 ms): one agent on the bus whose session is a tmux
   window running a stand-in for an idle Claude Code session: a Python loop that reads lines
   from its terminal (raw mode: Enter submits) and appends each prompt to the session's
   transcript as a JSON line, with the moment it read the Enter. For each message: `bus.post`
   (the human mentions the agent), then the daemon's own `deliver_messages()` (its bus steps:
   pending deliveries, a look at the sessions in tmux, typing the prompt with `send-keys`,
   waiting for the transcript to grow, marking the delivery). Measured from the start of
   `bus.post` to
   - sent: the daemon's `tmux send-keys` (text, then Enter) returned;
   - accepted: the stand-in read the Enter that submits the prompt (and wrote it to the
     transcript at once; the real CLI takes longer to write its transcript);
   - delivered: `deliver_messages()` returned, the delivery marked on the bus (the daemon polls
     the transcript every 100 ms, so this includes up to one poll interval).
   Between messages the stand-in's turn is ended (an `end_turn` line) and the transcript's
   mtime put back: the figures exclude the daemon's settle wait (SETTLE_S after a session's
   last activity) and its wake-up, which is measured on its own: `bus.post` + the FIFO write
   of `legion say` (`daemon_link.notify`) -> the daemon's wait (`Daemon._wait`) returning.
2. Daemon CPU per tick with 50 agents of one project and an idle bus: `Daemon._bus_steps`
   (agent statuses, then `deliver_messages`: the bus steps of `tick()`, the look reset before
   them as `tick()` does), CPU seconds of this process and of its children (tmux clients),
   wall time, and subprocesses spawned per tick; (a) 50 workers with live idle windows and ~200 KB
   transcripts, (b) 50 agents whose sessions are not in tmux (no worker records).

Run: .venv/bin/python bench/delivery.py [--messages N] [--wakes N] [--ticks N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import make_repo
from legion.bus.model import AgentRole, AgentStatus, Channel
from legion.bus.sessions import project_channel_name
from legion.core.ids import session_id
from legion.core.liveness import SETTLE_S
from legion.core.model import Mode
from legion.daemon import Daemon, DaemonConfig
from legion.daemon_link import notify, wake_fifo
from legion.runtime.tmux import Tmux
from legion.services.projects import init_project
from legion.sessions.registry import Registry
from legion.sessions.workers import window_name

# The stand-in for an idle Claude Code session. Its terminal in raw mode, like the CLI's: a
# newline typed (`send-keys -l` of a "\n") is part of the prompt, Enter ("\r") submits it. Each
# prompt is appended to the transcript at once as a user entry, with when Enter was read
# (CLOCK_MONOTONIC, which every process shares).
STAND_IN = """
import json, os, sys, time, tty
tty.setraw(0)
prompt = b""
with open(sys.argv[1], "a", encoding="utf-8") as out:
    while chunk := os.read(0, 65536):
        *done, prompt = (prompt + chunk).split(b"\\r")
        for text in done:
            entry = {"type": "user", "read_at": time.monotonic(),
                     "message": {"role": "user", "content": text.decode(errors="replace")}}
            out.write(json.dumps(entry) + "\\n")
            out.flush()
"""
END_TURN = (
    json.dumps(
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "stop_reason": "end_turn",
                "content": [{"type": "text", "text": "ok"}],
            },
        }
    )
    + "\n"
)


class TimedTmux(Tmux):
    """The daemon's tmux, noting when typing a prompt (text, then Enter) returned."""

    sent_at: list[float]

    def send_text(self, target: str, text: str, *, enter: bool = True) -> None:
        super().send_text(target, text, enter=enter)
        self.sent_at.append(time.monotonic())


class SpawnCounter:
    """How many subprocesses this process starts (every `subprocess` call goes through
    `Popen._execute_child`)."""

    def __init__(self) -> None:
        self.count = 0
        self._original: Any = None

    def __enter__(self) -> SpawnCounter:
        self._original = original = subprocess.Popen._execute_child  # type: ignore[attr-defined]
        counter = self

        def counted(popen: Any, *args: Any, **kwargs: Any) -> Any:
            counter.count += 1
            return original(popen, *args, **kwargs)

        subprocess.Popen._execute_child = counted  # type: ignore[attr-defined]
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.Popen._execute_child = self._original  # type: ignore[attr-defined]


@contextlib.contextmanager
def environment(root: Path) -> Iterator[Path]:
    """A private HOME, XDG dirs, Claude config dir and tmux server for this process; the
    tmux socket. The server is killed and the variables restored at the end."""
    sock = Path(tempfile.mkdtemp(prefix="lgd-")) / "sock"  # short: a socket path is limited
    saved = dict(os.environ)
    home = root / "home"
    (home / "claude-config").mkdir(parents=True)
    os.environ.update(
        HOME=str(home),
        XDG_STATE_HOME=str(home / "state"),
        XDG_CONFIG_HOME=str(home / "config"),
        CLAUDE_CONFIG_DIR=str(home / "claude-config"),
        GIT_CONFIG_NOSYSTEM="1",
        LEGION_TMUX_SOCKET=str(sock),
        LEGION_TMUX_CONFIG="/dev/null",
    )
    (home / ".gitconfig").write_text("[user]\n\tname = Bench\n\temail = bench@legion.invalid\n")
    try:
        yield sock
    finally:
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True, check=False)
        shutil.rmtree(sock.parent, ignore_errors=True)
        os.environ.clear()
        os.environ.update(saved)


def tmux(sock: Path, *args: str) -> None:
    subprocess.run(["tmux", "-S", str(sock), "-f", "/dev/null", *args], check=True)


def make_daemon(root: Path, sock: Path) -> Daemon:
    """The real daemon of a new project, its tmux session started (an unrelated first window,
    no controller: its window `main` does not exist)."""
    repo = make_repo(root / "repo")
    project, _ = init_project(repo)
    daemon = Daemon(project, DaemonConfig(tick=60.0), os.environ)
    tmux(
        sock,
        "new-session",
        "-d",
        "-s",
        daemon.workers.windows.session,
        "-n",
        "idle",
        "sleep",
        "3600",
    )
    return daemon


def add_worker(
    daemon: Daemon, sock: Path, n: int, command: list[str] | None, transcript_body: str
) -> tuple[int, Path, str]:
    """Worker LEG-n in plan mode: its registry record, its agent on the bus, its transcript
    (ending its turn, last written long ago) and, given a command, its tmux window. Returns
    the agent's id, the transcript and the window's name."""
    project = daemon.project
    issue = f"LEG-{n}"
    sid = session_id(project.settings.project_id, issue, Mode.PLAN)
    workspace = project.root.parent / "ws" / issue.lower()
    workspace.mkdir(parents=True, exist_ok=True)
    name = window_name(issue, Mode.PLAN)
    transcript = daemon.workers.runtimes.default.transcript(daemon.env, workspace, sid)
    transcript.parent.mkdir(parents=True, exist_ok=True)
    transcript.write_text(transcript_body + END_TURN, encoding="utf-8")
    backdate(transcript)
    if command is not None:  # "{transcript}" in it: the transcript's path
        argv = [arg.replace("{transcript}", str(transcript)) for arg in command]
        tmux(
            sock,
            "new-window",
            "-d",
            "-t",
            f"={daemon.workers.windows.session}:",
            "-n",
            name,
            *argv,
        )
        Registry(daemon.backends.db).start(issue, Mode.PLAN, sid, name, workspace)
    channel = Channel(project_channel_name(project), f"legion/{issue.lower()}")
    agent = daemon.delivery.bus.register_agent(
        channel, "plan", role=AgentRole.PLAN, runtime="claude", session_id=sid
    )
    return agent.id, transcript, name


def backdate(transcript: Path) -> None:
    """The session's last activity long past: the daemon's settle wait does not apply."""
    old = time.time() - 10 * SETTLE_S - 60
    os.utime(transcript, (old, old))


def quantiles(samples: list[float]) -> tuple[float, float]:
    if len(samples) < 2:
        return samples[0], samples[0]
    cuts = statistics.quantiles(samples, n=100)
    return cuts[49], cuts[98]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


# -- 1. delivery latency -----------------------------------------------------------------------


def bench_delivery(root: Path, messages: int) -> dict[str, list[float]]:
    with environment(root) as sock:
        daemon = make_daemon(root, sock)
        timed = TimedTmux(socket=sock, config=Path("/dev/null"))
        timed.sent_at = []
        daemon.workers.windows.tmux = timed
        script = root / "stand_in.py"
        script.write_text(STAND_IN, encoding="utf-8")
        command = [sys.executable, str(script), "{transcript}"]
        agent_id, transcript, _ = add_worker(daemon, sock, 1, command, "")
        project = daemon.project
        bus = daemon.delivery.bus
        human = bus.human().id
        address = bus.agent(agent_id).address
        channel = Channel(project_channel_name(project), "main")
        time.sleep(0.5)  # the stand-in reading its terminal
        figures: dict[str, list[float]] = {"sent": [], "accepted": [], "delivered": []}
        failed = 0
        for n in range(messages):
            size = transcript.stat().st_size
            daemon.delivery.begin()  # as a tick does
            start = time.monotonic()
            posted = bus.post(human, channel, f"@{address} ping {n}")
            daemon.delivery.deliver()
            done = time.monotonic()
            deliveries = bus.deliveries(posted.message.id)
            if not timed.sent_at or deliveries[0].state.value != "delivered":
                failed += 1
                timed.sent_at.clear()
                continue
            figures["sent"].append(timed.sent_at.pop() - start)
            timed.sent_at.clear()
            figures["delivered"].append(done - start)
            read_at = wait_for_prompt(transcript, size, posted.message.id)
            figures["accepted"].append(read_at - start)
            with transcript.open("a", encoding="utf-8") as out:  # the turn ends
                out.write(END_TURN)
            backdate(transcript)
        if failed:
            print(f"(delivery: {failed} of {messages} messages not delivered in one pass)")
        return figures


def wait_for_prompt(transcript: Path, size: int, message_id: str) -> float:
    """When the stand-in read the Enter that submitted the prompt with `message_id`."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with transcript.open(encoding="utf-8") as handle:
            handle.seek(size)
            entries = [json.loads(line) for line in handle if line.endswith("\n")]
        for entry in entries:
            if message_id in str(entry["message"]["content"]):
                return float(entry["read_at"])
        time.sleep(0.002)
    raise RuntimeError("the stand-in never read the prompt")


def bench_wake(root: Path, samples: int) -> list[float]:
    """`bus.post` + `legion say`'s FIFO write -> the daemon's wait returning."""
    with environment(root):
        daemon = make_daemon(root, Path(os.environ["LEGION_TMUX_SOCKET"]))
        fifo = wake_fifo(daemon.project)
        os.mkfifo(fifo, 0o600)
        fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        bus = daemon.delivery.bus
        human = bus.human().id
        channel = Channel(project_channel_name(daemon.project), "main")
        seconds = []
        try:
            for n in range(samples):
                returned: list[float] = []
                daemon._next_wait = 60.0

                def wait() -> None:
                    daemon._wait(fd)
                    returned.append(time.monotonic())  # noqa: B023

                waiter = threading.Thread(target=wait)
                waiter.start()
                time.sleep(0.02)  # in its select()
                start = time.monotonic()
                bus.post(human, channel, f"wake {n}")
                notify(daemon.project)
                waiter.join(5)
                seconds.append(returned[0] - start)
        finally:
            os.close(fd)
        return seconds


# -- 2. a tick with 50 agents --------------------------------------------------------------------


def transcript_lines(lines: int) -> str:
    out = []
    for n in range(lines):
        out.append(
            json.dumps(
                {"type": "user", "message": {"role": "user", "content": f"step {n} " + "x" * 200}}
            )
        )
        out.append(END_TURN.strip())
    return "\n".join(out) + "\n"


def bench_tick(root: Path, agents: int, ticks: int, live: bool) -> dict[str, float]:
    with environment(root) as sock:
        daemon = make_daemon(root, sock)
        body = transcript_lines(500) if live else ""  # ~200 KB each
        for n in range(1, agents + 1):
            add_worker(daemon, sock, n, ["sleep", "3600"] if live else None, body)
        bus = daemon.delivery.bus

        def steps() -> None:
            daemon._bus_steps()  # statuses, then deliveries, under the watch lock, as a tick

        steps()  # the first tick sets every status from what it sees
        statuses = {a.status for a in bus.agents()}
        cpu, child, wall, spawned = [], [], [], []
        for _ in range(ticks):
            with SpawnCounter() as counter:
                own = time.process_time()
                kids = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.monotonic()
                steps()
                wall.append(time.monotonic() - start)
                cpu.append(time.process_time() - own)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                child.append(after.ru_utime - kids.ru_utime + after.ru_stime - kids.ru_stime)
            spawned.append(counter.count)
        # Agents whose sessions Legion never started are nobody's to judge: their statuses
        # stay as registered, so only the live workers' are checked.
        if live and statuses != {AgentStatus.IDLE}:
            print(f"(tick: statuses after the first tick: {sorted(s.value for s in statuses)})")
        return {
            "cpu": statistics.median(cpu),
            "children": statistics.median(child),
            "wall": statistics.median(wall),
            "spawned": statistics.median(spawned),
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000)
    parser.add_argument("--wakes", type=int, default=200)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--ticks", type=int, default=50)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        started = time.monotonic()
        figures = bench_delivery(Path(tmp) / "delivery", options.messages)
        took = time.monotonic() - started
        wakes = bench_wake(Path(tmp) / "wake", options.wakes)
        live = bench_tick(Path(tmp) / "live", options.agents, options.ticks, live=True)
        gone = bench_tick(Path(tmp) / "gone", options.agents, options.ticks, live=False)
    count = len(figures["sent"])
    print(
        f"delivery to an idle agent (real daemon deliver_messages(), stand-in session in tmux), "
        f"over {count:,} messages in {took:.0f} s; goal p99 <= 200 ms; excludes the daemon's "
        f"settle wait ({SETTLE_S:g} s after the session's last activity) and its wake-up:"
    )
    for key, what in (
        ("sent", "post -> keystrokes sent (send-keys returned)"),
        ("accepted", "post -> accepted (the prompt in the transcript)"),
        ("delivered", "post -> deliver_messages() returned, marked delivered"),
    ):
        p50, p99 = quantiles(figures[key])
        print(f"  {what}: p50 {ms(p50)}, p99 {ms(p99)}")
    p50, p99 = quantiles(wakes)
    print(
        f"daemon wake-up: post + FIFO write (legion say) -> the daemon's wait returned: "
        f"p50 {ms(p50)}, p99 {ms(p99)} over {len(wakes)}"
    )
    for label, tick in (
        (f"{options.agents} live idle workers (~200 KB transcripts)", live),
        (f"{options.agents} agents, no session in tmux", gone),
    ):
        print(
            f"tick bus steps (agent statuses + deliver_messages), {label}, idle bus, "
            f"median of {options.ticks}: CPU {ms(tick['cpu'])} own + {ms(tick['children'])} "
            f"children, wall {ms(tick['wall'])}, {tick['spawned']:.0f} subprocesses"
        )


if __name__ == "__main__":
    main()
