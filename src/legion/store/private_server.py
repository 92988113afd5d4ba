"""A PostgreSQL server of Legion's own, from the system's `postgresql` package (`initdb` and
`postgres`): `legion demo --hosts N` runs its fleet on one when no store is given, and the tests
run theirs (`tests/support/postgres.py`). On a free port of 127.0.0.1 and a socket in its own
folder, with password logins only. Run as root, the server runs as an unprivileged user
(`postgres`, which the package creates; else `nobody`): PostgreSQL refuses root.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from legion.errors import LegionError, ToolMissingError

SUPERUSER = "legion"
INSTALL_HINT = "PostgreSQL is not installed (no initdb): apt-get install postgresql"


def _bin_dir() -> Path:
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda path: int(path.parent.parent.name) if path.parent.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1].parent
    on_path = shutil.which("initdb")
    if on_path is None:
        raise ToolMissingError(INSTALL_HINT)
    return Path(on_path).parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PrivatePostgres:
    """A PostgreSQL server of its own, in a new folder under `parent` (None: the system's
    temporary folder), on a free port of 127.0.0.1, with password logins only."""

    superuser = SUPERUSER
    database_prefix = "legion_"
    unmarked: tuple[str, ...] = ()  # variables of this process its server does not get

    def __init__(self, parent: Path | None = None) -> None:
        self.bin = _bin_dir()
        self.password = secrets.token_urlsafe(18)
        self.root = Path(tempfile.mkdtemp(prefix="legion-pg-", dir=parent))
        self.data = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.log = self.root / "server.log"
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._user: str | None = None
        if os.geteuid() == 0:
            for name in ("postgres", "nobody"):
                with contextlib.suppress(KeyError):
                    pwd.getpwnam(name)
                    self._user = name
                    break
        self._init()
        self.start()

    # -- running it -----------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in self.unmarked}
        env["LC_ALL"] = "C.UTF-8"
        return env

    def _run(self, argv: list[str]) -> None:
        done = subprocess.run(
            argv,
            env=self._env(),
            user=self._user,
            capture_output=True,
            text=True,
            check=False,
            cwd=self.root,
        )
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
            raise LegionError(f"{Path(argv[0]).name} failed: {tail[0]}")

    def _init(self) -> None:
        password_file = self.root / "password"
        password_file.write_text(self.password + "\n", encoding="utf-8")
        self.socket_dir.mkdir()
        self.log.touch()
        if self._user is not None:
            record = pwd.getpwnam(self._user)
            for path in (self.root, self.socket_dir, password_file, self.log):
                os.chown(path, record.pw_uid, record.pw_gid)
        self.root.chmod(0o700)
        self._run(
            [
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                self.superuser,
                "--auth=scram-sha-256",
                f"--pwfile={password_file}",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ]
        )
        password_file.unlink()

    def start(self) -> None:
        """Start (or start again) the server, on the port it had if it had one."""
        self.port = self.port or _free_port()
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                [
                    str(self.bin / "postgres"),
                    "-D",
                    str(self.data),
                    "-p",
                    str(self.port),
                    "-k",
                    str(self.socket_dir),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "fsync=off",
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "full_page_writes=off",
                    "-c",
                    "max_connections=200",
                ],
                env=self._env(),
                user=self._user,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                start_new_session=True,
            )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                tail = self.log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
                raise LegionError(f"PostgreSQL exited at once: {tail[0]} (see {self.log})")
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise LegionError(
                        f"PostgreSQL did not answer within {timeout:g} s (see {self.log})"
                    ) from None
                time.sleep(0.1)

    def stop(self, *, how: int = signal.SIGINT) -> None:
        """Stop it: SIGINT is PostgreSQL's fast shutdown; SIGKILL, a crash."""
        if self._process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            if how == signal.SIGKILL:
                os.killpg(self._process.pid, how)
            else:
                self._process.send_signal(how)
        self._process.wait(timeout=30)
        self._process = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- using it -------------------------------------------------------------------------------

    def url(self, database: str, *, user: str | None = None, password: str | None = None) -> str:
        """A credential: it holds the password."""
        user = self.superuser if user is None else user
        secret = self.password if password is None else password
        return f"postgresql://{user}:{secret}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = f"{self.database_prefix}{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)
