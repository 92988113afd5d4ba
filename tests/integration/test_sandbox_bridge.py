"""The bridge a confined session reaches the model proxy through (`legion.sandbox.bridge`): a
real process listening on loopback, carrying each connection to a Unix socket as the bytes come,
running its command as its child and ending with its exit code."""

from __future__ import annotations

import os
import pty
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from legion.sandbox import bridge


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return int(probe.getsockname()[1])


def test_a_connection_is_carried_both_ways_as_it_streams(tmp_path: Path) -> None:
    path = tmp_path / "model.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    release = threading.Event()

    def answer() -> None:
        connection, _ = server.accept()
        with connection:
            asked = connection.recv(100)
            connection.sendall(b"first:" + asked)
            # The second part waits until the client has read the first: nothing is held back.
            release.wait(20)
            connection.sendall(b"|second")

    threading.Thread(target=answer, daemon=True).start()
    port = _free_port()
    client = textwrap.dedent(
        f"""
        import socket, sys, time
        for _ in range(100):
            try:
                s = socket.create_connection(("127.0.0.1", {port}))
                break
            except OSError:
                time.sleep(0.05)
        s.sendall(b"hello")
        print(s.recv(100).decode(), flush=True)
        sys.stdin.readline()
        print(s.recv(100).decode(), flush=True)
        sys.exit(3)
        """
    )
    argv = bridge.command([sys.executable, "-c", client], port, str(path))
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        assert process.stdout.readline().strip() == "first:hello"
        release.set()
        process.stdin.write("go\n")
        process.stdin.flush()
        assert process.stdout.readline().strip() == "|second"
        assert process.wait(30) == 3  # the child's exit code
    server.close()


def test_bad_arguments_are_one_line_and_exit_2() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "legion.sandbox.bridge", "port", "x", "--", "true"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().startswith("usage:") and "Traceback" not in done.stderr


def test_the_bridge_knows_a_window_that_hung_up_before_it_started() -> None:
    """As a namespace's pid 1 the bridge ignores a hangup that comes before its handler: it
    then looks at its terminal, and a hung-up one (no longer a tty to `isatty`) says so; a live
    one, /dev/null and a pipe do not."""
    probe = "from legion.sandbox import bridge; print(bridge._hung_up())"

    def hung_up(stdin: int, *, close_first: int | None = None) -> str:
        child = subprocess.Popen(
            [sys.executable, "-c", f"import time; time.sleep(0.5); {probe}"],
            stdin=stdin, stdout=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        if close_first is not None:
            os.close(close_first)
        out, _ = child.communicate(timeout=30)
        return out.strip()

    master, slave = pty.openpty()
    assert hung_up(slave) == "False"  # the window is there
    os.close(slave)
    master2, slave2 = pty.openpty()
    assert hung_up(slave2, close_first=master2) == "True"  # the window went first
    os.close(slave2)
    os.close(master)
    assert hung_up(subprocess.DEVNULL) == "False"
    read, write = os.pipe()
    os.close(write)
    assert hung_up(read) == "False"
    os.close(read)
