"""A hostile workspace against its setup (`legion.workspaces.setup`), under real bubblewrap:
what one issue's setup commands (a planted `requirements.txt`, an npm script) can leave for
another issue's, and what they can make Legion's own runner do.

Needs bubblewrap; where the machine forbids the namespaces it needs, skipped, saying why."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from legion.backends import open_backends, open_workers
from legion.config import load_project
from legion.sessions.workers import WorkerManager
from legion.workspaces import setup
from legion.workspaces.setup import SetupPendingError
from tests.support.sandbox import require_sandbox


def _workers(project: Path, commands: Sequence[str]) -> WorkerManager:
    loaded = load_project(project, flags={"workspace_setup": list(commands)})
    return open_workers(loaded, open_backends(loaded))


def _set_up(workers: WorkerManager, issue: str, workspace: Path) -> setup.SetupState:
    with pytest.raises(SetupPendingError):
        workers.setup.gate(issue, workspace)
    files = workers.setup.files(issue)
    deadline = time.monotonic() + 30
    while (state := setup.current(files)).running is not None:
        assert time.monotonic() < deadline, files.output()
        time.sleep(0.05)
    return state


def test_one_issues_setup_cannot_poison_the_cache_another_issues_setup_installs_from(
    project: Path,
) -> None:
    """The commands of a workspace's setup run what its worker planted (a package's build
    script): what they write in the cache must not be what another issue's setup reads."""
    require_sandbox()
    cache = load_project(project).state_dir / "cache"
    workers = _workers(
        project,
        [
            # The hostile workspace's turn: plant in every cache it can find.
            'if [ -f hostile ]; then for d in "$PIP_CACHE_DIR" "$UV_CACHE_DIR" '
            f'"$npm_config_cache" "$XDG_CACHE_HOME" {cache}; do mkdir -p "$d" && '
            'echo poisoned > "$d/wheel.whl"; done; fi',
            # The other's: install from the cache.
            'cat "$PIP_CACHE_DIR/wheel.whl" "$UV_CACHE_DIR/wheel.whl" "$npm_config_cache/'
            f'wheel.whl" "$XDG_CACHE_HOME/wheel.whl" {cache}/wheel.whl 2>/dev/null; true',
        ],
    )
    hostile = workers.tracker.create_issue("Hostile").identifier
    hostile_workspace = workers.workspaces.ensure(hostile).path
    (hostile_workspace / "hostile").write_text("")
    assert _set_up(workers, hostile, hostile_workspace).status() == "ok"
    victim = workers.tracker.create_issue("Victim").identifier
    victim_workspace = workers.workspaces.ensure(victim).path
    state = _set_up(workers, victim, victim_workspace)
    assert state.status() == "ok", workers.setup.files(victim).output()
    assert "poisoned" not in workers.setup.files(victim).output().splitlines()


def test_the_runner_reads_only_the_end_of_a_log_its_commands_swelled(tmp_path: Path) -> None:
    """The commands write the log through the descriptor the runner hands them, and may make
    it as large as they like (sparse: `truncate` on their own stdout costs no disk). The
    runner, Legion's own process outside the sandbox, must still write its result, reading
    only the log's end (here it may take no more than 1 GiB of memory)."""
    import json
    import resource
    import subprocess
    import sys

    spec = {
        "run_id": "r",
        "kind": "setup",
        "hash": "h",
        "argvs": [["bash", "-c", "truncate -s 3G /proc/self/fd/1 && echo the end"]],
        "shown": ["swell"],
        "cwd": str(tmp_path),
        "env": {"PATH": os.environ["PATH"]},
        "timeout": 30,
        "log": str(tmp_path / "output.log"),
        "result": str(tmp_path / "result.json"),
        "wake": None,
    }
    (tmp_path / "run.json").write_text(json.dumps(spec))

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    ran = subprocess.run(
        [sys.executable, "-m", "legion.workspaces.setup", str(tmp_path / "run.json")],
        check=False,
        preexec_fn=limited,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["ok"] and result["tail"][-1].endswith("the end")
