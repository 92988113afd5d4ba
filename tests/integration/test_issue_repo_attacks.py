"""A worker attacks what the daemon does with its issue's own repository (issue 35), with real
git: everything here is written only where a confined worker can write (its workspace, its
issue repository's objects, refs and logs, its worktree's admin folder), and then the daemon's
own steps run on it. Each attack was found by playing the worker against this design."""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import time
from pathlib import Path

import pytest

from legion.errors import ConflictError
from legion.sandbox import find_bwrap, probe
from legion.workspaces import checkpoint, issue_repo
from legion.workspaces.git_worktree import GitWorktrees
from tests.support.cli import git

SECRET = "TOPSECRET-the-users-other-repository\n"

needs_bwrap = pytest.mark.skipif(
    (found := find_bwrap(dict(os.environ))) is None or probe(found) is not None,
    reason="bubblewrap cannot run here: Legion's git on a worker's files runs unconfined",
)


@pytest.fixture
def worktrees(git_repo: Path, tmp_path: Path) -> GitWorktrees:
    return GitWorktrees(git_repo, tmp_path / "ws", "main")


def commit(path: Path, name: str, text: str = "x\n") -> str:
    (path / name).write_text(text)
    git(path, "add", name)
    git(path, "commit", "-qm", name)
    return git(path, "rev-parse", "HEAD").strip()


def has(repo: Path, what: str) -> bool:
    done = subprocess.run(["git", "cat-file", "-e", what], cwd=repo, check=False)
    return done.returncode == 0


def private_repository(tmp_path: Path) -> Path:
    """Another of the user's repositories, which no worker can see."""
    private = tmp_path / "private"
    private.mkdir()
    git(private, "init", "-q", "-b", "main")
    (private / "secret.txt").write_text(SECRET)
    git(private, "add", "secret.txt")
    git(private, "commit", "-qm", "secret")
    return private


def test_a_log_link_planted_in_the_issue_repository_is_never_written_through(
    worktrees: GitWorktrees, git_repo: Path, tmp_path: Path
) -> None:
    """Git appends a ref's log through a link: the base's log linked to the project's config
    would corrupt it at the next session's start."""
    worktrees.ensure("LEG-1")
    repo = worktrees.repo_for("LEG-1")
    victim = git_repo / ".git" / "config"
    before = victim.read_bytes()
    log = repo / "logs" / "refs" / "heads" / "main"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    log.symlink_to(victim)
    elsewhere = tmp_path / "planted"
    (repo / "logs" / "refs" / "heads" / "legion").mkdir(parents=True, exist_ok=True)
    commit(git_repo, "moved.txt")  # the base moves: the next start sets it in the workspace

    worktrees.ensure("LEG-1")

    assert victim.read_bytes() == before and not elsewhere.exists()
    assert git(worktrees.path_for("LEG-1"), "rev-parse", "main") == git(
        git_repo, "rev-parse", "main"
    )


@needs_bwrap
def test_links_to_another_repository_bring_nothing_of_it_home(
    worktrees: GitWorktrees, git_repo: Path, tmp_path: Path
) -> None:
    """The worker's branch a link to another repository's ref, its object folders links to
    that repository's: the fetch that takes the branch home runs where those lead nowhere."""
    worktrees.ensure("LEG-1")
    repo = worktrees.repo_for("LEG-1")
    private = private_repository(tmp_path)
    theirs = git(private, "rev-parse", "HEAD").strip()
    ref = repo / "refs" / "heads" / "legion" / "leg-1"
    ref.unlink()
    ref.symlink_to(private / ".git" / "refs" / "heads" / "main")
    for folder in (private / ".git" / "objects").iterdir():
        mine = repo / "objects" / folder.name
        if len(folder.name) == 2 and not mine.exists():
            mine.symlink_to(folder)

    with pytest.raises(ConflictError, match="cannot take legion/leg-1"):
        issue_repo.bring_home(git_repo, "legion/leg-1")

    assert not has(git_repo, theirs)
    blob = git(private, "rev-parse", "HEAD:secret.txt").strip()
    assert not has(git_repo, blob)


@needs_bwrap
def test_a_pipe_planted_at_a_ref_holds_the_daemon_only_as_long_as_its_bound(
    worktrees: GitWorktrees, git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(issue_repo, "FETCH_TIMEOUT_S", 3.0)
    ws = worktrees.ensure("LEG-1")
    commit(ws.path, "a.txt")
    os.mkfifo(worktrees.repo_for("LEG-1") / "refs" / "heads" / "zz")
    began = time.monotonic()

    with pytest.raises(ConflictError, match="took over 3 s"):
        issue_repo.bring_home(git_repo, "legion/leg-1")

    assert time.monotonic() - began < 60


def _index(entries: list[tuple[str, int, str]]) -> bytes:
    """A git index (version 2) of `entries` (path, mode, object id), every stamp zero."""
    body = b"DIRC" + struct.pack(">II", 2, len(entries))
    for name, mode, oid in entries:
        path = name.encode()
        entry = struct.pack(">10I", 0, 0, 0, 0, 0, 0, mode, 0, 0, 0) + bytes.fromhex(oid)
        entry += struct.pack(">H", min(len(path), 0xFFF)) + path
        body += entry + b"\0" * (8 - len(entry) % 8)
    return body + hashlib.sha1(body).digest()


@needs_bwrap
def test_an_index_naming_a_file_outside_the_workspace_puts_none_of_it_in_a_checkpoint(
    worktrees: GitWorktrees, git_repo: Path, tmp_path: Path
) -> None:
    """The checkpoint starts from a copy of the worker's index: an entry `../../secret`, its
    stamps zero, would have git hash the file outside the workspace into your repository."""
    ws = worktrees.ensure("LEG-1")
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    place = worktrees.place_at(ws.path)
    relative = os.path.relpath(secret, ws.path)
    (place.git_dir / "index").write_bytes(_index([(relative, 0o100644, "0" * 40)]))

    saved = checkpoint.save(place, "LEG-1", home=worktrees.home_place(place))

    listing = git(git_repo, "ls-tree", "-r", saved.commit)
    found = subprocess.run(
        ["git", "hash-object", str(secret)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert not has(git_repo, found), listing


def test_a_submodules_own_filter_never_runs_when_the_workspace_is_checked(
    worktrees: GitWorktrees, tmp_path: Path
) -> None:
    """A repository of the worker's own inside its workspace, committed as a submodule, whose
    config names a clean filter: git's status looks into submodules, with their config."""
    ws = worktrees.ensure("LEG-1")
    fired = tmp_path / "fired"
    sub = ws.path / "sub"
    sub.mkdir()
    git(sub, "init", "-q", "-b", "main")
    git(sub, "config", "filter.evil.clean", f"sh -c 'touch {fired}; cat'")
    (sub / ".gitattributes").write_text("* filter=evil\n")
    (sub / "f").write_text("one\n")
    git(sub, "add", ".")
    git(sub, "-c", "user.name=w", "-c", "user.email=w@x", "commit", "-qm", "sub")
    fired.unlink(missing_ok=True)
    git(ws.path, "add", "sub")
    git(ws.path, "commit", "-qm", "a submodule")
    (sub / "f").write_text("changed\n")
    os.utime(sub / "f", (978307200, 978307200))

    worktrees.check("LEG-1")

    assert not fired.exists()


def test_an_index_linked_to_your_checkouts_is_not_rewritten_by_a_check(
    worktrees: GitWorktrees, git_repo: Path
) -> None:
    ws = worktrees.ensure("LEG-1")
    place = worktrees.place_at(ws.path)
    yours = git_repo / ".git" / "index"
    before = (yours.read_bytes(), yours.stat().st_ino)
    (place.git_dir / "index").unlink()
    (place.git_dir / "index").symlink_to(yours)
    (ws.path / "README.md").write_text("touched\n")

    worktrees.check("LEG-1")

    assert (yours.read_bytes(), yours.stat().st_ino) == before
