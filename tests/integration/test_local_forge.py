"""The embedded forge: PR records in SQLite, merges with real git."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from legion.core.model import ReviewOutcome
from legion.errors import ConflictError, InputError, NotFoundError
from legion.forges.base import PrState
from legion.forges.local import LocalForge
from legion.store import Store
from legion.trackers.local import LocalTracker
from tests.support.cli import git


@pytest.fixture
def backends(
    git_repo: Path, tmp_path: Path, open_store: Callable[[], Store]
) -> tuple[LocalTracker, LocalForge]:
    db = open_store()
    tracker = LocalTracker(db, issue_key="LEG")
    tracker.create_issue("Add a feature")
    return tracker, LocalForge(db, git_repo, merge_lock=tmp_path / "merge.lock", base_branch="main")


def commit_on_branch(
    repo: Path, branch: str, filename: str, text: str, *, new: bool = True
) -> None:
    git(repo, "switch", "--quiet", *(["-c"] if new else []), branch)
    (repo / filename).write_text(text, encoding="utf-8")
    git(repo, "add", filename)
    git(repo, "commit", "--quiet", "-m", f"change {filename}")
    git(repo, "switch", "--quiet", "main")


def test_review_outcome_follows_the_latest_verdict(
    git_repo: Path, backends: tuple[LocalTracker, LocalForge]
) -> None:
    _, forge = backends
    commit_on_branch(git_repo, "legion/leg-1", "feature.txt", "feature\n")
    pr = forge.create_pr("leg-1", "legion/leg-1", draft=True)
    assert (pr.number, pr.issue, pr.base, pr.is_draft) == (1, "LEG-1", "main", True)
    assert pr.title == "LEG-1: Add a feature"
    assert pr.review is ReviewOutcome.NONE
    assert (
        forge.add_review("1", "changes_requested", body="tests?", author="r").review
        is ReviewOutcome.CHANGES_REQUESTED
    )
    assert (
        forge.add_review("#1", "commented", body="fyi", author="r").review
        is ReviewOutcome.CHANGES_REQUESTED
    )
    assert (
        forge.add_review("LEG-1", "approved", body="", author="r").review is ReviewOutcome.APPROVED
    )
    assert forge.set_draft("LEG-1", False).is_draft is False
    assert forge.prs_by_issue(["LEG-1"])["LEG-1"].number == 1


def test_merge_is_a_real_git_merge(
    git_repo: Path, backends: tuple[LocalTracker, LocalForge]
) -> None:
    _, forge = backends
    commit_on_branch(git_repo, "legion/leg-1", "feature.txt", "feature\n")
    (git_repo / "notes.txt").write_text("uncommitted, untouched by the merge\n", encoding="utf-8")
    forge.create_pr("LEG-1", "legion/leg-1")
    merged = forge.merge("1")
    assert merged.state is PrState.MERGED and merged.merge_commit
    assert (git_repo / "feature.txt").read_text() == "feature\n"  # the checked-out main moved
    assert (git_repo / "notes.txt").exists()
    parents = git(git_repo, "rev-list", "--parents", "-n", "1", "main").split()
    assert parents[0] == merged.merge_commit and len(parents) == 3
    assert git(git_repo, "status", "--porcelain").strip() == "?? notes.txt"
    assert forge.merge("1").merge_commit == merged.merge_commit  # idempotent


def test_merge_when_base_is_not_checked_out(
    git_repo: Path, backends: tuple[LocalTracker, LocalForge]
) -> None:
    _, forge = backends
    commit_on_branch(git_repo, "legion/leg-1", "feature.txt", "feature\n")
    git(git_repo, "switch", "--quiet", "--detach")
    merged = forge.create_pr("LEG-1", "legion/leg-1") and forge.merge("LEG-1")
    assert git(git_repo, "rev-parse", "main").strip() == merged.merge_commit


def test_conflicts_are_reported_not_forced(
    git_repo: Path, backends: tuple[LocalTracker, LocalForge]
) -> None:
    _, forge = backends
    commit_on_branch(git_repo, "legion/leg-1", "README.md", "branch version\n")
    (git_repo / "README.md").write_text("main version\n", encoding="utf-8")
    git(git_repo, "commit", "--quiet", "-am", "main moves on")
    before = git(git_repo, "rev-parse", "main")
    forge.create_pr("LEG-1", "legion/leg-1")
    with pytest.raises(ConflictError, match=r"conflicts in README\.md"):
        forge.merge("1")
    assert git(git_repo, "rev-parse", "main") == before
    assert (git_repo / "README.md").read_text() == "main version\n"
    assert forge.get_pr("1").state is PrState.OPEN


def test_local_changes_in_the_way_are_never_overwritten(
    git_repo: Path, backends: tuple[LocalTracker, LocalForge]
) -> None:
    _, forge = backends
    commit_on_branch(git_repo, "legion/leg-1", "README.md", "branch version\n")
    (git_repo / "README.md").write_text("my unsaved work\n", encoding="utf-8")
    forge.create_pr("LEG-1", "legion/leg-1")
    with pytest.raises(ConflictError, match="commit or stash your local changes"):
        forge.merge("1")
    assert (git_repo / "README.md").read_text() == "my unsaved work\n"
    assert forge.get_pr("1").state is PrState.OPEN


def test_drafts_do_not_merge(git_repo: Path, backends: tuple[LocalTracker, LocalForge]) -> None:
    _, forge = backends
    commit_on_branch(git_repo, "legion/leg-1", "f.txt", "x\n")
    forge.create_pr("LEG-1", "legion/leg-1", draft=True)
    with pytest.raises(ConflictError, match="draft"):
        forge.merge("1")


def test_bad_requests(git_repo: Path, backends: tuple[LocalTracker, LocalForge]) -> None:
    _, forge = backends
    with pytest.raises(NotFoundError, match="no branch 'nope'"):
        forge.create_pr("LEG-1", "nope")
    with pytest.raises(InputError, match="invalid branch name"):
        forge.create_pr("LEG-1", "--upload-pack=evil")
    with pytest.raises(InputError, match="must differ from the base"):
        forge.create_pr("LEG-1", "main")
    commit_on_branch(git_repo, "legion/leg-1", "f.txt", "x\n")
    with pytest.raises(NotFoundError, match="no issue LEG-7"):
        forge.create_pr("LEG-7", "legion/leg-1")
    forge.create_pr("LEG-1", "legion/leg-1")
    with pytest.raises(ConflictError, match="already has open PR #1"):
        forge.create_pr("LEG-1", "legion/leg-1")
    with pytest.raises(NotFoundError, match="no pull request #9"):
        forge.get_pr("9")
    with pytest.raises(InputError, match="needs --body"):
        forge.add_review("1", "changes_requested", body=" ", author="r")
    assert forge.get_pr("1").reviews == ()


def test_concurrent_merges_of_different_prs_both_land(project: Path) -> None:
    """Two finishers merging at once: one waits for the other, and both land."""
    import subprocess

    from tests.support.cli import LEGION_BIN, run_legion

    for n in (1, 2, 3):
        assert run_legion("issue", "create", f"Feature {n}", cwd=project).returncode == 0
        commit_on_branch(project, f"legion/leg-{n}", f"f{n}.txt", f"{n}\n")
        assert run_legion("pr", "create", "--issue", f"LEG-{n}", "--branch", f"legion/leg-{n}",
                          cwd=project).returncode == 0  # fmt: skip
    merges = [
        subprocess.Popen([str(LEGION_BIN), "pr", "merge", f"LEG-{n}"], cwd=project,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n in (1, 2, 3)
    ]  # fmt: skip
    for proc in merges:
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    for n in (1, 2, 3):
        assert (project / f"f{n}.txt").read_text() == f"{n}\n"


def two_hosts(tmp_path: Path, db: Store, *titles: str) -> tuple[Path, LocalForge, LocalForge]:
    """A fleet's shared remote (a bare repository with one commit on main), the issues
    `titles` in the one store, and the forge of each of two hosts, alpha and beta, on a clone
    of that remote of its own."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "--quiet", "--bare", "-b", "main", str(remote))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "--quiet", str(remote), str(seed))
    (seed / "README.md").write_text("# app\n", encoding="utf-8")
    git(seed, "add", "README.md")
    git(seed, "commit", "--quiet", "-m", "initial")
    git(seed, "push", "--quiet", "origin", "main")
    tracker = LocalTracker(db, issue_key="LEG")
    for title in titles:
        tracker.create_issue(title)
    forges = []
    for name in ("alpha", "beta"):
        clone = tmp_path / name
        git(tmp_path, "clone", "--quiet", str(remote), str(clone))
        lock = tmp_path / f"{name}.lock"
        forges.append(
            LocalForge(db, clone, merge_lock=lock, base_branch="main", shared_remote="origin")
        )
    return remote, forges[0], forges[1]


def test_in_a_fleet_merges_go_through_the_shared_remote(
    tmp_path: Path, open_store: Callable[[], Store]
) -> None:
    """Two hosts' clones share the records (one store) and a bare remote: each merge starts from
    the remote's base and lands there first, so the host that merges next (a new leader) has
    every merge the other made; a base that moved on the remote meanwhile is caught up, and one
    that went another way here is refused, merging nothing."""
    remote, alpha, beta = two_hosts(tmp_path, open_store(), "One", "Two", "Three")
    commit_on_branch(alpha.repo, "legion/leg-1", "one.txt", "one\n")
    alpha.create_pr("LEG-1", "legion/leg-1")
    first = alpha.merge("LEG-1")
    assert git(remote, "rev-parse", "main").strip() == first.merge_commit
    # Beta leads next: its clone never saw alpha's merge, and its merge keeps it.
    commit_on_branch(beta.repo, "legion/leg-2", "two.txt", "two\n")
    beta.create_pr("LEG-2", "legion/leg-2")
    second = beta.merge("LEG-2")
    assert git(remote, "rev-parse", "main").strip() == second.merge_commit
    assert git(beta.repo, "show", "main:one.txt") == "one\n"
    assert (beta.repo / "one.txt").read_text() == "one\n"  # the checked-out main moved too
    # A base that went its own way here: refused, nothing merged, the remote untouched.
    commit_on_branch(alpha.repo, "legion/leg-3", "three.txt", "three\n")
    (alpha.repo / "local.txt").write_text("a commit only here\n", encoding="utf-8")
    git(alpha.repo, "add", "local.txt")
    git(alpha.repo, "commit", "--quiet", "-m", "local only")
    alpha.create_pr("LEG-3", "legion/leg-3")
    with pytest.raises(ConflictError, match="went different ways"):
        alpha.merge("LEG-3")
    assert alpha.get_pr("LEG-3").state is PrState.OPEN
    assert git(remote, "rev-parse", "main").strip() == second.merge_commit


def test_a_pr_whose_branch_went_back_is_neither_approved_nor_merged(
    git_repo: Path, backends: tuple[LocalTracker, LocalForge]
) -> None:
    """A soak's finding (docs/failure-model.md): a branch that lost commits it had (reset to an
    older one, as a host that took an issue over from a stale checkpoint did) is not merged: an
    empty PR would land without the feature. A rewritten branch or a new commit is fine."""
    _, forge = backends
    commit_on_branch(git_repo, "legion/leg-1", "feature.txt", "feature\n")
    before = git(git_repo, "rev-parse", "legion/leg-1").strip()
    forge.create_pr("LEG-1", "legion/leg-1")
    git(git_repo, "branch", "--quiet", "--force", "legion/leg-1", "main")  # the work gone
    with pytest.raises(ConflictError, match=f"no longer holds {before[:12]}"):
        forge.merge("LEG-1")
    with pytest.raises(ConflictError, match="went back to an older commit"):
        forge.branch_head("LEG-1")  # what an approving review records
    assert forge.get_pr("LEG-1").state is PrState.OPEN
    assert git(git_repo, "rev-parse", "main").strip() != before
    # The work brought back, rewritten (another commit with the same change): it merges.
    commit_on_branch(git_repo, "legion/leg-1", "feature.txt", "feature, again\n", new=False)
    assert forge.merge("LEG-1").state is PrState.MERGED
    assert (git_repo / "feature.txt").read_text() == "feature, again\n"


def test_in_a_fleet_a_prs_branch_is_on_the_shared_remote_and_a_lost_head_is_refused(
    tmp_path: Path, open_store: Callable[[], Store]
) -> None:
    """A PR made on one host sends its branch to the shared remote, so another host merges
    every commit it had; a head whose commits never left a lost host is refused there."""
    remote, alpha, beta = two_hosts(tmp_path, open_store(), "One", "Two")
    commit_on_branch(alpha.repo, "legion/leg-1", "one.txt", "one\n")
    alpha.create_pr("LEG-1", "legion/leg-1")
    sent = git(remote, "rev-parse", "legion/leg-1").strip()
    assert sent == git(alpha.repo, "rev-parse", "legion/leg-1").strip()
    # Alpha is lost; beta has the branch only as an older commit (where the issue began).
    git(beta.repo, "branch", "--quiet", "legion/leg-1", "main")
    merged = beta.merge("LEG-1")
    assert git(beta.repo, "show", f"{merged.merge_commit}:one.txt") == "one\n"
    # A PR whose last head never reached the remote: beta cannot tell what it held.
    commit_on_branch(alpha.repo, "legion/leg-2", "two.txt", "two\n")
    alpha.create_pr("LEG-2", "legion/leg-2")
    commit_on_branch(alpha.repo, "legion/leg-2", "two.txt", "two, more\n", new=False)
    alpha.branch_head("LEG-2")  # seen (recorded), then alpha is lost before sending it
    git(beta.repo, "fetch", "--quiet", "origin", "legion/leg-2:legion/leg-2")
    with pytest.raises(ConflictError, match="not in this repository"):
        beta.merge("LEG-2")
    assert beta.get_pr("LEG-2").state is PrState.OPEN
