"""Legion's state folder: private whatever the umask, and never silently started afresh."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from tests.support.cli import run_legion


def state_dir(project: Path) -> Path:
    config = json.loads(run_legion("config", "--json", cwd=project).stdout)
    return Path(config["settings"]["state_dir"]["value"])


def test_state_is_readable_by_its_owner_only_whatever_the_umask(project: Path) -> None:
    old = os.umask(0o022)
    try:
        for args in (("issue", "create", "One"), ("reconcile",), ("log",)):
            result = run_legion(*args, cwd=project)
            assert result.returncode == 0, result.stderr
    finally:
        os.umask(old)
    folder = state_dir(project)
    found = [folder, *folder.rglob("*")]
    assert any(path.name == "legion.db" for path in found)
    assert any(path.name == "reconcile.lock" for path in found)
    for path in found:
        mode = stat.S_IMODE(path.stat().st_mode)
        if path.is_dir():
            assert mode == 0o700, (path, oct(mode))
        else:
            assert mode == 0o600, (path, oct(mode))


def test_an_emptied_database_is_an_error_not_a_fresh_start(project: Path) -> None:
    for title in ("One", "Two"):
        assert run_legion("issue", "create", title, cwd=project).returncode == 0
    db = state_dir(project) / "legion.db"
    for suffix in ("", "-wal", "-shm"):
        candidate = db.with_name(db.name + suffix)
        if candidate.exists():
            candidate.write_bytes(b"")
    for args in (("issue", "list"), ("issue", "create", "Three"), ("state", "--json")):
        result = run_legion(*args, cwd=project)
        assert result.returncode == 1, (args, result.stdout)
        assert result.stderr.count("\n") == 1
        assert f"{db}: the project's database is empty" in result.stderr
    assert db.stat().st_size == 0  # nothing was written: LEG-1 is not handed out again


def test_a_missing_database_is_an_error_until_init_makes_a_new_one(project: Path) -> None:
    assert run_legion("issue", "create", "One", cwd=project).returncode == 0
    db = state_dir(project) / "legion.db"
    for suffix in ("", "-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    result = run_legion("issue", "list", cwd=project)
    assert result.returncode == 1
    assert f"{db}: the project's database is missing" in result.stderr
    assert not db.exists()
    # A shared config on a new machine: `legion init` is where its database begins.
    assert run_legion("init", cwd=project).returncode == 0
    assert run_legion("issue", "list", cwd=project).returncode == 0
