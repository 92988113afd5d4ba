"""A hostile worker points its workspace's `.git` elsewhere, and the daemon does not follow
(issue 35, "the daemon runs git only where Legion put it"). With real git: a `.git` repointed
at a repository of the worker's own whose `core.worktree` is a victim folder (a fake home with
a key in it), or replaced by a link to one, is found tampered: the next checkpoint is refused
and said in the action log, holds no byte of the key anywhere, and the victim folder is as it
was; the sweep keeps such a workspace and says why; the embedded forge will not move the base
through it; and the next session's sandbox binds the project's git folder, never the one the
worker named."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from legion.core.model import Mode
from legion.daemon.checkpoint_step import WorkspaceCheckpoints
from legion.runtime.transcript import TranscriptSummary, Turn
from legion.sessions.registry import WorkerRecord
from legion.store.actionlog import ActionLog
from legion.store.sqlite import SqliteStore
from legion.workspaces.git_worktree import GitWorktrees
from legion.workspaces.issue_repo import bring_home
from legion.workspaces.sweep import sweep_done
from tests.support.cli import git
from tests.support.sandbox import require_sandbox

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY----- the-victims-key\n"


def project(tmp_path: Path) -> tuple[GitWorktrees, Path]:
    """The user's repository with one commit, and LEG-1's workspace of it, as Legion makes it."""
    repo = tmp_path / "proj"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", "README.md")
    git(repo, "-c", "user.name=U", "-c", "user.email=u@u", "commit", "-q", "-m", "initial")
    worktrees = GitWorktrees(repo, tmp_path / "proj-workspaces", "main")
    return worktrees, worktrees.ensure("LEG-1").path


def project_workers(project: Path, tmp_path: Path) -> tuple[dict[str, str], Any, Any, Any]:
    """The project's loaded config, backends and workers, on a fake Claude Code CLI."""
    from legion.backends import open_backends, open_workers
    from legion.config import load_project
    from tests.integration.test_doctor import fake_claude

    claude = fake_claude(tmp_path, "2.1.328")
    env = dict(os.environ) | {"LEGION_CLAUDE_BIN": str(claude)}
    loaded = load_project(project, env=env)
    backends = open_backends(loaded, create=True)
    return env, loaded, backends, open_workers(loaded, backends, env)


def has_ref(repo: Path, ref: str) -> bool:
    found = subprocess.run(["git", "rev-parse", "--verify", "-q", ref], cwd=repo, check=False)
    return found.returncode == 0


def victim_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_bytes(SECRET)
    (home / ".bashrc").write_text("export PATH\n")
    return home


def own_repository(workspace: Path, victim: Path, objects_from: Path | None = None) -> Path:
    """What a hostile worker makes in its workspace: a repository of its own, one commit in
    it, whose work tree (`core.worktree`) is `victim`; borrowing `objects_from`'s objects."""
    mine = workspace / ".mine"
    git(workspace, "init", "-q", "-b", "main", "--separate-git-dir", str(mine), str(victim))
    (victim / ".git").unlink()  # the link `init` left in the victim: the worker cannot write there
    mine_git = ["--git-dir", str(mine)]
    git(workspace, *mine_git, "config", "core.worktree", str(victim))
    identity = ["-c", "user.name=W", "-c", "user.email=w@w"]
    git(workspace, *mine_git, *identity, "commit", "-q", "--allow-empty", "-m", "mine")
    if objects_from is not None:
        (mine / "objects" / "info" / "alternates").write_text(f"{objects_from}/objects\n")
    return mine


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def objects_hold_secret(git_dir: Path) -> bool:
    """Whether any object of the repository at `git_dir` holds the key."""
    objects = subprocess.run(
        ["git", "--git-dir", str(git_dir), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    ).stdout
    return SECRET.strip() in objects


def holds_secret(git_dir: Path) -> bool:
    """Whether any object of the repository at `git_dir` holds the key, or any ref is a
    checkpoint."""
    refs = subprocess.run(
        ["git", "--git-dir", str(git_dir), "for-each-ref", "refs/legion/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return objects_hold_secret(git_dir) or bool(refs.strip())


def checkpoint_step(
    tmp_path: Path, worktrees: GitWorktrees, workspace: Path
) -> tuple[WorkspaceCheckpoints, ActionLog]:
    """The daemon's checkpoint step over LEG-1's worker, whose turn has just ended."""
    record = WorkerRecord(
        1, "LEG-1", Mode.IMPLEMENT, "sid", "leg-1-implement", workspace, "t", host="build-1"
    )
    transcript = tmp_path / "session.jsonl"
    transcript.write_text('{"type":"user"}\n')
    runtime = SimpleNamespace(
        transcript=lambda workspace, sid: transcript,
        summarize=lambda path: TranscriptSummary(1, Turn.ENDED, None),
    )
    workers = SimpleNamespace(
        registry=SimpleNamespace(current=lambda: [record]),
        runtimes=SimpleNamespace(of=lambda record: runtime),
        env={},
        host="build-1",
        workspaces=worktrees,
        issue_transcripts=lambda issue, workspace: {"sid": transcript},
    )
    log = ActionLog(SqliteStore(tmp_path / "legion.db"))
    return WorkspaceCheckpoints(workers, log, every=0.0), log  # type: ignore[arg-type]


def test_a_checkpoint_of_a_workspace_repointed_at_the_workers_own_repository_is_refused(
    tmp_path: Path,
) -> None:
    worktrees, workspace = project(tmp_path)
    home = victim_home(tmp_path)
    mine = own_repository(workspace, home)
    (workspace / ".git").write_text(f"gitdir: {mine}\n")
    before = files_of(home)
    step, log = checkpoint_step(tmp_path, worktrees, workspace)

    step.run()

    assert files_of(home) == before
    assert not holds_secret(worktrees.repo / ".git") and not holds_secret(mine)
    [entry] = log.tail(10)
    assert (entry.issue, entry.action, entry.outcome.value) == ("LEG-1", "checkpoint", "failed")
    assert "was tampered with (its .git points at" in entry.detail
    assert str(mine) in entry.detail and "\n" not in entry.detail


def test_a_checkpoint_of_a_workspace_whose_git_is_a_link_is_refused(tmp_path: Path) -> None:
    worktrees, workspace = project(tmp_path)
    home = victim_home(tmp_path)
    mine = own_repository(workspace, home)
    (workspace / ".git").unlink()
    (workspace / ".git").symlink_to(mine)
    before = files_of(home)
    step, log = checkpoint_step(tmp_path, worktrees, workspace)

    step.run()

    assert files_of(home) == before
    assert not holds_secret(worktrees.repo / ".git") and not holds_secret(mine)
    [entry] = log.tail(10)
    assert entry.outcome.value == "failed"
    assert "its .git is a symbolic link, not the file Legion wrote" in entry.detail


def test_a_workspace_whose_admin_folder_names_another_is_refused(tmp_path: Path) -> None:
    """The other end of the link is in the git folder a worker writes too: both ends must
    agree."""
    worktrees, workspace = project(tmp_path)
    admin = worktrees.place_at(workspace).git_dir
    (admin / "gitdir").write_text(f"{tmp_path / 'home' / '.git'}\n")
    step, log = checkpoint_step(tmp_path, worktrees, workspace)

    step.run()

    assert not holds_secret(worktrees.repo / ".git")
    [entry] = log.tail(10)
    assert f"its git folder {admin} names {tmp_path / 'home' / '.git'}" in entry.detail


def test_a_work_tree_named_in_the_workspaces_own_git_config_is_not_followed(
    tmp_path: Path,
) -> None:
    """The git folder is the worker's to write too: `extensions.worktreeConfig` in the
    project's config and `core.worktree` in its admin folder's `config.worktree`, which git
    honours for the worktree it finds by itself. The link is intact, so the checkpoint is
    taken: of the workspace, never of the folder the config names."""
    worktrees, workspace = project(tmp_path)
    repo_git = worktrees.repo / ".git"
    home = victim_home(tmp_path)
    (workspace / "work.txt").write_text("the worker's own\n")
    place = worktrees.place_at(workspace)
    # (Its issue repository's config is read-only inside the sandbox: unconfined, it is not.)
    git(
        workspace, "--git-dir", str(place.common_dir), "config", "extensions.worktreeConfig", "true"
    )
    admin = place.git_dir
    (admin / "config.worktree").write_text(f"[core]\n\tworktree = {home}\n")
    before = files_of(home)
    step, log = checkpoint_step(tmp_path, worktrees, workspace)

    step.run()

    assert log.tail(10) == []
    assert files_of(home) == before
    assert not objects_hold_secret(repo_git) and not objects_hold_secret(place.common_dir)
    listing = ["ls-tree", "-r", "--name-only", "refs/legion/checkpoints/LEG-1"]
    found = git(worktrees.repo, *listing).split()
    assert "workspace/work.txt" in found and "workspace/.ssh/id_ed25519" not in found


def test_the_embedded_forge_fast_forwards_the_users_checkout_not_the_work_tree_its_config_names(
    git_repo: Path, tmp_path: Path
) -> None:
    """`core.worktree` in the project's git config (a worker writes it) makes any folder the
    user's checkout's work tree for git that finds its repository by itself: the merge's
    fast-forward of the checked-out base goes to the checkout Legion knows."""
    from legion.forges.local import LocalForge
    from legion.trackers.local import LocalTracker

    db = SqliteStore(tmp_path / "state" / "legion.db")
    LocalTracker(db, issue_key="LEG").create_issue("Add a feature")
    forge = LocalForge(db, git_repo, merge_lock=tmp_path / "merge.lock", base_branch="main")
    worktrees = GitWorktrees(git_repo, tmp_path / "worktrees", "main")
    feature = worktrees.ensure("LEG-1").path
    (feature / "evil.sh").write_text("echo pwned\n")
    git(feature, "add", "evil.sh")
    git(feature, "commit", "-q", "-m", "LEG-1: feature")
    forge.create_pr("LEG-1", "legion/leg-1")
    home = victim_home(tmp_path)
    git(git_repo, "config", "core.worktree", str(home))
    before = files_of(home)

    forge.merge("LEG-1")

    assert files_of(home) == before
    assert (git_repo / "evil.sh").read_text() == "echo pwned\n"


def test_a_workspace_whose_admin_folder_names_another_repository_is_refused(
    tmp_path: Path,
) -> None:
    """The admin folder's `commondir` says where git finds the refs (`GIT_COMMON_DIR` does
    not change that): named at the worker's own repository, whose work tree is the victim."""
    worktrees, workspace = project(tmp_path)
    home = victim_home(tmp_path)
    mine = own_repository(workspace, home)
    git(workspace, "--git-dir", str(mine), "update-ref", "refs/heads/legion/leg-1", "HEAD")
    admin = worktrees.place_at(workspace).git_dir
    (admin / "commondir").write_text(f"{mine}\n")
    before = files_of(home)
    step, log = checkpoint_step(tmp_path, worktrees, workspace)

    step.run()

    assert files_of(home) == before
    assert not holds_secret(worktrees.repo / ".git") and not holds_secret(mine)
    [entry] = log.tail(10)
    assert f"its git folder {admin} names {mine} as the repository's" in entry.detail


def test_the_sweep_keeps_a_tampered_workspace_and_says_why(tmp_path: Path) -> None:
    worktrees, workspace = project(tmp_path)
    home = victim_home(tmp_path)
    mine = own_repository(workspace, home)
    (workspace / ".git").write_text(f"gitdir: {mine}\n")
    before = files_of(home)
    tracker = SimpleNamespace(list_issues=lambda status: [SimpleNamespace(identifier="LEG-1")])

    [result] = sweep_done(tracker, worktrees, set())  # type: ignore[arg-type]

    assert not result.removed and workspace.is_dir()
    assert "was tampered with (its .git points at" in result.reason
    assert files_of(home) == before
    assert worktrees.check("LEG-1").tampered


def test_the_embedded_forge_does_not_move_the_base_through_a_tampered_workspace(
    git_repo: Path, tmp_path: Path
) -> None:
    """A worker checks the base out in its workspace (its admin folder's HEAD, in the git
    folder it writes) and points its `.git` at a repository of its own, at the base, whose
    work tree is the victim and whose objects are the project's: the merge's fast-forward of
    the checked-out base would write the merged files into the victim. Its workspace is a
    worktree of its issue's own repository, so the base is checked out nowhere the project's
    repository knows: the base moves by its ref, and nothing is written anywhere else."""
    from legion.forges.local import LocalForge
    from legion.trackers.local import LocalTracker

    db = SqliteStore(tmp_path / "state" / "legion.db")
    for title in ("Add a feature", "Another"):
        LocalTracker(db, issue_key="LEG").create_issue(title)
    forge = LocalForge(db, git_repo, merge_lock=tmp_path / "merge.lock", base_branch="main")
    worktrees = GitWorktrees(git_repo, tmp_path / "worktrees", "main")
    feature = worktrees.ensure("LEG-1").path
    (feature / "evil.sh").write_text("echo pwned\n")
    git(feature, "add", "evil.sh")
    git(feature, "commit", "-q", "-m", "LEG-1: feature")
    forge.create_pr("LEG-1", "legion/leg-1")
    git(git_repo, "checkout", "-q", "-b", "elsewhere")  # the user's checkout on a branch of its own
    # The hostile worker, LEG-2's.
    workspace = worktrees.ensure("LEG-2").path
    home = victim_home(tmp_path)
    mine = own_repository(workspace, home, objects_from=worktrees.repo / ".git")
    main = git(git_repo, "rev-parse", "main").strip()
    git(workspace, "--git-dir", str(mine), "update-ref", "refs/heads/main", main)
    git(workspace, "--git-dir", str(mine), "--work-tree", str(home), "read-tree", "main")
    (worktrees.place_at(workspace).git_dir / "HEAD").write_text("ref: refs/heads/main\n")
    (workspace / ".git").write_text(f"gitdir: {mine}\n")
    before = files_of(home)

    merged = forge.merge("LEG-1")

    assert git(git_repo, "rev-parse", "main").strip() == merged.merge_commit
    assert files_of(home) == before


def test_the_next_session_binds_the_projects_git_folder_not_the_one_the_worker_named(
    project: Path, tmp_path: Path
) -> None:
    """The git folder a session may write comes from the project's checkout: a worker that
    named another of the user's repositories in its `.git` does not get it bound, and cannot
    write it from inside its next sandbox."""
    from legion.backends import open_backends, open_workers
    from legion.config import load_project
    from legion.sandbox import wrap
    from tests.integration.test_doctor import fake_claude

    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    claude = fake_claude(tmp_path, "2.1.328")
    env = dict(os.environ) | {"LEGION_CLAUDE_BIN": str(claude)}
    loaded = load_project(project, env=env)
    backends = open_backends(loaded, create=True)
    workers = open_workers(loaded, backends, env)
    workspace = workers.workspaces.ensure("LEG-1").path
    (workspace / ".git").write_text(f"gitdir: {other / '.git'}\n")
    runtime = workers.runtimes.for_worker("LEG-1", Mode.IMPLEMENT)

    confinement = workers.supervisor.confinement.for_session(
        "sid-1", workspace, runtime, env, proxied=True, relayed=True, worker=True
    )

    writable = confinement.access.writable
    assert (project / ".git").resolve() in confinement.access.readable
    issue_repo = workers.workspaces.repo_for("LEG-1")  # type: ignore[attr-defined]
    assert issue_repo / "objects" in writable and issue_repo / "objects" / "info" in (
        confinement.access.readable
    )
    assert (project / ".git" / "objects").resolve() not in writable
    shown = [*writable, *confinement.access.readable]
    assert not any(other == path or other.is_relative_to(path) for path in shown), shown
    backends.db.close()
    # Where bubblewrap cannot confine, the binds above are what it would be given: skipped
    # from here (failed on CI).
    sandbox = require_sandbox(env)
    planted = other / ".git" / "hooks" / "post-checkout"
    argv = wrap(sandbox, confinement, ["sh", "-c", f"echo x > {planted}"])
    done = subprocess.run(argv, cwd=workspace, capture_output=True, text=True, check=False)
    assert done.returncode != 0 and not planted.exists(), done.stderr


def test_a_session_in_a_tampered_workspace_is_not_put_on_the_channel_its_git_names(
    project: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The daemon puts a session on its branch's channel of the bus, reading the branch at the
    git folders Legion made: a `.git` naming a repository of the worker's own (on `main`, the
    controller's channel) is said in one line, and the session is on no channel."""
    from legion.backends import open_backends, open_workers
    from legion.config import load_project
    from tests.integration.test_doctor import fake_claude

    claude = fake_claude(tmp_path, "2.1.328")
    env = dict(os.environ) | {"LEGION_CLAUDE_BIN": str(claude)}
    loaded = load_project(project, env=env)
    backends = open_backends(loaded, create=True)
    workers = open_workers(loaded, backends, env)
    workspace = workers.workspaces.ensure("LEG-1").path
    mine = own_repository(workspace, victim_home(tmp_path))
    (workspace / ".git").write_text(f"gitdir: {mine}\n")

    agent = workers.supervisor._register_on_bus("sid-1", "implement", workspace, "claude-code")

    backends.db.close()
    assert agent is None
    said = [r.getMessage() for r in caplog.records if r.name.startswith("legion.")]
    assert len(said) == 1 and "was tampered with (its .git points at" in said[0]


def test_a_worker_commits_on_its_branch_and_writes_nothing_else_of_the_git_folder(
    project: Path, tmp_path: Path
) -> None:
    """Issue 35: the repository's git folder is the user's too: a worker writes its objects,
    its worktree's admin folder and the `legion/` branches, and only reads the rest (hooks
    the user's own git would run, config, `main`, the index of the user's checkout). Run in
    the real sandbox, with the binds a worker's session gets."""
    from legion.sandbox import wrap

    sandbox = require_sandbox()
    env, _, backends, workers = project_workers(project, tmp_path)
    workspace = workers.workspaces.ensure("LEG-1").path
    runtime = workers.runtimes.for_worker("LEG-1", Mode.IMPLEMENT)
    confinement = workers.supervisor.confinement.for_session(
        "sid-1", workspace, runtime, env, proxied=True, relayed=True, worker=True
    )
    backends.db.close()
    git_folder = (project / ".git").resolve()
    before = {name: (git_folder / name).read_bytes() for name in ("config", "index", "HEAD")} | {
        "main": git(project, "rev-parse", "main").encode()
    }

    def confined(script: str) -> subprocess.CompletedProcess[str]:
        argv = wrap(sandbox, confinement, ["sh", "-c", script])
        return subprocess.run(argv, cwd=workspace, capture_output=True, text=True, check=False)

    work = confined(
        "echo work > work.txt && git add work.txt && git -c user.name=w -c user.email=w@x "
        "commit -qm work && git rev-parse HEAD"
    )
    assert work.returncode == 0, work.stderr
    own = workers.workspaces.repo_for("LEG-1")  # type: ignore[attr-defined]
    assert not has_ref(project, "legion/leg-1")  # its commit is in its own repository
    bring_home(project, "legion/leg-1")  # as Legion does before it reads the branch
    assert git(project, "rev-parse", "legion/leg-1").strip() == work.stdout.strip()
    a_blob = git(project, "rev-parse", "main:README.md").strip()
    its_bytes = git(project, "cat-file", "blob", a_blob)
    for attack in (
        f"echo 'touch /tmp/owned' > {git_folder}/hooks/post-checkout",
        f"git config --file {git_folder}/config core.hooksPath /tmp",
        "git config core.hooksPath /tmp",  # its own repository's config: Legion's too
        f"echo /tmp > {own}/objects/info/alternates",
        f"git --git-dir={git_folder} update-ref refs/heads/main HEAD",
        f"git --git-dir={git_folder} update-ref refs/heads/legion/leg-2 HEAD",
        f"git --git-dir={git_folder} --work-tree={project} update-index --add README.md",
        f"echo x > {git_folder}/refs/heads/main",
        f"cp work.txt {git_folder}/objects/{a_blob[:2]}/{a_blob[2:]}",
        f"touch {own}/packed-refs",
    ):
        done = confined(attack)
        assert done.returncode != 0, (attack, done.stdout, done.stderr)
    after = {name: (git_folder / name).read_bytes() for name in ("config", "index", "HEAD")} | {
        "main": git(project, "rev-parse", "main").encode()
    }
    assert after == before
    assert git(project, "cat-file", "blob", a_blob) == its_bytes
    assert not has_ref(project, "legion/leg-2")
    assert not (git_folder / "hooks" / "post-checkout").exists()


def test_a_jj_workspace_is_not_started_confined(project: Path, tmp_path: Path) -> None:
    """A jj workspace's worker would write the project's objects and every `legion/` branch
    (jj keeps one store): confined, it is refused in one line, with what to do instead."""
    import dataclasses

    from legion.errors import ConfigError

    env, loaded, backends, workers = project_workers(project, tmp_path)
    workspace = workers.workspaces.ensure("LEG-1").path
    runtime = workers.runtimes.for_worker("LEG-1", Mode.IMPLEMENT)
    supervisor = workers.supervisor
    jj = dataclasses.replace(loaded.settings, workspace_vcs="jj")
    supervisor.project = dataclasses.replace(loaded, settings=jj)

    with pytest.raises(ConfigError, match='use `workspace_vcs = "git"`'):
        supervisor.confinement.for_session(
            "sid-1", workspace, runtime, env, proxied=True, relayed=True, worker=True
        )
    backends.db.close()
