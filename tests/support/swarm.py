"""A Legion project wired to the real Claude Code CLI, a private tmux server and the scripted
model server: the environment of every end-to-end test that runs workers or the daemon."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fakes.model_server import FakeModelServer, text
from tests.support.claude_env import base_environment, find_claude, offline_variables
from tests.support.cli import LEGION_BIN, Result, git, legion_process
from tests.support.processes import waiting_on_descriptors
from tests.support.reader import LegionReader
from tests.support.tmux import private_tmux_socket
from tests.support.waits import heartbeat_stamp, wait_for_ticks, wait_until

TEST_SKILL = """---
name: legion-worker
description: Legion worker (test stand-in). Use when asked to work an issue in a mode.
---

Work the issue in the mode you were given.
"""


@dataclass
class Swarm:
    repo: Path
    server: FakeModelServer
    env: dict[str, str]
    config_dir: Path
    socket: Path
    workspace_root: Path
    reader: LegionReader | None = None

    def legion(self, *args: str, check: bool = True, env: dict[str, str] | None = None) -> Result:
        """Run `legion` in the project (`env`: variables added, as a session of Legion's has)."""
        result = legion_process(list(args), self.repo, dict(self.env, **(env or {})), None, 60)
        if check:
            assert result.returncode == 0, f"legion {' '.join(args)}: {result.stderr}"
        return result

    def json(self, *args: str) -> Any:
        """`legion ARGS --json`, parsed. A read-only command (what polls ask) is answered by
        the swarm's long-lived reader; any other runs as its own `legion` process."""
        if LegionReader.serves(args):
            if self.reader is None or self.reader.env != self.env:
                self.close_reader()
                self.reader = LegionReader(self.repo, dict(self.env))
            result = self.reader.run(*args, "--json")
            assert result.returncode == 0, f"legion {' '.join(args)}: {result.stderr}"
            return json.loads(result.stdout)
        return json.loads(self.legion(*args, "--json").stdout)

    def close_reader(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", str(self.socket), *args],
            capture_output=True,
            text=True,
            check=False,
        ).stdout

    def cli_home(self, sid: str) -> Path:
        """Session `sid`'s own CLI home (`legion.runtime.homes`), in the project's state."""
        state = Path(self.env["XDG_STATE_HOME"])
        found = sorted(state.glob(f"legion/*/cli/*/sessions/{sid}"))
        assert len(found) == 1, f"session {sid}'s home: {found}"
        return found[0]

    def transcripts(self, sid: str) -> list[Path]:
        """Claude Code's transcripts of session `sid` (none while it has no home)."""
        state = Path(self.env["XDG_STATE_HOME"])
        return sorted(state.glob(f"legion/*/cli/*/sessions/{sid}/projects/*/{sid}.jsonl"))

    def worker(self, issue: str) -> dict[str, Any] | None:
        found = [w for w in self.json("workers") if w["issue"] == issue]
        return found[-1] if found else None

    def transcript_lines(self, issue: str) -> list[str]:
        worker = self.worker(issue)
        assert worker is not None
        return Path(worker["transcript"]).read_text(encoding="utf-8").splitlines()


def failure_sections(swarm: Swarm) -> list[tuple[str, str]]:
    """What a failed test's report shows of its swarm (tests/e2e/conftest.py): every pane's last
    40 lines, the model requests (when, which scenario and turn), the daemon's log's end."""
    sections = []
    panes = swarm.tmux("list-panes", "-a", "-F", "#{pane_id}\t#{window_name}\t#{pane_dead}")
    for line in panes.splitlines():
        pane, name, dead = [*line.split("\t"), "", ""][:3]
        shown = swarm.tmux("capture-pane", "-p", "-J", "-S", "-40", "-t", pane).splitlines()
        screen = "\n".join(line.rstrip() for line in shown if line.strip())
        sections.append((f"pane {name}{' (dead)' if dead == '1' else ''}", screen))
    requests = [
        f"{time.strftime('%H:%M:%S', time.localtime(r.time))}.{int(r.time % 1 * 1000):03d} "
        f"{r.path} {r.kind} {r.scenario} turn={r.turn}"
        for r in swarm.server.snapshot()
    ]
    sections.append(("model requests", "\n".join(requests[-60:])))
    try:
        entries = swarm.json("log", "-n", "40")
    except Exception as error:  # a report never fails on what it cannot read
        entries = [{"at": "", "issue": "", "action": "(no action log)", "detail": str(error)}]
    logged = [
        f"{e.get('at', '')} {e.get('issue', '')} {e.get('action', '')} "
        f"{e.get('outcome', '')}: {e.get('detail', '')}"
        for e in entries
    ]
    sections.append(("action log", "\n".join(logged)))
    log = swarm.repo.parent / "daemon-output.log"
    if log.exists():
        sections.append(("daemon output", log.read_text(errors="replace")[-4000:]))
    return sections


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as `legion stop` would; SIGKILL if it does not go within 20 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


class Daemon:
    """`legion start --foreground` in a subprocess, stopped (or killed) at the end."""

    def __init__(
        self,
        swarm: Swarm,
        *,
        tick: float = 1.0,
        mode: str | None = None,
        extra_env: dict[str, str] | None = None,
    ):
        """`mode`: the controller mode (`manual`: a daemon that hosts the sessions a test
        starts by hand, and runs no controller and no reconcile pass of its own)."""
        self.swarm = swarm
        self.env = dict(swarm.env, **(extra_env or {}))
        self.tick = tick
        self.mode = mode
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = swarm.repo.parent / "daemon-output.log"

    def start(self) -> Daemon:
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(LEGION_BIN), "start", "--foreground", "--tick", str(self.tick)]
                + ([] if self.mode is None else ["--mode", self.mode]),
                cwd=self.swarm.repo,
                env=self.env,
                stdout=out,
                stderr=out,
            )
        wait_until("the daemon's pid file", lambda: self.swarm.json("status")["daemon"]["pid"])
        return self

    def passes(self, count: int = 1, *, timeout: float = 60.0) -> None:
        """Make the daemon run `count` whole passes (ticks) now, one after another, and return
        once they ran: what a test waits for where something would happen "within a tick or
        two". Each pass is asked for through the wake-up pipe, as a `legion` command asks; it
        has started when the heartbeat moves and ended when the daemon waits again. A pass
        the pipe could not ask for still comes at the next tick, within `timeout`."""
        assert self.proc is not None
        state = state_dir(self.swarm)
        heartbeat = state / "heartbeat"
        for _ in range(count):
            before = heartbeat_stamp(heartbeat)
            wake(self.swarm, state)
            wait_until(
                "the daemon's next pass",
                lambda before=before: heartbeat_stamp(heartbeat) != before,
                timeout=timeout,
                interval=0.02,
            )
            self.wait_between_ticks(timeout=timeout)

    def ticks(self, count: int) -> None:
        """Return once `count` whole ticks ran after the call, at the daemon's own pace (`tick`
        seconds apart, sooner when a `legion` command wakes it), however loaded the machine
        is: what a test waits for where something would happen within `count` ticks."""
        wait_for_ticks(
            state_dir(self.swarm) / "heartbeat", count, timeout=60 + 5 * count * self.tick
        )

    def wait_between_ticks(self, *, timeout: float = 60.0) -> None:
        """Return once the daemon has ended its pass and waits for the next tick."""
        proc = self.proc
        assert proc is not None
        wait_until(
            "the daemon between two ticks",
            lambda: waiting_on_descriptors(proc.pid) or proc.poll() is not None,
            timeout=timeout,
            interval=0.02,
        )
        assert proc.poll() is None, self.output()[-2000:]

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> Daemon:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


FULL_CYCLE_ACTIONS = (
    "dispatch_planner",
    "transition_to_in_progress",
    "transition_to_needs_review",
    "resume_implementer_for_changes",
    "dispatch_reviewer",
    "transition_to_retro",
    "dispatch_finisher",
    "sweep_workspace",
)


def run_full_cycle(swarm: Swarm, timeout: float = 180) -> tuple[Daemon, set[tuple[str, bool]]]:
    """Create LEG-1 and run the daemon until it is Done and its workspace swept; the daemon
    (stopped) and the (status, workspace exists) pairs seen on the way."""
    swarm.legion("issue", "create", "Feature one", "--body", "Add feature one.")
    workspace = swarm.workspace_root / "leg-1"
    seen: set[tuple[str, bool]] = set()

    def done_and_watched() -> bool:
        status = issue_status(swarm, "LEG-1")
        seen.add((status, workspace.is_dir()))
        return status == "Done"

    with Daemon(swarm) as daemon:
        wait_until("LEG-1 Done", done_and_watched, timeout=timeout)
        wait_until("workspace swept", lambda: not workspace.exists(), timeout=30)
    return daemon, seen


def assert_full_cycle(swarm: Swarm, daemon: Daemon, seen: set[tuple[str, bool]]) -> None:
    """What every full cycle of LEG-1 (`swarm_script(["LEG-1"])`) must have done, whatever
    agent CLI ran it: `seen` holds the (status, workspace exists) pairs watched on the way."""
    # the one workspace lived through implement, review and retro
    for status in ("In Progress", "Needs Review", "Retro"):
        assert (status, True) in seen and (status, False) not in seen, (status, seen)
    issue = swarm.json("issue", "show", "LEG-1")
    assert any(c["body"].startswith("## Plan") for c in issue["comments"])
    pr = issue["pr"]
    assert pr["state"] == "merged"
    assert [r["outcome"] for r in pr["reviews"]] == ["changes_requested", "approved"]
    # merged into main: the feature, the requested docstring, and the retro's learnings
    assert (swarm.repo / "src" / "feature_1.py").read_text().startswith('"""Feature 1."""')
    assert (swarm.repo / "docs" / "solutions" / "leg-1.md").exists()
    assert git(swarm.repo, "log", "-1", "--format=%s").startswith("Merge PR #1")
    actions = [e["action"] for e in swarm.json("log", "-n", "200")]
    for action in FULL_CYCLE_ACTIONS:
        assert action in actions, (action, daemon.output()[-2000:])
    assert swarm.json("workers") == []
    # stopped by SIGTERM: a clean exit that says so
    assert swarm.json("status")["daemon"]["pid"] is None
    assert swarm.json("log", "-n", "5")[-1]["action"] == "daemon_stop"


def window_id(swarm: Swarm, name: str) -> str:
    """The id of the one live window named `name`."""
    out = swarm.tmux("list-windows", "-a", "-F", "#{window_id}\t#{window_name}\t#{pane_dead}")
    ids = [line.split("\t")[0] for line in out.splitlines() if line.split("\t")[1:] == [name, "0"]]
    assert len(ids) == 1, out
    return ids[0]


def screen(swarm: Swarm, window: str) -> str:
    return swarm.tmux("capture-pane", "-p", "-t", window)


def agent_of(swarm: Swarm, session_id: str) -> dict[str, Any]:
    """The bus agent of session `session_id` (`legion agents --all`)."""
    (agent,) = [a for a in swarm.json("agents", "--all") if a["session_id"] == session_id]
    return agent


def issue_status(swarm: Swarm, issue: str) -> str:
    return str(swarm.json("issue", "show", issue)["status"])


# --------------------------------------------------------------------------------------------
# Recovery tests: who runs which session, the action log, and a tmux that misbehaves on cue
# --------------------------------------------------------------------------------------------


def project_id(swarm: Swarm) -> str:
    return str(swarm.json("config")["settings"]["project_id"]["value"])


def session_uuid(swarm: Swarm, key: str) -> str:
    """The deterministic Claude session id of `key` ("LEG-1:implement", "controller")."""
    return str(uuid.uuid5(uuid.UUID(project_id(swarm)), key))


def state_dir(swarm: Swarm) -> Path:
    return Path(swarm.json("config")["settings"]["state_dir"]["value"])


def actions(swarm: Swarm, action: str | None = None, issue: str | None = None) -> list[Any]:
    """Action log entries, oldest first, optionally of one action and one issue."""
    args = ["log", "-n", "5000"] + (["--issue", issue] if issue else [])
    return [e for e in swarm.json(*args) if action is None or e["action"] == action]


def wake(swarm: Swarm, state: Path) -> None:
    """Poke the daemon through its FIFO, as a `legion` write command does, without starting one."""
    try:
        fd = os.open(state / "run" / "daemon.wake", os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        os.write(fd, b"!")
    except OSError:
        pass
    finally:
        os.close(fd)


def windows(swarm: Swarm) -> list[tuple[str, int | None, bool]]:
    """(name, pane pid, pane dead) of every window on the private server."""
    out = swarm.tmux("list-windows", "-a", "-F", "#{window_name}\t#{pane_pid}\t#{pane_dead}")
    found = []
    for line in out.splitlines():
        name, pid, dead = line.split("\t")
        found.append((name, int(pid) if pid.isdigit() else None, dead == "1"))
    return found


def live_pid(swarm: Swarm, window: str) -> int | None:
    """The live process of the window named `window` (None when there is none)."""
    live = [pid for name, pid, dead in windows(swarm) if name == window and not dead]
    assert len(live) <= 1, f"two live windows named {window}: {windows(swarm)}"
    return live[0] if live else None


@contextmanager
def open_swarm(tmp_path: Path, project: Path, home: Path) -> Iterator[Swarm]:
    """A project wired to the real CLI, a private tmux server and the scripted model server:
    what the `swarm` fixture (tests/e2e/conftest.py) yields, and the kill campaign's swarm."""
    claude = find_claude()
    config_dir = tmp_path / "claude-config"
    (config_dir / "skills" / "legion-worker").mkdir(parents=True)
    (config_dir / "skills" / "legion-worker" / "SKILL.md").write_text(TEST_SKILL)
    (config_dir / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True}))
    workspace_root = tmp_path / "work spaces"  # a space on purpose
    server = FakeModelServer().start()
    try:
        with private_tmux_socket() as socket:  # killed before the model server stops
            env = base_environment() | offline_variables(
                server.base_url, home=home, config_dir=config_dir, proxy_url=server.base_url
            )
            env |= {
                "XDG_STATE_HOME": os.environ["XDG_STATE_HOME"],
                "XDG_CONFIG_HOME": os.environ["XDG_CONFIG_HOME"],
                "GIT_CONFIG_NOSYSTEM": "1",
                "LEGION_TMUX_SOCKET": str(socket),
                "LEGION_TMUX_CONFIG": "/dev/null",
                "LEGION_CLAUDE_BIN": str(claude),
                "LEGION_WORKSPACE_ROOT": str(workspace_root),
            }
            made = Swarm(project, server, env, config_dir, socket, workspace_root)
            try:
                yield made
            finally:
                made.close_reader()
    finally:
        server.stop()
    assert server.outbound_attempts() == []


def runs_until(release: Path) -> str:
    """A shell command (a tool call's) that runs until `release` exists: a turn as long as the
    test needs, however loaded the machine, and no longer. Sessions are confined: `release` must
    be where the session can see (a worker's workspace, the controller's repository)."""
    return f"while [ ! -e {shlex.quote(str(release))} ]; do sleep 0.1; done"


CONTROLLER_PROMPT = "<command-name>/legion-controller</command-name>"


def controller_prompts(swarm: Swarm) -> list[str]:
    """Every prompt the controller was given (started or woken with), in order."""
    return [
        request.prompt
        for request in swarm.server.message_requests()
        if request.prompt and CONTROLLER_PROMPT in request.prompt and request.turn == 0
    ]


def judgments(swarm: Swarm) -> list[dict[str, Any]]:
    """The open judgment items, as `legion status --json` shows them."""
    return list(swarm.json("status")["judgments"])


def plan_worker_idle(swarm: Swarm) -> dict[str, object]:
    """LEG-1's planner dispatched by hand, its turn over, idle at its prompt."""
    swarm.legion("issue", "create", "Talkative")
    swarm.server.add_scenario("plan mode for LEG-1", [[text("Planned.")]])
    swarm.legion("dispatch", "LEG-1", "plan")
    worker = wait_until("idle", lambda: (w := swarm.worker("LEG-1")) and w["state"] == "idle" and w)
    assert isinstance(worker, dict)
    return worker
