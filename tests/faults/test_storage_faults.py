"""The state folder misbehaving: read-only, full, and fought over by fifty writers at once.

Each failure must be one line on stderr (`legion: error: …`, exit 1), with nothing half-written:
afterwards the database passes SQLite's integrity check and holds exactly what the commands that
succeeded wrote. A read-only or full file system is made for real (a read-only bind mount, a
small tmpfs) when the tests run as root, which is how CI runs them; as another user a read-only
folder is a chmod, and the full disk is skipped (mounting needs root). A machine that refuses
the mounts skips them too, saying why, except on CI (`CI` set), where each such skip is a
failure (`tests.support.ci`): there the proof must run.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from tests.support.ci import skip_here_fail_on_ci
from tests.support.cli import LEGION_BIN, Result, run_legion

ROOT = os.geteuid() == 0


def legion(project: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    return run_legion(*args, cwd=project, env=env)


def one_line_error(result: Result) -> str:
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("legion: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def integrity(db: Path) -> str:
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


def titles(project: Path, env: dict[str, str] | None = None) -> list[str]:
    import json

    listed = legion(project, "issue", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    return [issue["title"] for issue in json.loads(listed.stdout)]


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


def umount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], check=False, capture_output=True).returncode:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)
    assert not os.path.ismount(path), f"{path} is still mounted"


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """`folder` read-only: a read-only bind mount of itself as root (root ignores modes), else
    the folder 0500 and its files 0400."""
    if not ROOT:
        files = [p for p in folder.iterdir() if p.is_file()]
        for path in files:
            path.chmod(0o400)
        folder.chmod(0o500)
        try:
            yield
        finally:
            folder.chmod(0o700)
            for path in files:
                path.chmod(0o600)
        return
    try:
        mount("--bind", str(folder), str(folder))
    except subprocess.CalledProcessError as exc:
        skip_here_fail_on_ci(f"cannot bind-mount here: {exc.stderr.strip()}")
    try:
        mount("-o", "remount,bind,ro", str(folder))
        yield
    finally:
        umount(folder)


def state_dir(project: Path) -> Path:
    import json

    config = json.loads(legion(project, "config", "--json").stdout)
    return Path(config["settings"]["state_dir"]["value"])


def fill(path: Path, leave: int) -> None:
    """Write `path` until the file system is full, to the last block; then give `leave` bytes
    back."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 512, 1):
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
        os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
    finally:
        os.close(fd)


def test_a_read_only_state_folder_is_a_one_line_error_and_nothing_half_written(
    project: Path,
) -> None:
    for title in ("One", "Two"):
        assert legion(project, "issue", "create", title).returncode == 0
    state = state_dir(project)
    db = state / "legion.db"
    with read_only(state):
        with pytest.raises(OSError):
            (state / "probe").write_text("x")  # really read-only
        error = one_line_error(legion(project, "issue", "create", "Three"))
        assert "legion.db" in error and ("writ" in error or "read" in error), error
        one_line_error(legion(project, "issue", "move", "LEG-1", "Done"))
        one_line_error(legion(project, "issue", "comment", "LEG-2", "--body", "lost?"))
    assert integrity(db) == "ok"
    assert titles(project) == ["One", "Two"]
    shown = legion(project, "issue", "show", "LEG-1", "--json")
    assert '"status": "Todo"' in shown.stdout and '"comments": []' in shown.stdout
    # And it works again as soon as it can write.
    assert legion(project, "issue", "create", "Three").stdout.strip() == "LEG-3"


@pytest.mark.parametrize("leave", [0, 256 * 1024], ids=["full", "nearly-full"])
def test_a_full_disk_is_a_one_line_error_and_leaves_the_database_intact(
    project: Path, tmp_path: Path, leave: int
) -> None:
    if not ROOT:
        skip_here_fail_on_ci("making a small file system needs root (mount)")
    state = tmp_path / "small-state"
    state.mkdir()
    try:
        mount("-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(state))
    except subprocess.CalledProcessError as exc:
        skip_here_fail_on_ci(f"cannot mount a tmpfs here: {exc.stderr.strip()}")
    try:
        env = {"LEGION_STATE_DIR": str(state)}
        assert legion(project, "init", env=env).returncode == 0
        assert legion(project, "issue", "create", "Before", env=env).returncode == 0
        fill(state / "filler", leave)
        # Writes go on until SQLite needs a page it cannot get (the WAL reuses its own space).
        body = "x" * 60000
        written, error = [], None
        for n in range(40):
            result = legion(project, "issue", "create", f"Full {n}", "--body", body, env=env)
            if result.returncode != 0:
                error = one_line_error(result)
                break
            written.append(f"Full {n}")
        assert error is not None, "the disk never filled up"
        assert "legion.db" in error, error
        (state / "filler").unlink()
        assert integrity(state / "legion.db") == "ok"
        assert titles(project, env) == ["Before", *written]
        after = legion(project, "issue", "create", "After", env=env)
        assert after.returncode == 0 and after.stdout.strip() == f"LEG-{len(written) + 2}"
    finally:
        umount(state)


def test_fifty_concurrent_writers_get_fifty_distinct_identifiers(project: Path) -> None:
    env = dict(os.environ)
    procs = [
        subprocess.Popen(
            [str(LEGION_BIN), "issue", "create", f"Writer {n}"],
            cwd=project,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(50)
    ]
    results = [(proc.wait(120), *proc.communicate()) for proc in procs]
    assert [code for code, _, _ in results] == [0] * 50, [err for _, _, err in results if err]
    identifiers = [out.strip() for _, out, _ in results]
    assert sorted(identifiers, key=lambda i: int(i.split("-")[1])) == [
        f"LEG-{n}" for n in range(1, 51)
    ]
    # No lost update: every writer's issue is there, under the identifier it was told.
    import json

    listed = json.loads(legion(project, "issue", "list", "--json").stdout)
    assert {i["identifier"]: i["title"] for i in listed} == {
        identifier: f"Writer {n}" for n, identifier in enumerate(identifiers)
    }
    assert integrity(state_dir(project) / "legion.db") == "ok"
