"""A Legion project wired to the real Claude Code CLI, a private tmux server and the scripted
model server: the environment of every end-to-end test that runs workers or the daemon."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import LEGION_BIN, Result
from tests.fakes.model_server import FakeModelServer

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

    def legion(self, *args: str, check: bool = True) -> Result:
        proc = subprocess.run(
            [str(LEGION_BIN), *args],
            cwd=self.repo,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        result = Result(proc.returncode, proc.stdout, proc.stderr)
        if check:
            assert result.returncode == 0, f"legion {' '.join(args)}: {result.stderr}"
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.legion(*args, "--json").stdout)

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", str(self.socket), *args],
            capture_output=True,
            text=True,
            check=False,
        ).stdout

    def worker(self, issue: str) -> dict[str, Any] | None:
        found = [w for w in self.json("workers") if w["issue"] == issue]
        return found[-1] if found else None

    def transcript_lines(self, issue: str) -> list[str]:
        worker = self.worker(issue)
        assert worker is not None
        return Path(worker["transcript"]).read_text(encoding="utf-8").splitlines()


def wait_until(what: str, check: Callable[[], Any], timeout: float = 45.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class Daemon:
    """`legion start --foreground` in a subprocess, stopped (or killed) at the end."""

    def __init__(self, swarm: Swarm, *, tick: float = 1.0, extra_env: dict[str, str] | None = None):
        self.swarm = swarm
        self.env = dict(swarm.env, **(extra_env or {}))
        self.tick = tick
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = swarm.repo.parent / "daemon-output.log"

    def start(self) -> Daemon:
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(LEGION_BIN), "start", "--foreground", "--tick", str(self.tick)],
                cwd=self.swarm.repo,
                env=self.env,
                stdout=out,
                stderr=out,
            )
        wait_until("the daemon's pid file", lambda: self.swarm.json("status")["daemon"]["pid"])
        return self

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> Daemon:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def issue_status(swarm: Swarm, issue: str) -> str:
    return str(swarm.json("issue", "show", issue)["status"])
