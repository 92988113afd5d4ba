"""What a confined process can do to the machine, run through the real sandbox: bubblewrap's
command line as a session gets it (`legion.sandbox.wrap`), the bridge as its first process, a
terminal of its own as a tmux pane gives it (a pty it has as its controlling terminal).

Needs bubblewrap; where the machine forbids the namespaces it needs, skipped, saying why."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from legion.sandbox import (
    Access,
    Confinement,
    Sandbox,
    bridge,
    empty_file,
    find_bwrap,
    legion_install,
    probe,
    wrap,
)

pytestmark = pytest.mark.timeout(60)


def _sandbox() -> Sandbox:
    found = find_bwrap(os.environ)
    assert found is not None, "bubblewrap is not installed: apt install bubblewrap"
    problem = probe(found)
    if problem is not None:
        pytest.skip(f"this machine cannot confine a process: {problem}")
    return Sandbox(found, "bubblewrap")


def _confined(tmp_path: Path, code: str) -> list[str]:
    """The command that runs Python `code` confined as a session is, under its bridge."""
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    confinement = Confinement(
        home=tmp_path / "home",
        empty=empty_file(state),
        access=Access(readable=legion_install()),
    )
    argv = bridge.command([sys.executable, "-c", textwrap.dedent(code)])
    return wrap(_sandbox(), confinement, argv)


class Pane:
    """`argv` in a terminal of its own, as in a tmux pane: its controlling terminal, a new
    session (`setsid --ctty`), what it writes read back from the terminal's other end."""

    def __init__(self, argv: list[str]) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            ["setsid", "--ctty", *argv], stdin=slave, stdout=slave, stderr=slave
        )
        os.close(slave)
        self.seen = b""

    def wait_for(self, text: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while text.encode() not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"never saw {text!r}: {self.seen.decode(errors='replace')}"
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    chunk = b""  # its end closed: all it wrote has been read
                if not chunk:
                    raise AssertionError(f"{text!r} never came: {self.seen.decode()}")
                self.seen += chunk
        return self.seen.decode(errors="replace")

    def close(self) -> None:
        os.close(self.master)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def test_a_confined_process_has_no_capabilities(tmp_path: Path) -> None:
    """Not even when Legion runs as root, where bubblewrap keeps every capability unless told
    otherwise (with `CAP_SYS_ADMIN` a confined process could mount its way out). This process
    is the bridge's child: what exec gives a root process back, it did not get."""
    code = """
        for line in open("/proc/self/status"):
            if line.startswith(("CapEff", "CapPrm")):
                print(line.split()[0], line.split()[1])
        print("done")
    """
    pane = Pane(_confined(tmp_path, code))
    try:
        seen = pane.wait_for("done")
    finally:
        pane.close()
    for name in ("CapEff:", "CapPrm:"):
        assert f"{name} 0000000000000000" in seen, seen
