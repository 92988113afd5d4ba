"""Git commands Legion runs never run a program a worker wrote, and never hold Legion's secrets.

A worker's worktree shares the repository's git folder, so it can write hooks, `.git/config`
and `.git/info/attributes`. Here a worker does all of that, each trap recording its environment
to a file; then the real forge and workspace paths run (local forge merge, worktree add and
remove, GitHub forge push, merge and fetch against the fake and a local bare remote).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from legion.forges.github import GitHubForge
from legion.forges.local import LocalForge
from legion.git import git_env, run_git, safety_overrides
from legion.store.sqlite import SqliteStore
from legion.trackers.local import LocalTracker
from legion.workspaces.git_worktree import GitWorktrees
from tests.fakes.github_server import FakeGitHub
from tests.integration.test_github_forge import make_project
from tests.support.cli import git

HOOKS = (
    "pre-push",
    "pre-commit",
    "post-checkout",
    "post-merge",
    "reference-transaction",
    "pre-merge-commit",
    "pre-auto-gc",
    "post-rewrite",
)
SECRETS = {
    "LINEAR_API_KEY": "lin_secret_value",
    "GITHUB_TOKEN": "ghp_secret_value",
    "ANTHROPIC_API_KEY": "sk-ant-secret",
    "OPENAI_API_KEY": "sk-openai-secret",
}


def trap(folder: Path, name: str, record: Path) -> Path:
    """An executable that records that it ran, with its environment."""
    script = folder / name
    script.write_text(
        f'#!/bin/sh\n{{ echo "RAN {name} $*"; env; }} >> {record}\n'
        # Behave enough like the program it replaces that git goes on.
        + ("cat\n" if "filter" in name else "")
        + ('exec git-receive-pack "$@"\n' if "receive-pack" in name else "")
        + ('exec git-upload-pack "$@"\n' if "upload-pack" in name else "")
        + "exit 0\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def plant_traps(worktree: Path, record: Path, traps: Path) -> None:
    """What a hostile worker can write from its worktree: hooks and the shared config."""
    common = Path(git(worktree, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    traps.mkdir(exist_ok=True)
    (common / "hooks").mkdir(exist_ok=True)
    for hook in HOOKS:
        trap(common / "hooks", hook, record)
    (common / "info").mkdir(exist_ok=True)
    (common / "info" / "attributes").write_text("* filter=evil merge=evil\n", encoding="utf-8")
    settings = {
        "core.fsmonitor": trap(traps, "fsmonitor", record),
        "core.sshCommand": trap(traps, "ssh", record),
        "credential.helper": trap(traps, "credential", record),
        "filter.evil.clean": trap(traps, "filter-clean", record),
        "filter.evil.smudge": trap(traps, "filter-smudge", record),
        "merge.evil.driver": trap(traps, "merge-driver", record),
        "remote.origin.receivepack": trap(traps, "receive-pack", record),
        "remote.origin.uploadpack": trap(traps, "upload-pack", record),
        "gpg.program": trap(traps, "gpg", record),
    }
    for key, script in settings.items():
        git(worktree, "config", key, str(script))


def commit_in(worktree: Path, filename: str, text: str) -> None:
    """The worker commits (its own traps are not what this test is about)."""
    quiet = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")
    quiet += ("-c", "filter.evil.clean=", "-c", "gpg.program=gpg")
    (worktree / filename).write_text(text, encoding="utf-8")
    git(worktree, *quiet, "add", filename)
    git(worktree, *quiet, "commit", "--quiet", "-m", f"add {filename}")


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)


def test_the_traps_do_fire_for_a_plain_git(git_repo: Path, tmp_path: Path) -> None:
    """The test's own check: without Legion's overrides, git runs what the worker wrote."""
    record = tmp_path / "record.txt"
    plant_traps(git_repo, record, tmp_path / "traps")
    (git_repo / "x.txt").write_text("x\n", encoding="utf-8")
    git(git_repo, "add", "x.txt")
    git(git_repo, "commit", "--quiet", "-m", "x")
    ran = record.read_text(encoding="utf-8")
    assert "RAN pre-commit" in ran and "RAN filter-clean" in ran


def test_local_forge_and_worktrees_run_nothing_a_worker_wrote(
    git_repo: Path, tmp_path: Path, secrets: None
) -> None:
    record = tmp_path / "record.txt"
    db = SqliteStore(tmp_path / "state" / "legion.db")
    LocalTracker(db, issue_key="LEG").create_issue("Add a feature")
    LocalTracker(db, issue_key="LEG").create_issue("Another")
    forge = LocalForge(db, git_repo, merge_lock=tmp_path / "merge.lock", base_branch="main")
    worktrees = GitWorktrees(git_repo, tmp_path / "worktrees", "main")
    # The base moves meanwhile, so the PR's merge is a real three-way merge.
    (git_repo / "README.md").write_text("# test\n\nmore\n", encoding="utf-8")
    git(git_repo, "commit", "--quiet", "-am", "base moves")

    workspace = worktrees.ensure("LEG-1")
    plant_traps(workspace.path, record, tmp_path / "traps")
    commit_in(workspace.path, "feature.txt", "feature\n")
    worktrees.ensure("LEG-2")  # a checkout (smudge filter, post-checkout hook)
    forge.create_pr("LEG-1", workspace.branch)
    merged = forge.merge("LEG-1")  # merge-tree, commit-tree, merge --ff-only in the checkout
    worktrees.remove("LEG-2")

    assert merged.merge_commit
    assert (git_repo / "feature.txt").read_text(encoding="utf-8") == "feature\n"
    assert not record.exists(), record.read_text(encoding="utf-8")


def test_github_forge_push_merge_and_fetch_run_nothing_a_worker_wrote(
    git_repo: Path, tmp_path: Path, secrets: None
) -> None:
    record = tmp_path / "record.txt"
    remote = tmp_path / "remote.git"
    remote.mkdir()
    git(remote, "init", "--quiet", "--bare")
    git(git_repo, "remote", "add", "origin", str(remote))
    git(git_repo, "push", "--quiet", "origin", "main")
    worktrees = GitWorktrees(git_repo, tmp_path / "worktrees", "main")
    workspace = worktrees.ensure("ENG-1")
    plant_traps(workspace.path, record, tmp_path / "traps")
    commit_in(workspace.path, "feature.txt", "feature\n")
    with FakeGitHub(remote=remote).running() as fake:
        forge = GitHubForge(make_project(git_repo, fake), timeout=5.0, sleep=lambda _s: None)
        forge.create_pr("ENG-1", workspace.branch)  # the push
        commit_in(workspace.path, "fix.txt", "a review's fix\n")
        merged = forge.merge("ENG-1")  # pushes the fix, merges, fetches the base
    assert merged.merge_commit
    assert (
        git(remote, "rev-parse", f"refs/heads/{workspace.branch}").strip()
        == git(git_repo, "rev-parse", f"refs/heads/{workspace.branch}").strip()
    )
    assert not record.exists(), record.read_text(encoding="utf-8")


def test_git_gets_no_secret_but_keeps_the_users_own_settings(
    git_repo: Path, tmp_path: Path, secrets: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's global settings still apply (here: a receive-pack program in ~/.gitconfig,
    which runs on a push to a local path), and what they run sees no API key or token."""
    record = tmp_path / "record.txt"
    remote = tmp_path / "remote.git"
    remote.mkdir()
    git(remote, "init", "--quiet", "--bare")
    git(git_repo, "remote", "add", "origin", str(remote))
    users = trap(tmp_path, "users-receive-pack", record)
    git(git_repo, "config", "--global", "remote.origin.receivepack", str(users))

    run_git(git_repo, "push", "--quiet", "origin", "main")

    ran = record.read_text(encoding="utf-8")
    assert "RAN users-receive-pack" in ran
    assert f"HOME={os.environ['HOME']}" in ran and "PATH=" in ran
    for name, value in SECRETS.items():
        assert name not in ran and value not in ran
    assert not set(SECRETS) & set(git_env())


def test_a_repositorys_credential_helper_is_dropped_and_the_users_kept(
    git_repo: Path, tmp_path: Path
) -> None:
    git(git_repo, "config", "--global", "credential.helper", "store")
    git(git_repo, "config", "credential.helper", "!evil")
    args, _ = safety_overrides(git_repo, git_env())
    settings = args[1::2]
    assert settings[-2:] == ["credential.helper=", "credential.helper=store"]
    assert not any("evil" in setting for setting in settings)
