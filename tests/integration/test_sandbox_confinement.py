"""What a confined process can do to the machine, run through the real sandbox: bubblewrap's
command line as a session gets it (`legion.sandbox.wrap`), the bridge as its first process, a
terminal of its own as a tmux pane gives it (a pty it has as its controlling terminal).

Needs bubblewrap; where the machine forbids the namespaces it needs, skipped, saying why."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import textwrap
import time
from pathlib import Path

from legion.sandbox import (
    Access,
    Confinement,
    bridge,
    empty_file,
    legion_install,
    wrap,
)
from tests.support.sandbox import require_sandbox


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
    return wrap(require_sandbox(), confinement, argv)


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


def test_a_confined_process_cannot_type_into_its_terminal(tmp_path: Path) -> None:
    """TIOCSTI pushes bytes into a terminal's input as if typed: in a tmux pane, text the user's
    shell or another program reads once the session ends. The sandbox is a session of its own
    (`--new-session`), without a controlling terminal: the kernel refuses it."""
    code = """
        import fcntl, termios
        try:
            fcntl.ioctl(0, termios.TIOCSTI, b"x")
            print("TIOCSTI typed")
        except OSError as exc:
            print(f"TIOCSTI refused: {exc.errno}")
        print("done")
    """
    pane = Pane(_confined(tmp_path, code))
    try:
        seen = pane.wait_for("done")
    finally:
        pane.close()
    assert "TIOCSTI refused" in seen, seen


def test_a_resize_and_a_hangup_of_its_terminal_reach_the_confined_cli(tmp_path: Path) -> None:
    """A session of its own gets no signal from its terminal: its first process (the bridge)
    passes on a resize (SIGWINCH, so the CLI draws to the window's new size) and a hangup (SIGHUP,
    so the CLI ends as it does outside, its transcript whole)."""
    out = tmp_path / "out"
    out.mkdir()
    code = f"""
        import os, signal, sys, time
        def said(signum, frame):
            size = os.get_terminal_size(0) if signum == signal.SIGWINCH else ""
            with open({str(out / "signals")!r}, "a") as log:
                log.write(f"{{signal.Signals(signum).name}} {{size}}\\n")
            if signum == signal.SIGHUP:
                sys.exit(0)
        signal.signal(signal.SIGWINCH, said)
        signal.signal(signal.SIGHUP, said)
        print("ready", flush=True)
        while True:
            time.sleep(0.05)
    """
    command = _confined(tmp_path, code)
    command = [
        *command[: command.index("--")],
        "--bind",
        str(out),
        str(out),
        *command[command.index("--") :],
    ]
    pane = Pane(command)
    signals = out / "signals"
    try:
        pane.wait_for("ready")
        fcntl.ioctl(pane.master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        deadline = time.monotonic() + 45
        while "SIGWINCH" not in (signals.read_text() if signals.exists() else ""):
            assert time.monotonic() < deadline, "the resize never reached the CLI"
            time.sleep(0.05)
        assert "columns=120, lines=40" in signals.read_text()
    finally:
        pane.close()  # the window goes: a hangup
    assert pane.process.returncode is not None
    deadline = time.monotonic() + 45
    while "SIGHUP" not in signals.read_text():
        assert time.monotonic() < deadline, "the hangup never reached the CLI"
        time.sleep(0.05)


def test_a_session_reads_the_users_legion_config_without_its_secrets(
    project: Path, tmp_path: Path
) -> None:
    """The user's config may hold the fleet store's URL with its password, or a token: a
    confined session is shown, in its place, a copy the daemon wrote without them (read-only),
    and nothing else of the folder around it."""
    from legion.backends import open_backends, open_workers
    from legion.config import load_project
    from legion.config.paths import user_config_path
    from legion.core.model import Mode
    from tests.integration.test_doctor import fake_claude

    password, token = "s3cret-pw-5e1f", "ghp_token5e1f"
    real = user_config_path(os.environ)
    real.parent.mkdir(parents=True, exist_ok=True)
    real.write_text(
        f'store = "postgresql://alice:{password}@db.example:5432/legion"\n'
        f'claude_args = ["--verbose", "{token}"]\n'
        "wip_limit = 3\n"
    )
    (real.parent / "notes.txt").write_text(f"{password}\n")
    claude = fake_claude(tmp_path, "2.1.328")
    # The store here is the project's SQLite file: the URL above is only there to be hidden.
    env = dict(os.environ) | {"LEGION_CLAUDE_BIN": str(claude), "LEGION_STORE": "sqlite"}
    loaded = load_project(project, env=env)
    backends = open_backends(loaded)
    try:
        workers = open_workers(loaded, backends, env)
        runtime = workers.runtimes.for_worker("LEG-1", Mode.IMPLEMENT)
        confinement = workers.supervisor.confinement.for_session(
            "sid-1", project, runtime, env, proxied=True, relayed=True, worker=True
        )
    finally:
        backends.db.close()
    looks = f"cat {real}; echo; cat {real.parent / 'notes.txt'}; echo > {real}; echo WROTE $?"
    argv = bridge.command(["sh", "-c", looks])
    command = wrap(require_sandbox(), confinement, argv)
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    seen = done.stdout + done.stderr
    assert password not in seen and token not in seen, seen
    assert "postgresql://alice@db.example:5432/legion" in seen, seen
    assert '"wip_limit" = 3' in seen and '"--verbose"' in seen, seen
    assert "WROTE 0" not in seen, seen  # read-only inside
    assert password in real.read_text()  # the user's own file is as it was
