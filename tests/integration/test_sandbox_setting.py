"""The `sandbox` setting as a user meets it: `legion status` says loudly when workers would run
unconfined and why, `legion doctor` checks bubblewrap (required only with `sandbox = "bwrap"`),
and a required sandbox that cannot be had is one line, never a worker started unconfined."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from legion.errors import ConfigError
from legion.sandbox import empty_file, reported, resolve
from tests.integration.test_doctor import fake_claude, no_claude_path
from tests.support.cli import LegionRunner, run_legion
from tests.support.sandbox import require_sandbox


@pytest.fixture(autouse=True)
def _private_tmux(tmux_socket: Path) -> None:
    """`legion status` looks at tmux: a private server."""


def _status(legion: LegionRunner, env: dict[str, str]) -> tuple[str, dict[str, object]]:
    text = legion("status", env=env)
    data = legion("status", "--json", env=env)
    assert text.returncode == 0 and data.returncode == 0, text.stderr + data.stderr
    return text.stdout, json.loads(data.stdout)


def test_status_says_loudly_when_workers_run_unconfined(legion: LegionRunner) -> None:
    text, data = _status(legion, {"LEGION_SANDBOX": "none"})
    assert data["sandbox"] == {"confined": False, "why": "sandbox = none"}
    assert "sandbox:    NONE: sessions run unconfined (sandbox = none)" in text


def test_without_bubblewrap_status_says_why_and_how_to_get_it(
    legion: LegionRunner, tmp_path: Path
) -> None:
    _, data = _status(legion, {"PATH": no_claude_path(tmp_path)})  # git, tmux, npm: no bwrap
    assert data["sandbox"]["confined"] is False  # type: ignore[index]
    assert "apt install bubblewrap" in data["sandbox"]["why"]  # type: ignore[index]


def test_status_says_confined_where_bubblewrap_works(legion: LegionRunner) -> None:
    require_sandbox()
    text, data = _status(legion, {})
    assert data["sandbox"] == {"confined": True, "why": "bubblewrap"}
    assert "sandbox:    sessions confined by bubblewrap" in text


def test_a_required_sandbox_that_cannot_be_had_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"sandbox = bwrap, but bubblewrap is not installed"):
        resolve("bwrap", {"PATH": "/nonexistent"})
    assert resolve(None, {"PATH": "/nonexistent"}).confined is False
    assert resolve("none", {}).why == "sandbox = none"
    # What a report says of it (status, the board, the demo): no session starts, not "unconfined".
    said = reported("bwrap", {"PATH": "/nonexistent"})
    assert said.refused and said.summary.startswith("no session can start: sandbox = bwrap, but")


def test_doctor_checks_bubblewrap_and_requires_it_only_when_asked(tmp_path: Path) -> None:
    claude = fake_claude(tmp_path, "2.1.328")
    env = {"PATH": no_claude_path(tmp_path), "LEGION_CLAUDE_BIN": str(claude)}
    optional = run_legion("doctor", "--json", cwd=tmp_path, env=env)
    checks = {c["name"]: c for c in json.loads(optional.stdout)["checks"]}
    assert checks["bubblewrap"]["ok"] is False and checks["bubblewrap"]["required"] is False
    assert "sessions would run unconfined" in checks["bubblewrap"]["detail"]
    assert "apt install bubblewrap" in checks["bubblewrap"]["fix"]
    assert optional.returncode == 0, optional.stdout
    required = run_legion("doctor", cwd=tmp_path, env=env | {"LEGION_SANDBOX": "bwrap"})
    assert required.returncode == 1 and "bubblewrap" in required.stdout
    chosen = run_legion("doctor", "--json", cwd=tmp_path, env=env | {"LEGION_SANDBOX": "none"})
    checks = {c["name"]: c for c in json.loads(chosen.stdout)["checks"]}
    assert checks["bubblewrap"]["ok"] is True and "unconfined" in checks["bubblewrap"]["detail"]


def test_a_bad_sandbox_value_is_one_line(legion: LegionRunner) -> None:
    result = legion("status", env={"LEGION_SANDBOX": "docker"})
    assert result.returncode != 0
    assert "LEGION_SANDBOX must be one of bwrap, none" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_state_folder_inside_legion_stays_out_of_a_workers_sight(
    project: Path, tmp_path: Path
) -> None:
    """The demo keeps its state in `.legion/state`: a worker is shown the project's config
    file, not the folder around it, so neither the database nor the bus is in its sandbox;
    only its own session folder and the daemon's `run/` are."""
    from legion.backends import open_backends, open_workers
    from legion.config import load_project
    from legion.core.model import Mode
    from legion.daemon_link import run_folder

    state = project / ".legion" / "state"
    claude = fake_claude(tmp_path, "2.1.328")
    env = dict(os.environ) | {"LEGION_STATE_DIR": str(state), "LEGION_CLAUDE_BIN": str(claude)}
    loaded = load_project(project, env=env)
    assert loaded.state_dir == state
    backends = open_backends(loaded, create=True)
    workers = open_workers(loaded, backends, env)
    supervisor = workers.supervisor
    runtime = workers.runtimes.for_worker("LEG-1", Mode.IMPLEMENT)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    confinement = supervisor.confinement.for_session(
        "sid-1", workspace, runtime, env, proxied=True, relayed=True, worker=True
    )
    shown = [*confinement.access.writable, *confinement.access.readable]
    allowed = {supervisor.session_folder("sid-1"), run_folder(state), runtime.home("sid-1")}
    for path in shown:
        assert path in allowed or not (path == state or state.is_relative_to(path)), path
        assert path in allowed or not path.is_relative_to(state), path
    assert loaded.config_path in shown
    backends.db.close()


def test_the_empty_file_shown_for_secrets_is_the_owners_alone(tmp_path: Path) -> None:
    """A state file like any other (0600, whatever the umask); one an older Legion made 0444,
    or one written to, is made again."""
    old = os.umask(0o022)
    try:
        path = empty_file(tmp_path)
        assert (path.read_bytes(), stat.S_IMODE(path.stat().st_mode)) == (b"", 0o600)
        path.chmod(0o444)
        assert stat.S_IMODE(empty_file(tmp_path).stat().st_mode) == 0o600
        path.write_text("planted")
        assert empty_file(tmp_path).read_bytes() == b""
    finally:
        os.umask(old)
