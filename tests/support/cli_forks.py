"""`legion` commands for the tests, each a process of its own, minus the interpreter's start and
Legion's imports.

A short `legion` command spends most of its CPU starting Python and importing Legion (about
0.3 s of 0.35 s here), and the suite runs thousands: on two cores that was most of the
non-end-to-end suite's time. So each test process keeps one server process that has imported
the CLI, and every `legion` it runs is a `fork()` of that server: a new process with the
test's argv, working directory, environment and standard streams (passed over a Unix socket),
that runs the console script's own entry point (`legion.cli.entry`) and exits as it would
(its exit code, its signals, atexit, non-daemon threads joined). Nothing of one command is
left for the next: each forks from the same untouched server.

What differs from `exec` of the console script: the modules were imported before the
command's environment was set. No module of Legion reads the environment, the working folder
or the terminal on import (they do so when called) but the fault points' arming (a command
armed with `LEGION_TEST_KILL_AT` is `exec`ed), and the server imports nothing that does (typer's
rich formatting, which reads `TERMINAL_WIDTH` on import, is left to the command).
`LEGION_TEST_FORKS=0` runs every command with `exec` instead (`tests/support/cli.py`); the
Quickstart's test, the end-to-end tests' signals and the workers' own commands always do.

Run as a script, it is the server: `python cli_forks.py SOCKET`.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import json
import locale
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ENABLED = "LEGION_TEST_FORKS"
_MAX_MESSAGE = 1 << 20
_FDS = 3  # stdin, stdout, stderr


# -- the server ------------------------------------------------------------------------------


def _preload() -> None:
    """What a command imports that is worth importing once: the command tree, what most
    commands open (the backends, the workers, the store), every plugin's module (the trackers,
    forges, stores and runtimes a project names) and rich's console (the output)."""
    import importlib
    import re

    import legion.plugins

    names = [
        "legion.cli.app", "legion.backends", "legion.diagnostics.log", "legion.reconcile.observe",
        "legion.services.agent_watch", "legion.sessions.workers", "rich.console", "rich.text",
        "rich.table", "sqlite3",
    ]  # fmt: skip
    source = Path(legion.plugins.__file__).read_text(encoding="utf-8")
    names += sorted(set(re.findall(r'"(legion\.[\w.]+):\w+"', source)))
    for name in names:
        importlib.import_module(name)


def _serve(path: str) -> tuple[dict[str, object], list[int]]:
    """Answer requests until the test process that started this one is gone; returns only in
    a forked child, with its request and its three descriptors."""
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    children: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    print("ready", flush=True)
    while os.getppid() == parent:
        for key, _ in selector.select(timeout=1.0):
            if key.fileobj is wake_read:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 512)
                continue
            conn, _ = listener.accept()
            try:
                message, fds, _, _ = socket.recv_fds(conn, _MAX_MESSAGE, _FDS)
            except OSError:
                conn.close()
                continue
            pid = os.fork()
            if pid == 0:  # the command: leave the server's sockets and signals behind
                signal.set_wakeup_fd(-1)
                for fd in (wake_read, wake_write):
                    os.close(fd)
                selector.close()
                listener.close()
                for other in (conn, *children.values()):
                    other.close()
                return json.loads(message), fds
            for fd in fds:
                os.close(fd)
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"pid": pid}).encode())
            children[pid] = conn
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.sendall(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode())
                conn.close()
    raise SystemExit(0)


def _become(request: dict[str, object], fds: list[int]) -> None:
    """Turn this fork into the command's process, as `exec` of the console script makes it."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in env.items()})
    os.chdir(str(request["cwd"]))
    argv = request["argv"]
    assert isinstance(argv, list)
    sys.argv = [str(arg) for arg in argv]
    sys.path[0] = str(Path(sys.argv[0]).parent)  # a console script's own folder, as Python sets
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    encoding = os.environ.get("PYTHONIOENCODING") or locale.getpreferredencoding(False)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding=encoding)
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding=encoding, write_through=unbuffered
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False),
        encoding=encoding,
        errors="backslashreplace",
        line_buffering=True,
    )


def main(path: str) -> None:
    _preload()
    gc.freeze()  # the server's objects: never scanned, nor their pages copied, by a command's GC
    request, fds = _serve(path)
    _become(request, fds)
    from legion.cli import entry

    try:
        entry()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    # How the interpreter ends, up to tearing down its modules, which a fork need not do (and
    # which, touching every object the server imported, cost more than the command itself).
    threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads are waited for
    atexit._run_exitfuncs()
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code & 0xFF)


# -- the test's side -------------------------------------------------------------------------


class ForkServer:
    """One test process's server (started on first use, ended with the process)."""

    _lock = threading.Lock()
    _started: ForkServer | None = None

    def __init__(self) -> None:
        self.starts = _starts_the_same(dict(os.environ))
        self._folder = tempfile.mkdtemp(prefix="legion-forks-")
        self.path = os.path.join(self._folder, "socket")
        # Not the test's own: it outlives the test that first ran a command (the reaper would
        # end it with that test), and it ends with the run.
        from tests.support.reaper import TEST_MARK

        self._proc = subprocess.Popen(
            [sys.executable, __file__, self.path],
            cwd="/",
            env={k: v for k, v in os.environ.items() if k != TEST_MARK},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        if self._proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the legion fork server did not start (exit {self._proc.poll()})")

    @classmethod
    def shared(cls, starts: dict[str, str]) -> ForkServer:
        """The running server, or a new one if there is none or it started otherwise."""
        with cls._lock:
            server = cls._started
            if server is None or server._proc.poll() is not None or server.starts != starts:
                if server is not None:
                    server.close()
                cls._started = server = cls()
            return server

    @classmethod
    def stop_shared(cls) -> None:
        """End the running server, if any (the next command starts another): a run that
        checks what it left behind stops its own helper first."""
        with cls._lock:
            if cls._started is not None:
                cls._started.close()
                cls._started = None

    def close(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:  # a loaded machine: ended all the same, and waited for
            self._proc.kill()
            self._proc.wait()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
            os.rmdir(self._folder)

    def run(
        self,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        input_text: str | None,
        timeout: float,
    ) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of `argv` run as `subprocess.run(..., text=True)`
        would: its output decoded and its newlines translated likewise; a
        `subprocess.TimeoutExpired` after `timeout` seconds, the command killed."""
        encoding = locale.getpreferredencoding(False)
        stdin_read, stdin_write = os.pipe()
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            conn.connect(self.path)
            request = json.dumps({"argv": argv, "cwd": str(cwd), "env": env}).encode()
            socket.send_fds(conn, [request], [stdin_read, out_write, err_write])
        finally:
            for fd in (stdin_read, out_write, err_write):
                os.close(fd)
        pid = json.loads(conn.recv(_MAX_MESSAGE))["pid"]
        pending = (input_text or "").encode(encoding)
        stdin_open = True

        def close_stdin() -> None:
            nonlocal stdin_open
            if stdin_open:
                stdin_open = False
                os.close(stdin_write)

        chunks: dict[int, list[bytes]] = {out_read: [], err_read: []}
        code: int | None = None
        selector = selectors.DefaultSelector()
        selector.register(out_read, selectors.EVENT_READ)
        selector.register(err_read, selectors.EVENT_READ)
        selector.register(conn, selectors.EVENT_READ)
        if pending:
            os.set_blocking(stdin_write, False)
            selector.register(stdin_write, selectors.EVENT_WRITE)
        else:
            close_stdin()
        deadline = time.monotonic() + timeout
        try:
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    expired = subprocess.TimeoutExpired(
                        argv, timeout, output=b"".join(chunks[out_read]),
                        stderr=b"".join(chunks[err_read]),
                    )  # fmt: skip
                    expired.pid = pid  # type: ignore[attr-defined]  # which was killed
                    raise expired
                for key, _ in selector.select(timeout=left):
                    if key.fileobj is conn:
                        answer = conn.recv(_MAX_MESSAGE)
                        selector.unregister(conn)
                        if answer:
                            code = json.loads(answer)["code"]
                    elif key.fd == stdin_write:
                        try:
                            written = os.write(stdin_write, pending[:65536])
                        except BrokenPipeError:
                            written = len(pending)
                        pending = pending[written:]
                        if not pending:
                            selector.unregister(stdin_write)
                            close_stdin()
                    else:
                        data = os.read(key.fd, 65536)
                        if data:
                            chunks[key.fd].append(data)
                        else:
                            selector.unregister(key.fd)
        finally:
            selector.close()
            conn.close()
            for fd in (out_read, err_read):
                os.close(fd)
            close_stdin()
        if code is None:
            raise RuntimeError(f"the legion fork server lost the command {argv} (pid {pid})")

        def text(data: list[bytes]) -> str:
            return b"".join(data).decode(encoding).replace("\r\n", "\n").replace("\r", "\n")

        return code, text(chunks[out_read]), text(chunks[err_read])


# What the interpreter reads as it starts (the import path, the locale, its flags), and the one
# variable Legion reads on import (`legion.diagnostics.faults`: a process armed for its life): a
# fork of a server started with others would not honour them. Those a fork sets itself are not
# here.
_SET_AT_START = ("PYTHON", "LANG", "LC_ALL", "LC_CTYPE", "LEGION_TEST_KILL_AT")
_SET_BY_FORK = frozenset({"PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONDONTWRITEBYTECODE"})


def _starts_the_same(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(_SET_AT_START) and k not in _SET_BY_FORK}


def server_for(env: dict[str, str]) -> ForkServer | None:
    """The server to fork a command with environment `env` from; None to `exec` it: when
    turned off, or when `env` changes how the interpreter starts from how this process did
    (a server starts with this process's environment)."""
    if env.get(ENABLED, "1") == "0":
        return None
    ours = _starts_the_same(dict(os.environ))
    if _starts_the_same(env) != ours:
        return None
    return ForkServer.shared(ours)


if __name__ == "__main__":
    main(sys.argv[1])
