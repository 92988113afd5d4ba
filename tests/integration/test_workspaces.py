"""Per-issue workspaces on real git worktrees; the jj adapter against a recording stand-in."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from legion.backends import open_workspaces
from legion.config import load_project
from legion.core.model import Status
from legion.errors import ConflictError
from legion.store.sqlite import SqliteStore
from legion.trackers.local import LocalTracker
from legion.workspaces import issue_repo
from legion.workspaces.git_worktree import GitWorktrees
from legion.workspaces.jj import JjWorkspaces
from legion.workspaces.sweep import sweep_done
from tests.support.cli import git, run_legion


@pytest.fixture
def worktrees(git_repo: Path, tmp_path: Path) -> GitWorktrees:
    return GitWorktrees(git_repo, tmp_path / "work spaces", "main")


def commit(path: Path, name: str) -> None:
    (path / name).write_text(name)
    git(path, "add", name)
    git(path, "commit", "-qm", name)


def test_ensure_is_idempotent_and_isolated(worktrees: GitWorktrees, git_repo: Path) -> None:
    one = worktrees.ensure("leg-1")
    assert one.path == worktrees.root / "leg-1" and one.branch == "legion/leg-1"
    assert git(one.path, "branch", "--show-current").strip() == "legion/leg-1"
    assert worktrees.ensure("LEG-1") == one
    two = worktrees.ensure("LEG-2")
    commit(one.path, "a.txt")
    assert not (two.path / "a.txt").exists() and not (git_repo / "a.txt").exists()
    assert [w.issue for w in worktrees.list()] == ["LEG-1", "LEG-2"]


def test_a_deleted_folder_is_recreated_on_its_branch(worktrees: GitWorktrees) -> None:
    first = worktrees.ensure("LEG-1")
    commit(first.path, "kept.txt")
    import shutil

    shutil.rmtree(first.path)
    again = worktrees.ensure("LEG-1")
    assert (again.path / "kept.txt").exists()  # the branch, and the work on it, survived


def test_never_removes_work(worktrees: GitWorktrees, git_repo: Path, tmp_path: Path) -> None:
    ws = worktrees.ensure("LEG-1")
    (ws.path / "draft.txt").write_text("unsaved")
    check = worktrees.check("LEG-1")
    assert check.dirty and not check.unmerged and "uncommitted" in check.detail
    with pytest.raises(ConflictError, match="kept workspace"):
        worktrees.remove("LEG-1")
    git(ws.path, "add", "draft.txt")
    git(ws.path, "commit", "-qm", "draft")
    check = worktrees.check("LEG-1")
    assert not check.dirty and check.unmerged
    with pytest.raises(ConflictError, match="neither merged"):
        worktrees.remove("LEG-1")
    # pushed counts as safe: the work lives on the remote (pushed from your clone, where the
    # check brought the worker's commits home)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(git_repo, "remote", "add", "origin", str(remote))
    git(git_repo, "push", "-q", "origin", ws.branch)
    assert worktrees.check("LEG-1").safe_to_remove
    worktrees.remove("LEG-1")
    assert not ws.path.exists()
    assert worktrees.list() == []


def test_sweep_only_touches_done_issues(
    worktrees: GitWorktrees, git_repo: Path, tmp_path: Path
) -> None:
    tracker = LocalTracker(SqliteStore(tmp_path / "db" / "legion.db"), issue_key="LEG")
    for title in ("merged", "dirty", "open", "live"):
        tracker.create_issue(title)
    for n in (1, 2, 3, 4):
        worktrees.ensure(f"LEG-{n}")
    commit(worktrees.path_for("LEG-1"), "done.txt")
    issue_repo.bring_home(git_repo, "legion/leg-1")  # as the forge does before it merges
    git(git_repo, "merge", "-q", "--no-ff", "-m", "merge", "legion/leg-1")
    (worktrees.path_for("LEG-2") / "wip.txt").write_text("wip")
    for n in (1, 2, 4):
        tracker.set_status(f"LEG-{n}", Status.DONE)
    results = {r.issue: r for r in sweep_done(tracker, worktrees, {"LEG-4"})}
    assert results["LEG-1"].removed and not worktrees.path_for("LEG-1").exists()
    assert not results["LEG-2"].removed and "uncommitted" in results["LEG-2"].reason
    assert "LEG-3" not in results and worktrees.path_for("LEG-3").exists()
    assert not results["LEG-4"].removed and "worker is still running" in results["LEG-4"].reason
    assert (worktrees.path_for("LEG-2") / "wip.txt").read_text() == "wip"


def test_refuses_to_adopt_a_foreign_folder(worktrees: GitWorktrees) -> None:
    folder = worktrees.path_for("LEG-1")
    folder.mkdir(parents=True)
    (folder / "mine.txt").write_text("not yours")
    with pytest.raises(ConflictError, match="is not a worktree"):
        worktrees.ensure("LEG-1")


# jj cannot be installed on this project's machines (no registry here ships it), so the jj
# adapter is exercised against a stand-in that records each call and keeps a workspace list.
FAKE_JJ = """#!{python}
import json, os, sys
state = os.environ["FAKE_JJ_STATE"]
empty = {{"calls": [], "workspaces": ["default"]}}
data = json.load(open(state)) if os.path.exists(state) else empty
args = sys.argv[1:]
data["calls"].append(args)
if args[1:3] == ["workspace", "add"]:
    data["workspaces"].append(args[args.index("--name") + 1])
    os.makedirs(args[-1], exist_ok=True)
elif args[1:3] == ["workspace", "forget"]:
    data["workspaces"].remove(args[3])
elif args[1:3] == ["workspace", "list"]:
    print("\\n".join(f"{{name}}: abc123 (no description set)" for name in data["workspaces"]))
elif args[1] == "diff":
    print(os.environ.get("FAKE_JJ_DIFF", ""), end="")
json.dump(data, open(state, "w"))
"""


def test_jj_adapter_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in = tmp_path / "jj"
    stand_in.write_text(FAKE_JJ.format(python=sys.executable))
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IEXEC)
    state = tmp_path / "jj-state.json"
    monkeypatch.setenv("FAKE_JJ_STATE", str(state))
    repo = tmp_path / "repo"
    repo.mkdir()
    jj = JjWorkspaces(repo, tmp_path / "ws", "main", binary=str(stand_in))
    ws = jj.ensure("LEG-3")
    assert ws.path == tmp_path / "ws" / "leg-3" and ws.kind == "jj"
    assert jj.ensure("leg-3") == ws  # already there: no second add
    assert [w.issue for w in jj.list()] == ["LEG-3"]
    monkeypatch.setenv("FAKE_JJ_DIFF", "M file.txt\n")
    with pytest.raises(ConflictError, match="uncommitted"):
        jj.remove("LEG-3")
    monkeypatch.setenv("FAKE_JJ_DIFF", "")
    jj.remove("LEG-3")
    assert not ws.path.exists()
    calls = json.loads(state.read_text())["calls"]
    assert [
        "--no-pager",
        "workspace",
        "add",
        "--name",
        "leg-3",
        "-r",
        "main",
        str(ws.path),
    ] in calls
    assert ["--no-pager", "workspace", "forget", "leg-3"] in calls
    assert any(
        c[1] == "log" and "::leg-3@ ~ ::main ~ ::remote_bookmarks() ~ empty()" in c for c in calls
    )
    assert os.environ["FAKE_JJ_STATE"] == str(state)


def _done_workspace_with_ignored_files(project: Path) -> Path:
    """A Done issue whose workspace holds git-ignored files: one that exists nowhere else
    (`.env`, `notes.local`) and build output (`__pycache__`, `node_modules`)."""
    from tests.support.cli import run_legion

    (project / ".gitignore").write_text(".env\n*.local\n__pycache__/\nnode_modules/\n")
    git(project, "add", ".gitignore")
    git(project, "commit", "-qm", "ignore")
    assert run_legion("issue", "create", "Secrets", "--status", "Done", cwd=project).returncode == 0
    workspace = GitWorktrees(project, project.parent / f"{project.name}-workspaces", "main")
    path = workspace.ensure("LEG-1").path
    (path / ".env").write_text("API_KEY=only-copy\n")
    (path / "notes.local").write_text("my notes\n")
    (path / "__pycache__").mkdir()
    (path / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"\0")
    (path / "node_modules" / "x").mkdir(parents=True)
    return path


def test_cleanup_never_deletes_an_ignored_file_that_exists_nowhere_else(project: Path) -> None:
    from tests.support.cli import run_legion

    path = _done_workspace_with_ignored_files(project)
    listed = json.loads(run_legion("workspace", "list", "--json", cwd=project).stdout)
    assert "2 ignored file(s) that exist nowhere else (.env, notes.local)" in listed[0]["detail"]
    result = run_legion("workspace", "clean", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)
    assert row["outcome"] == "kept" and ".env" in row["reason"]
    assert (path / ".env").read_text() == "API_KEY=only-copy\n"
    assert (path / "notes.local").exists()
    status = run_legion("status", "--json", cwd=project)
    kept = json.loads(status.stdout)["kept_workspaces"]
    assert [row["issue"] for row in kept] == ["LEG-1"] and ".env" in kept[0]["reason"]
    assert "kept workspaces of Done issues" in run_legion("status", cwd=project).stdout


def test_rescue_moves_them_out_then_removes_the_workspace(project: Path) -> None:
    from tests.support.cli import run_legion

    path = _done_workspace_with_ignored_files(project)
    dry = run_legion("workspace", "clean", "--rescue", "--dry-run", cwd=project)
    assert "LEG-1: would move 2 ignored file(s)" in dry.stdout and (path / ".env").exists()
    result = run_legion("workspace", "clean", "--rescue", cwd=project)
    assert result.returncode == 0, result.stderr
    assert not path.exists()
    moved = result.stdout.split("to ", 1)[1].split(";", 1)[0]
    rescued = Path(moved)
    assert (rescued / ".env").read_text() == "API_KEY=only-copy\n"
    assert (rescued / "notes.local").read_text() == "my notes\n"
    assert not (rescued / "__pycache__").exists()  # build output is not rescued


def test_only_build_output_ignored_means_the_workspace_may_go(project: Path) -> None:
    from tests.support.cli import run_legion

    path = _done_workspace_with_ignored_files(project)
    (path / ".env").unlink()
    # The user declares *.local regenerable too.
    config = project / ".legion" / "config.toml"
    config.write_text(
        config.read_text() + 'regenerable = ["__pycache__", "node_modules", "*.local"]\n'
    )
    result = run_legion("workspace", "clean", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "LEG-1: removed" in result.stdout and not path.exists()


def test_git_status_parsing_keeps_renames_apart() -> None:
    from legion.workspaces.git_worktree import parse_status

    listing = "R  new.txt\0old.txt\0 M a.txt\0!! .env\0!! build/\0?? b.txt\0"
    assert parse_status(listing) == (["new.txt", "a.txt", "b.txt"], [".env", "build/"])


def test_auto_uses_git_worktrees_in_a_colocated_jj_repository(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`workspace_vcs = auto` never picks the jj adapter, which has not run against a real jj:
    in a colocated repository (`.jj` and `.git`) with jj installed, workers get git worktrees."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "jj"
    stand_in.write_text(FAKE_JJ.format(python=sys.executable))
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IEXEC)
    state = tmp_path / "jj-state.json"
    monkeypatch.setenv("FAKE_JJ_STATE", str(state))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    (git_repo / ".jj").mkdir()
    assert run_legion("init", cwd=git_repo).returncode == 0

    project = load_project(git_repo)
    workspace = open_workspaces(project).ensure("LEG-1")

    assert workspace.kind == "git" and workspace.branch == "legion/leg-1"
    assert git(workspace.path, "branch", "--show-current").strip() == "legion/leg-1"
    assert not state.exists()  # jj never ran


def test_a_jj_repository_git_cannot_see_is_refused_in_one_line(git_repo: Path) -> None:
    jj_only = git_repo.parent / "jj-only"
    (jj_only / ".jj" / "repo").mkdir(parents=True)
    init = run_legion("init", cwd=jj_only)
    assert init.returncode == 2 and init.stderr.count("\n") == 1, init.stderr
    assert "jj repository without git" in init.stderr and "--colocate" in init.stderr
    assert not (jj_only / ".legion").exists()

    # A project that was colocated, and is not any more: dispatch refuses the same way.
    (git_repo / ".jj").mkdir()
    assert run_legion("init", cwd=git_repo).returncode == 0
    assert run_legion("issue", "create", "Something", cwd=git_repo).returncode == 0
    shutil.rmtree(git_repo / ".git")
    dispatch = run_legion("dispatch", "LEG-1", "plan", cwd=git_repo)
    assert dispatch.returncode == 2 and "jj repository without git" in dispatch.stderr
    assert "Traceback" not in dispatch.stderr


def has_ref(repo: Path, ref: str) -> bool:
    """Whether `ref` (a name, or an object's hash) is there."""
    import subprocess

    found = subprocess.run(["git", "cat-file", "-e", ref], cwd=repo, check=False)
    return found.returncode == 0


def test_a_worker_writes_its_issues_own_repository_and_its_branch_comes_home_by_a_fetch(
    worktrees: GitWorktrees, git_repo: Path
) -> None:
    """Issue 35: a workspace is a worktree of its issue's repository. What the worker commits,
    and any ref it writes there (another issue's branch, the base), stays there; the project's
    repository takes only the issue's branch, by a fetch, when Legion reads it."""
    ws = worktrees.ensure("LEG-1")
    own = worktrees.repo_for("LEG-1")
    assert own.is_relative_to(git_repo / ".git") and (own / "worktrees" / "leg-1").is_dir()
    base = git(git_repo, "rev-parse", "main").strip()
    commit(ws.path, "work.txt")
    head = git(ws.path, "rev-parse", "HEAD").strip()
    git(ws.path, "update-ref", "refs/heads/legion/leg-2", "HEAD")  # another issue's branch
    git(ws.path, "update-ref", "refs/heads/main", "HEAD")  # the base
    assert not has_ref(git_repo, "legion/leg-1") and not has_ref(git_repo, head)

    issue_repo.bring_home(git_repo, ws.branch)

    assert git(git_repo, "rev-parse", "legion/leg-1").strip() == head
    assert git(git_repo, "rev-parse", "main").strip() == base
    assert not has_ref(git_repo, "legion/leg-2")
    # A session's start sets the base in the issue's repository back to the project's.
    worktrees.ensure("LEG-1")
    assert git(ws.path, "rev-parse", "main").strip() == base


def test_an_object_the_worker_replaced_is_never_taken(
    worktrees: GitWorktrees, git_repo: Path
) -> None:
    """Git does not check an object's hash when it reads it; a fetch does. A worker that
    swaps its commit's file for other bytes under the same name gets its branch refused, and
    the project's repository holds nothing of it."""
    import zlib

    ws = worktrees.ensure("LEG-1")
    commit(ws.path, "work.txt")
    blob = git(ws.path, "rev-parse", "HEAD:work.txt").strip()
    loose = worktrees.repo_for("LEG-1") / "objects" / blob[:2] / blob[2:]
    loose.chmod(0o644)
    loose.write_bytes(zlib.compress(b"blob 6\0evil!\n"))

    with pytest.raises(ConflictError, match="cannot take legion/leg-1"):
        issue_repo.bring_home(git_repo, ws.branch)

    assert not has_ref(git_repo, "legion/leg-1") and not has_ref(git_repo, blob)


def test_a_workspace_an_older_legion_made_is_moved_into_its_issues_repository(
    worktrees: GitWorktrees, git_repo: Path
) -> None:
    """A worktree of the project's repository, as Legion made them before issue 35, becomes one
    of its issue's own at its next session's start: its branch, files and index kept."""
    path = worktrees.path_for("LEG-1")
    path.parent.mkdir(parents=True, exist_ok=True)
    git(git_repo, "worktree", "add", "-q", "-b", "legion/leg-1", str(path), "main")
    commit(path, "old.txt")
    (path / "staged.txt").write_text("staged\n")
    git(path, "add", "staged.txt")
    head = git(path, "rev-parse", "HEAD").strip()
    assert [w.issue for w in worktrees.list()] == ["LEG-1"]

    moved = worktrees.ensure("LEG-1")

    place = worktrees.place_at(moved.path)
    assert place.common_dir == worktrees.repo_for("LEG-1")
    assert git(moved.path, "rev-parse", "HEAD").strip() == head
    assert git(moved.path, "status", "--porcelain").splitlines() == ["A  staged.txt"]
    assert "leg-1" not in git(git_repo, "worktree", "list")
    commit(moved.path, "new.txt")
    issue_repo.bring_home(git_repo, moved.branch)
    assert git(git_repo, "log", "-1", "--format=%s", "legion/leg-1").strip() == "new.txt"


def test_a_checkpoint_is_kept_in_the_projects_repository_staged_work_and_all(
    worktrees: GitWorktrees, git_repo: Path
) -> None:
    """A checkpoint is written where no worker writes: the project's repository, its base
    fetched there; a file staged but not committed (whose object only the worker's repository
    has) is in it all the same."""
    from legion.workspaces import checkpoint

    ws = worktrees.ensure("LEG-1")
    commit(ws.path, "done.txt")
    (ws.path / "staged.txt").write_text("staged\n")
    git(ws.path, "add", "staged.txt")
    place = worktrees.place_at(ws.path)

    saved = checkpoint.save(place, "LEG-1", home=worktrees.home_place(place))

    assert checkpoint.find(git_repo, "LEG-1") == saved
    loose = place.common_dir / "objects" / saved.commit[:2] / saved.commit[2:]
    assert not loose.exists()  # not in the worker's repository's own objects
    listing = git(git_repo, "ls-tree", "-r", "--name-only", saved.commit).split()
    assert {"workspace/done.txt", "workspace/staged.txt"} <= set(listing)


def test_a_check_says_both_what_is_uncommitted_and_what_is_unmerged(
    worktrees: GitWorktrees,
) -> None:
    ws = worktrees.ensure("LEG-1")
    commit(ws.path, "done.txt")
    (ws.path / "draft.txt").write_text("unsaved")
    check = worktrees.check("LEG-1")
    assert check.dirty and check.unmerged
    assert "uncommitted" in check.detail and "neither merged" in check.detail


def test_a_branch_brought_home_by_several_at_once_comes_home(
    worktrees: GitWorktrees, git_repo: Path
) -> None:
    """The relay (before a `worker-done`), the checkpoint step and the forge bring the same
    branch home at once; git refuses the fetch whose ref moved under it (`cannot lock ref`),
    which once left a worker's `worker-done` refused in a fleet. Each is taken all the same."""
    import threading

    ws = worktrees.ensure("LEG-1")
    refused: list[Exception] = []

    def bring_home() -> None:
        for _ in range(4):
            try:
                issue_repo.bring_home(git_repo, ws.branch)
            except ConflictError as exc:
                refused.append(exc)

    for n in range(4):
        commit(ws.path, f"step-{n}.txt")
        takers = [threading.Thread(target=bring_home) for _ in range(3)]
        for taker in takers:
            taker.start()
        for taker in takers:
            taker.join()
        assert not refused, refused[0]
        assert git(git_repo, "rev-parse", ws.branch) == git(ws.path, "rev-parse", "HEAD")
