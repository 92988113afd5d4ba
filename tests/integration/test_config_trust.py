"""A repository's config cannot widen what runs (issue 35, item 6), through the real `legion`:
a committed `.legion/config.toml` that chooses a program, its arguments, the sandbox, a folder
or a remote is refused in one line naming each such key, until the user runs `legion trust`,
which records that exact file; a worker's change landing on main undoes it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import LegionRunner, git, run_legion


def test_a_committed_config_that_widens_what_runs_waits_for_the_users_trust(
    legion: LegionRunner, project: Path
) -> None:
    config = project / ".legion" / "config.toml"
    before = config.read_text()
    # What a worker would land on main: the sandbox off, and a program of its choosing.
    config.write_text(before + 'sandbox = "none"\nclaude_bin = "/tmp/not-claude"\n')
    git(project, "add", ".legion/config.toml")
    git(project, "commit", "-qm", "Tidy the config")

    refused = legion("status")
    assert refused.returncode != 0 and refused.stdout == ""
    [line] = refused.stderr.strip().splitlines()
    assert "sets what only you choose (what Legion runs, or where): sandbox, claude_bin;" in line
    assert "legion trust" in line and "Traceback" not in refused.stderr

    trusted = legion("trust")
    assert trusted.returncode == 0, trusted.stderr
    assert 'sandbox = "none"' in trusted.stdout
    assert 'claude_bin = "/tmp/not-claude"' in trusted.stdout
    shown = json.loads(legion("config", "--json").stdout)["settings"]
    assert shown["sandbox"] == {"value": "none", "source": str(config)}

    # The next change, however small, needs the user again.
    config.write_text(config.read_text() + "wip_limit = 2\n")
    assert legion("config").returncode != 0
    as_json = legion("trust", "--json")
    assert as_json.returncode == 0, as_json.stderr
    record = json.loads(as_json.stdout)
    assert record["config"] == str(config) and len(record["sha256"]) == 64
    assert record["widens"] == {"sandbox": "none", "claude_bin": "/tmp/not-claude"}
    assert legion("config").returncode == 0


def test_trust_of_a_config_that_widens_nothing_says_so(legion: LegionRunner) -> None:
    said = legion("trust")
    assert said.returncode == 0, said.stderr
    assert "it sets nothing that chooses what runs" in said.stdout


def test_trust_of_a_broken_config_is_one_line_and_records_nothing(
    legion: LegionRunner, project: Path
) -> None:
    config = project / ".legion" / "config.toml"
    config.write_text(config.read_text() + 'sandbox = "sometimes"\n')
    refused = legion("trust")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "sandbox" in refused.stderr
    config.write_text(config.read_text().replace('"sometimes"', '"none"'))
    assert "legion trust" in legion("status").stderr  # nothing was trusted before


def test_a_session_sees_the_users_trust_read_only(
    legion: LegionRunner, project: Path, tmp_path: Path
) -> None:
    """A session's own `legion` loads the project's config too: the user's trust records are
    shown to it read-only (a session cannot trust a file itself)."""
    import os

    from legion.backends import open_backends, open_workers
    from legion.config import load_project
    from legion.config.paths import state_home
    from legion.core.model import Mode
    from legion.trust import records
    from tests.integration.test_doctor import fake_claude

    env = dict(os.environ) | {"LEGION_CLAUDE_BIN": str(fake_claude(tmp_path, "2.1.328"))}
    config = project / ".legion" / "config.toml"
    config.write_text(config.read_text() + 'workspace_vcs = "git"\n')
    assert legion("trust").returncode == 0
    loaded = load_project(project, env=env)
    backends = open_backends(loaded)
    workers = open_workers(loaded, backends, env)
    workspace = workers.workspaces.ensure("LEG-1").path
    runtime = workers.runtimes.for_worker("LEG-1", Mode.IMPLEMENT)
    confinement = workers.supervisor.confinement.for_session(
        "sid-1", workspace, runtime, env, proxied=True, relayed=True, worker=True
    )
    backends.db.close()
    shown = records(state_home(os.environ))
    assert shown in confinement.access.readable
    assert not any(shown.is_relative_to(path) for path in confinement.access.writable)


def test_config_set_writes_through_no_link_a_commit_planted(
    legion: LegionRunner, project: Path, isolated_env: Path
) -> None:
    """A worker lands `.legion/config.toml` as a link to your own config (or `.legion` as a
    link to its folder): your `legion config set` in the checkout would write a setting there
    that no `legion trust` guards. It is refused in one line, and writes nothing anywhere."""
    user = isolated_env / "config" / "legion" / "config.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text("tick = 30\n", encoding="utf-8")
    folder = project / ".legion"
    (folder / "config.toml").unlink()
    (folder / "config.toml").symlink_to(user)
    refused = legion("config", "set", "claude_bin", "/tmp/not-claude")
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1, refused.stderr
    assert "symbolic link" in refused.stderr
    assert user.read_text(encoding="utf-8") == "tick = 30\n"
    assert (folder / "config.toml").is_symlink()

    (folder / "config.toml").unlink()
    folder.rmdir()
    folder.symlink_to(user.parent)
    refused = legion("config", "set", "claude_bin", "/tmp/not-claude")
    assert refused.returncode != 0 and "symbolic link" in refused.stderr, refused.stderr
    assert user.read_text(encoding="utf-8") == "tick = 30\n"
    assert sorted(p.name for p in user.parent.iterdir()) == ["config.toml"]


def test_legion_init_writes_through_no_link_a_commit_planted(
    git_repo: Path, tmp_path: Path
) -> None:
    """A commit (a worker's, landed; a stranger's repository you cloned) leaves
    `.legion/config.toml.tmp` a link to a file of yours (`~/.ssh/authorized_keys`) and no
    config: your `legion init` there writes the new config as a new file, never through the
    link, and the file of yours is as it was."""
    yours = tmp_path / "authorized_keys"
    yours.write_text("ssh-ed25519 AAAA you@laptop\n", encoding="utf-8")
    folder = git_repo / ".legion"
    folder.mkdir()
    (folder / "config.toml.tmp").symlink_to(yours)
    git(git_repo, "add", ".legion")
    git(git_repo, "commit", "-qm", "Tidy")
    done = run_legion("init", cwd=git_repo)
    assert done.returncode == 0, done.stderr
    assert yours.read_text(encoding="utf-8") == "ssh-ed25519 AAAA you@laptop\n"
    config = folder / "config.toml"
    assert config.is_file() and not config.is_symlink()
    assert "project_id" in config.read_text(encoding="utf-8")
