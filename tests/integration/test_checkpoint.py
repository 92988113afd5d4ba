"""A workspace's checkpoint (`legion.workspaces.checkpoint`) with real git: everything in the
workspace (committed, changed, staged, new, deleted; not what is ignored) and the session's
transcript go on the issue's Legion ref and nowhere else, travel through a bare remote, and
come back byte for byte in a new clone's new worktree of the branch, its changes uncommitted as
they were (issue 22: an issue outlives the host it ran on)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from legion.errors import ConflictError
from legion.git import worktree_place
from legion.workspaces import checkpoint
from legion.workspaces.git_worktree import GitWorktrees
from tests.support.cli import git

TRANSCRIPT = '{"type":"user","message":"héllo"}\n{"type":"assistant","message":"ok"}\n'


def repository(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "--initial-branch=main")
    (path / ".gitignore").write_text(".env\n")
    (path / "kept.txt").write_text("kept\n")
    (path / "gone.txt").write_text("to be deleted\n")
    (path / "changed.txt").write_text("before\n")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "initial")
    return path


def worktree(repo: Path, path: Path, branch: str, *, new: bool) -> Path:
    args = ["worktree", "add", "-q"] + (["-b", branch, str(path)] if new else [str(path), branch])
    git(repo, *args)
    return path


def state(workspace: Path) -> dict[str, str]:
    """What a worker would see: every file but git's own, and `git status`."""
    files = {
        str(p.relative_to(workspace)): p.read_text()
        for p in sorted(workspace.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(workspace).parts
    }
    return files | {"(status)": git(workspace, "status", "--porcelain=v1", "--untracked=all")}


def test_a_workspace_and_its_transcript_come_back_in_another_clone(tmp_path: Path) -> None:
    origin = repository(tmp_path / "origin")
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(origin), str(remote)], check=True)
    git(origin, "remote", "add", "shared", str(remote))
    work = worktree(origin, tmp_path / "ws" / "leg-1", "legion/leg-1", new=True)
    # The worker's workspace: a commit of its own, then every kind of change not committed.
    (work / "feature.py").write_text("def f():\n    return 1\n")
    git(work, "add", "feature.py")
    git(work, "commit", "-q", "-m", "LEG-1: feature")
    git(work, "push", "-q", "shared", "legion/leg-1")
    (work / "changed.txt").write_text("after\n")  # changed, not staged
    (work / "staged.txt").write_text("staged\n")
    git(work, "add", "staged.txt")  # staged, not committed
    (work / "notes" / "deep").mkdir(parents=True)
    (work / "notes" / "deep" / "new.md").write_text("new, untracked\n")
    (work / "gone.txt").unlink()  # deleted, not committed
    (work / ".env").write_text("SECRET=not-in-a-checkpoint\n")  # ignored: stays out
    transcript = tmp_path / "claude" / "session.jsonl"
    transcript.parent.mkdir()
    transcript.write_text(TRANSCRIPT, encoding="utf-8")
    before = state(work)
    head = git(work, "rev-parse", "HEAD").strip()
    staged = git(work, "diff", "--cached", "--name-only")

    # The implementer's session, and the planner's before it; a reviewer's not started yet.
    planner = tmp_path / "claude" / "planner.jsonl"
    planner.write_text('{"type":"user","message":"plan"}\n', encoding="utf-8")
    sessions = {"sid-impl": transcript, "sid-plan": planner, "sid-review": tmp_path / "none"}
    saved = checkpoint.save(place := worktree_place(origin, work), "leg-1", sessions, home=place)

    assert saved.ref == "refs/legion/checkpoints/LEG-1" and saved.base == head
    assert saved.sessions == ("sid-impl", "sid-plan")
    # Nothing the worker sees changed: its files, what is staged, its branch.
    assert state(work) == before
    assert git(work, "diff", "--cached", "--name-only") == staged == "staged.txt\n"
    assert git(work, "rev-parse", "HEAD").strip() == head
    assert git(origin, "rev-parse", "legion/leg-1").strip() == head
    # The ignored file is in no checkpoint.
    listed = git(origin, "ls-tree", "-r", "--name-only", saved.commit)
    assert ".env" not in listed and "workspace/notes/deep/new.md" in listed
    assert "workspace/gone.txt" not in listed and "sessions/sid-impl.jsonl" in listed
    checkpoint.push(origin, "shared", "LEG-1")

    # The host is gone; another clones the shared remote and makes the workspace anew.
    other = tmp_path / "other"
    subprocess.run(["git", "clone", "-q", str(remote), str(other)], check=True)
    git(other, "branch", "-q", "legion/leg-1", "origin/legion/leg-1")
    assert checkpoint.fetch(other, "origin", "LEG-1")
    assert not checkpoint.fetch(other, "origin", "LEG-2")  # none for another issue
    again = worktree(other, tmp_path / "ws2" / "leg-1", "legion/leg-1", new=False)
    restored_transcript = tmp_path / "claude2" / "projects" / "session.jsonl"
    restored_planner = tmp_path / "claude2" / "projects" / "planner.jsonl"
    where = {"sid-impl": restored_transcript, "sid-plan": restored_planner}

    found = checkpoint.restore(
        worktree_place(other, again), "LEG-1", where | {"sid-review": tmp_path / "no"}, home=other
    )

    assert found is not None and found.checkpoint.commit == saved.commit
    assert found.newer_branch is None
    after = state(again)
    # Every file as it was, but the ignored one.
    assert {k: v for k, v in after.items() if k != "(status)"} == {
        k: v for k, v in before.items() if k not in ("(status)", ".env")
    }
    # The same changes, uncommitted; staged or not is not kept: none is staged.
    assert sorted(line[3:] for line in after["(status)"].splitlines()) == [
        "changed.txt",
        "gone.txt",
        "notes/deep/new.md",
        "staged.txt",
    ]
    assert git(again, "rev-parse", "HEAD").strip() == head
    assert restored_transcript.read_bytes() == TRANSCRIPT.encode("utf-8")
    assert restored_planner.read_text() == '{"type":"user","message":"plan"}\n'
    assert not (tmp_path / "no").exists()  # a session the checkpoint does not hold
    assert checkpoint.restore(worktree_place(other, again), "LEG-2", home=other) is None


def test_a_checkpoint_replaces_the_last_and_restoring_sets_a_branch_behind_it_to_its_base(
    tmp_path: Path,
) -> None:
    origin = repository(tmp_path / "origin")
    work = worktree(origin, tmp_path / "ws" / "leg-3", "legion/leg-3", new=True)
    (work / "a.txt").write_text("one\n")
    place = worktree_place(origin, work)
    first = checkpoint.save(place, "LEG-3", home=place)  # no transcript yet
    assert first.sessions == ()
    (work / "a.txt").write_text("two\n")
    git(work, "add", "a.txt")
    git(work, "commit", "-q", "-m", "a commit before the checkpoint")
    (work / "a.txt").write_text("three\n")
    second = checkpoint.save(place, "LEG-3", home=place)
    assert second.commit != first.commit
    assert checkpoint.find(origin, "LEG-3") == second
    # A workspace whose branch is behind the checkpoint (made anew from an older branch):
    # restoring sets it to the checkpoint's base, the files as they were then.
    git(work, "reset", "-q", "--hard", "HEAD~1")
    (work / "b.txt").write_text("later\n")
    restored = checkpoint.restore(place, "LEG-3", home=place)
    assert restored is not None and restored.newer_branch is None
    assert git(work, "rev-parse", "HEAD").strip() == second.base
    assert (work / "a.txt").read_text() == "three\n"
    assert git(work, "status", "--porcelain=v1", "--untracked=all").splitlines() == [
        " M a.txt",
        "?? b.txt",
    ]


def test_a_branch_that_went_on_after_the_checkpoint_is_kept_and_only_the_sessions_laid(
    tmp_path: Path,
) -> None:
    """A soak's finding (docs/failure-model.md): a host that takes an issue over goes on from
    the newer of its checkpoint and its branch as sent to the shared remote, never back to the
    older."""
    origin = repository(tmp_path / "origin")
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(origin), str(remote)], check=True)
    git(origin, "remote", "add", "shared", str(remote))
    work = worktree(origin, tmp_path / "ws" / "leg-1", "legion/leg-1", new=True)
    place = worktree_place(origin, work)
    transcript = tmp_path / "claude" / "s.jsonl"
    transcript.parent.mkdir()
    transcript.write_text(TRANSCRIPT, encoding="utf-8")
    (work / "plan.md").write_text("the plan, not committed yet\n")
    saved = checkpoint.save(place, "LEG-1", {"sid": transcript}, home=place)
    checkpoint.push(origin, "shared", "LEG-1")
    assert checkpoint.send_branch(origin, "shared", "legion/leg-1") is None
    # After the checkpoint: the feature committed, its pull request made (which sends the
    # branch), and the host lost before its next checkpoint.
    (work / "feature.py").write_text("def f():\n    return 1\n")
    git(work, "add", "feature.py", "plan.md")
    git(work, "commit", "-q", "-m", "LEG-1: feature")
    assert checkpoint.send_branch(origin, "shared", "legion/leg-1") is None
    # Rewritten by its worker (an amend): the rewrite replaces what this host sent.
    git(work, "commit", "-q", "--amend", "-m", "LEG-1: the feature")
    feature = git(work, "rev-parse", "HEAD").strip()
    assert checkpoint.send_branch(origin, "shared", "legion/leg-1") is None
    assert git(remote, "rev-parse", "legion/leg-1").strip() == feature
    # Someone else's commit on the remote's branch is never overwritten by this host.
    other = tmp_path / "other"
    subprocess.run(["git", "clone", "-q", str(remote), str(other)], check=True)
    assert checkpoint.take_branch(other, "origin", "legion/leg-1") == feature
    assert checkpoint.fetch(other, "origin", "LEG-1")
    again = worktree(other, tmp_path / "ws2" / "leg-1", "legion/leg-1", new=False)
    where = tmp_path / "claude2" / "s.jsonl"

    restored = checkpoint.restore(worktree_place(other, again), "LEG-1", {"sid": where}, home=other)

    assert restored is not None and restored.checkpoint.commit == saved.commit
    assert restored.newer_branch == feature
    assert git(again, "rev-parse", "HEAD").strip() == feature
    assert (again / "feature.py").exists() and (again / "plan.md").exists()
    assert git(again, "status", "--porcelain=v1", "--untracked=all") == ""
    assert where.read_bytes() == TRANSCRIPT.encode("utf-8")  # the session goes on
    # A commit pushed to the remote's branch by someone else stays: this host, which last
    # sent `feature` there, is refused rather than overwrite it.
    git(again, "commit", "-q", "--allow-empty", "-m", "someone else's")
    git(again, "push", "-q", "origin", "legion/leg-1")
    git(work, "commit", "-q", "--amend", "-m", "LEG-1: feature, amended")
    refused = checkpoint.send_branch(origin, "shared", "legion/leg-1")
    assert refused is not None and "not sent" in refused
    assert git(remote, "log", "-1", "--format=%s", "legion/leg-1").strip() == "someone else's"


def test_a_workspace_removed_with_nothing_left_in_it_takes_its_checkpoint_along(
    tmp_path: Path,
) -> None:
    origin = repository(tmp_path / "origin")
    worktrees = GitWorktrees(origin, tmp_path / "ws", "main")
    work = worktrees.ensure("LEG-4").path
    (work / "a.txt").write_text("wip\n")
    place = worktrees.place_of("LEG-4")
    checkpoint.save(place, "LEG-4", home=worktrees.home_place(place))
    assert checkpoint.find(origin, "LEG-4") is not None
    with pytest.raises(ConflictError):
        worktrees.remove("LEG-4")  # kept: a file in it is in no commit
    assert work.is_dir() and checkpoint.find(origin, "LEG-4") is not None
    (work / "a.txt").unlink()
    worktrees.remove("LEG-4")  # nothing left to keep: removed, its checkpoint too
    assert not work.exists() and checkpoint.find(origin, "LEG-4") is None


SECRET = b"-----BEGIN OPENSSH PRIVATE KEY----- the user's\n"


def test_a_transcript_replaced_by_a_link_to_a_secret_puts_nothing_of_it_in_the_checkpoint(
    tmp_path: Path,
) -> None:
    """Issue 35: a worker replaces another session's transcript path (in the CLI's home, which
    it can write) with a link to `~/.ssh/id_ed25519`; the next checkpoint must not hash it into
    `refs/legion/checkpoints/<ISSUE>`, and a restore over a planted link writes through none."""
    origin = repository(tmp_path / "origin")
    work = worktree(origin, tmp_path / "ws" / "leg-1", "legion/leg-1", new=True)
    victim = tmp_path / "home" / ".ssh" / "id_ed25519"
    victim.parent.mkdir(parents=True)
    victim.write_bytes(SECRET)
    projects = tmp_path / "claude" / "projects" / "-ws-leg-1"
    projects.mkdir(parents=True)
    honest = projects / "sid-plan.jsonl"
    honest.write_text(TRANSCRIPT, encoding="utf-8")
    planted = projects / "sid-impl.jsonl"
    planted.symlink_to(victim)
    fifo = projects / "sid-review.jsonl"
    import os

    os.mkfifo(fifo)
    sessions = {"sid-impl": planted, "sid-plan": honest, "sid-review": fifo}

    saved = checkpoint.save(place := worktree_place(origin, work), "leg-1", sessions, home=place)

    assert saved.sessions == ("sid-plan",)
    assert [why.split(":")[0] for why in saved.refused] == ["sid-impl", "sid-review"]
    every_blob = git(origin, "rev-list", "--objects", saved.commit).split()
    for name in every_blob:
        if len(name) == 40:
            kind = git(origin, "cat-file", "-t", name).strip()
            if kind == "blob":
                assert SECRET not in git(origin, "cat-file", "blob", name).encode()

    # Restoring writes a new file over the planted link, never into its target.
    checkpoint.restore(worktree_place(origin, work), "LEG-1", {"sid-plan": planted}, home=origin)
    assert victim.read_bytes() == SECRET
    assert not planted.is_symlink() and planted.read_text() == TRANSCRIPT


def test_a_host_that_lost_the_issue_does_not_overwrite_the_new_hosts_checkpoint(
    tmp_path: Path,
) -> None:
    """Checkpoint pushes are compare-and-swap (issue 35): a host replaces the shared remote's
    checkpoint only if it is the one it last sent or took; one cut off while another host
    took the issue over and checkpointed gets a ConflictError, and the newer one stays."""
    origin = repository(tmp_path / "origin")
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(origin), str(remote)], check=True)
    git(origin, "remote", "add", "shared", str(remote))
    work = worktree(origin, tmp_path / "ws" / "leg-1", "legion/leg-1", new=True)
    git(work, "push", "-q", "shared", "legion/leg-1")
    (work / "a.txt").write_text("first\n")
    checkpoint.save(worktree_place(origin, work), "leg-1", {}, home=worktree_place(origin, work))
    checkpoint.push(origin, "shared", "LEG-1")
    (work / "a.txt").write_text("second\n")
    checkpoint.save(worktree_place(origin, work), "leg-1", {}, home=worktree_place(origin, work))
    checkpoint.push(origin, "shared", "LEG-1")  # its own last one: replaced

    # Another host takes the issue over, and checkpoints it there.
    other = tmp_path / "other"
    subprocess.run(["git", "clone", "-q", str(remote), str(other)], check=True)
    git(other, "branch", "-q", "legion/leg-1", "origin/legion/leg-1")
    assert checkpoint.fetch(other, "origin", "LEG-1")
    again = worktree(other, tmp_path / "ws2" / "leg-1", "legion/leg-1", new=False)
    checkpoint.restore(worktree_place(other, again), "LEG-1", home=other)
    (again / "a.txt").write_text("on the new host\n")
    newer = checkpoint.save(
        worktree_place(other, again), "leg-1", {}, home=worktree_place(other, again)
    )
    checkpoint.push(other, "origin", "LEG-1")

    # The first host, cut off meanwhile, checkpoints once more: refused, the newer one stays.
    (work / "a.txt").write_text("stale\n")
    checkpoint.save(worktree_place(origin, work), "leg-1", {}, home=worktree_place(origin, work))
    with pytest.raises(ConflictError, match="not the one this host last sent or took"):
        checkpoint.push(origin, "shared", "LEG-1")
    held = git(remote, "rev-parse", "refs/legion/checkpoints/LEG-1").strip()
    assert held == newer.commit


def test_a_rewritten_branch_is_newer_than_the_checkpoint_only_when_committed_after_it(
    tmp_path: Path,
) -> None:
    """A branch that went its own way since the checkpoint (an amend of the commit it was taken
    on) wins only when its last commit came after the checkpoint."""
    origin = repository(tmp_path / "origin")
    work = worktree(origin, tmp_path / "ws" / "leg-4", "legion/leg-4", new=True)
    git(work, "commit", "-q", "--allow-empty", "-m", "LEG-4: first")
    place = worktree_place(origin, work)
    saved = checkpoint.save(place, "LEG-4", home=place)

    def amended(when: str) -> str:
        env = {**os.environ, "GIT_COMMITTER_DATE": when}
        subprocess.run(
            ["git", "commit", "-q", "--amend", "--allow-empty", "-m", f"LEG-4: {when}"],
            cwd=work, env=env, check=True,
        )  # fmt: skip
        return git(work, "rev-parse", "HEAD").strip()

    assert not checkpoint.newer_branch(place, saved, saved.base)
    assert not checkpoint.newer_branch(place, saved, amended("2001-01-01T00:00:00Z"))
    assert checkpoint.newer_branch(place, saved, amended("2090-01-01T00:00:00Z"))
