"""A session's merge lands what the approving review saw (issue 35), with real git: a review
session approves through the relay, which records the branch's head in Legion's store; a
finish session's merge through the relay goes only when merging that head with the base gives
what lands, but for the retro's note under `docs/solutions/` (`legion.core.reviewed_head`).

The relay runs in this process on the embedded tracker and forge; the sessions are its
in-process adapters, each with the capability of its mode."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from legion.backends import Backends, open_backends
from legion.config import Project, load_project
from legion.core.model import Status
from legion.errors import ConflictError, NotPermittedError
from legion.forges.base import PrState
from legion.forges.reviewed import ReviewedHeads
from legion.relay import socket_path
from legion.relay.capabilities import Capabilities
from legion.relay.client import RelayClient, RelayForge
from legion.relay.server import RelayServer
from tests.support.cli import git

ISSUE = "LEG-1"
BRANCH = "legion/leg-1"


@dataclass
class Flow:
    repo: Path  # the user's checkout, on main
    workspace: Path  # the issue's worktree, on its branch
    project: Project
    backends: Backends
    path: Path

    def session(self, mode: str) -> RelayForge:
        """The forge as a session of `mode` on the issue sees it (through the relay)."""
        token = Capabilities(self.backends.db).mint(ISSUE, mode=mode, session_id=str(uuid.uuid4()))
        return RelayForge(RelayClient(self.path, token, wait=0.5))

    def commit(self, where: Path, name: str, text: str) -> str:
        target = where / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        git(where, "add", name)
        git(where, "commit", "--quiet", "-m", f"Change {name}")
        return head(where)

    def approve(self) -> str:
        """A review session approves the PR; the head it saw."""
        pr = self.session("review").add_review("1", "approved", body="", author="r")
        assert pr.reviews[-1].outcome == "approved"
        return head(self.workspace)

    def finish(self) -> PrState:
        return self.session("finish").merge(ISSUE).state

    def main_files(self) -> set[str]:
        return set(git(self.repo, "ls-tree", "-r", "--name-only", "main").split())


def head(where: Path) -> str:
    return git(where, "rev-parse", "HEAD").strip()


@pytest.fixture
def flow(project: Path, tmp_path: Path) -> Iterator[Flow]:
    loaded = load_project(project)
    backends = open_backends(loaded)
    backends.tracker.create_issue("Add a feature", status=Status.IN_PROGRESS)  # LEG-1
    workspace = tmp_path / "leg-1"
    git(project, "worktree", "add", "--quiet", "-b", BRANCH, str(workspace))
    path = socket_path(loaded.state_dir)
    server = RelayServer(path, lambda: open_backends(loaded, direct=True))
    server.start()
    try:
        made = Flow(project, workspace, loaded, backends, path)
        made.commit(workspace, "feature.py", "def feature():\n    return 1\n")
        made.session("implement").create_pr(ISSUE, BRANCH)
        yield made
    finally:
        server.stop()
        backends.db.close()


def test_a_commit_after_the_approval_is_merged_only_after_a_new_review(flow: Flow) -> None:
    approved = flow.approve()
    assert ReviewedHeads(flow.backends.db).head(1, BRANCH) == approved
    main_before = head(flow.repo)
    # The worker goes on after the approval (or another issue's worker moves this branch).
    pushed = flow.commit(flow.workspace, "feature.py", "def feature():\n    return 2\n")
    with pytest.raises(ConflictError) as refused:
        flow.finish()
    line = str(refused.value)
    assert "\n" not in line
    assert line.startswith(f"PR #1: the head changed after the review approved {approved[:12]}")
    assert "feature.py" in line and "a new review is needed" in line
    assert head(flow.repo) == main_before  # nothing merged
    assert flow.backends.forge.get_pr("1").state is PrState.OPEN
    # A review session approves the new head: now it merges.
    assert flow.approve() == pushed
    assert flow.finish() is PrState.MERGED
    assert git(flow.repo, "show", "main:feature.py") == "def feature():\n    return 2\n"


def test_the_retros_note_after_the_approval_is_merged(flow: Flow) -> None:
    flow.approve()
    flow.commit(flow.workspace, "docs/solutions/leg-1-feature.md", "# What we learned\n")
    assert flow.finish() is PrState.MERGED
    assert {"feature.py", "docs/solutions/leg-1-feature.md"} <= flow.main_files()


def test_code_hidden_beside_the_note_is_refused(flow: Flow) -> None:
    flow.approve()
    flow.commit(flow.workspace, "docs/solutions/leg-1-feature.md", "# What we learned\n")
    flow.commit(flow.workspace, "docs/solutions.py", "import os\n")
    with pytest.raises(ConflictError, match=r"changed since: docs/solutions\.py\)"):
        flow.finish()


def test_the_base_merged_into_the_branch_after_the_approval_is_merged(flow: Flow) -> None:
    flow.approve()
    flow.commit(flow.repo, "other.py", "# another issue's work, merged meanwhile\n")
    # The finisher brings the branch up to the base (no conflict), and the retro's note.
    git(flow.workspace, "merge", "--quiet", "--no-edit", "main")
    flow.commit(flow.workspace, "docs/solutions/leg-1-feature.md", "# What we learned\n")
    assert flow.finish() is PrState.MERGED
    assert {"feature.py", "other.py", "docs/solutions/leg-1-feature.md"} <= flow.main_files()


def test_the_base_moving_on_after_the_approval_needs_no_new_review(flow: Flow) -> None:
    flow.approve()
    flow.commit(flow.repo, "other.py", "# another issue's work, merged meanwhile\n")
    assert flow.finish() is PrState.MERGED
    assert {"feature.py", "other.py"} <= flow.main_files()


def test_a_merge_of_the_base_that_changes_more_than_the_base_did_is_refused(flow: Flow) -> None:
    flow.approve()
    flow.commit(flow.repo, "other.py", "# another issue's work\n")
    # An "evil merge": the merge commit also changes the reviewed code.
    git(flow.workspace, "merge", "--quiet", "--no-commit", "main")
    (flow.workspace / "feature.py").write_text("def feature():\n    return 3\n", encoding="utf-8")
    git(flow.workspace, "commit", "--quiet", "-am", "Merge main")
    with pytest.raises(ConflictError, match=r"changed since: feature\.py\)"):
        flow.finish()


def test_a_conflict_resolved_after_the_approval_needs_a_new_review(flow: Flow) -> None:
    flow.approve()
    flow.commit(flow.repo, "feature.py", "def feature():\n    return 0\n")
    conflicted = subprocess.run(
        ["git", "merge", "--quiet", "main"], cwd=flow.workspace, capture_output=True, check=False
    )
    assert conflicted.returncode != 0
    (flow.workspace / "feature.py").write_text("def feature():\n    return 1\n", encoding="utf-8")
    git(flow.workspace, "commit", "--quiet", "-am", "Merge main, keeping ours")
    with pytest.raises(ConflictError, match="conflicts with the base"):
        flow.finish()
    flow.approve()
    assert flow.finish() is PrState.MERGED


def test_an_approval_recorded_outside_a_review_session_is_not_merged_by_a_session(
    flow: Flow,
) -> None:
    # A person's own `legion pr review` (the forge itself, no session): it pins no head.
    flow.backends.forge.add_review("1", "approved", body="", author="hank")
    with pytest.raises(NotPermittedError, match="no approval recorded by a Legion review session"):
        flow.finish()
    # A person's own `legion pr merge` is theirs to make.
    assert flow.backends.forge.merge("1").state is PrState.MERGED


def test_changes_asked_for_after_an_approval_drop_its_head(flow: Flow) -> None:
    flow.approve()
    reviewer = flow.session("review")
    reviewer.add_review("1", "changes_requested", body="Not yet.", author="r")
    assert ReviewedHeads(flow.backends.db).head(1, BRANCH) is None
    with pytest.raises(NotPermittedError, match="no approving review"):
        flow.finish()
