"""The test side of `tests/support/legion_reader.py`: a swarm's long-lived `legion` process
for read-only polls (see there why)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from tests.support.cli import Result

SCRIPT = Path(__file__).with_name("legion_reader.py")


class LegionReader:
    # Commands that only read: nothing they do changes what a test then observes (not
    # `messages`, which marks what it shows as read).
    READ_ONLY = frozenset(
        {
            ("issue", "show"),
            ("issue", "list"),
            ("pr", "view"),
            ("pr", "list"),
            ("workers",),
            ("status",),
            ("log",),
            ("state",),
            ("config",),
            ("agents",),
            ("events",),
        }
    )

    @classmethod
    def serves(cls, args: Sequence[str]) -> bool:
        return tuple(args[:1]) in cls.READ_ONLY or tuple(args[:2]) in cls.READ_ONLY

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.env = env
        self._lock = threading.Lock()
        self._proc = subprocess.Popen(
            [sys.executable, str(SCRIPT)],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def run(self, *args: str) -> Result:
        with self._lock:
            assert self._proc.stdin is not None and self._proc.stdout is not None
            self._proc.stdin.write(json.dumps(list(args)) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            raise AssertionError(f"the legion reader ended (exit {self._proc.poll()})")
        answer = json.loads(line)
        return Result(answer["code"], answer["out"], answer["err"])

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(10)
