"""The GitHub forge against a fake GitHub on 127.0.0.1, with a bare repository as the remote."""

from __future__ import annotations

import os
import re
import stat
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from legion.config import Project
from legion.config.settings import settings_of
from legion.core.marks import unmark
from legion.core.model import ChecksState, ReviewOutcome
from legion.errors import (
    BackendError,
    BackendErrorKind,
    ConfigError,
    ConflictError,
    InputError,
    NotFoundError,
)
from legion.forges.base import Check, PrState
from legion.forges.github import GitHubForge, doctor_checks, open_forge
from legion.forges.github.adapter import linked_body
from legion.forges.github.documents import BATCH_OPERATION, BATCH_SIZE
from legion.forges.github.reviews import APPROVED_LABEL, CHANGES_LABEL
from legion.github.client import api_base, classify, find_token, graphql_url
from legion.github.repository import repository_name
from legion.workspaces.git_worktree import GitWorktrees
from tests.fakes.github_server import FakeGitHub, check_run, status_context
from tests.fakes.graphql_server import Fault
from tests.support.cli import git


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    bare = tmp_path / "remote.git"
    bare.mkdir()
    git(bare, "init", "--quiet", "--bare")
    return bare


@pytest.fixture
def repo(git_repo: Path, remote: Path) -> Path:
    git(git_repo, "remote", "add", "origin", str(remote))
    git(git_repo, "push", "--quiet", "origin", "main")
    return git_repo


@pytest.fixture(scope="module")
def server() -> Iterator[FakeGitHub]:
    # One server for the module (stopping one takes half a second); each test empties it.
    with FakeGitHub().running() as fake:
        assert isinstance(fake, FakeGitHub)
        yield fake


@pytest.fixture
def github(server: FakeGitHub, remote: Path) -> FakeGitHub:
    server.reset(remote=remote)
    return server


def make_project(repo: Path, fake: FakeGitHub, **settings: object) -> Project:
    values: dict[str, object] = {
        "project_id": str(uuid.uuid4()),
        "issue_key": "ENG",
        "forge": "github",
        "github_repo": "acme/widgets",
        "base_branch": "main",
    }
    values.update(settings)
    env = {
        "GITHUB_API_URL": fake.url,
        "GITHUB_TOKEN": fake.token,
        "PATH": os.environ.get("PATH", ""),
    }
    return Project(root=repo, settings=settings_of(values), env=env)  # type: ignore[arg-type]


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def forge(repo: Path, github: FakeGitHub, sleeps: Sleeps) -> GitHubForge:
    return GitHubForge(make_project(repo, github), timeout=2.0, sleep=sleeps)


def commit_on_branch(repo: Path, branch: str, filename: str, text: str) -> str:
    exists = git(repo, "branch", "--list", branch).strip()
    git(repo, "switch", "--quiet", *([] if exists else ["-c"]), branch)
    (repo / filename).parent.mkdir(parents=True, exist_ok=True)
    (repo / filename).write_text(text, encoding="utf-8")
    git(repo, "add", filename)
    git(repo, "commit", "--quiet", "-m", f"Change {filename}")
    git(repo, "switch", "--quiet", "main")
    return git(repo, "rev-parse", f"refs/heads/{branch}").strip()


def remote_sha(remote: Path, branch: str) -> str | None:
    import subprocess

    result = subprocess.run(
        [
            "git",
            "--git-dir",
            str(remote),
            "rev-parse",
            "--verify",
            "--quiet",
            f"refs/heads/{branch}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip() if result.returncode == 0 else None


def batch_requests(fake: FakeGitHub) -> int:
    return sum(1 for r in fake.requests if r.operation == BATCH_OPERATION)


# -- reading -------------------------------------------------------------------------------------


def test_the_prs_of_120_issues_take_three_requests(forge: GitHubForge, github: FakeGitHub) -> None:
    for n in range(1, 121):
        github.add_pr(f"legion/eng-{n}", title=f"ENG-{n}: work", head_oid=f"{n:040x}")
    # ENG-1: an older merged PR and the open one; ENG-2: an open one and a newer closed one.
    github.pulls[1]["state"] = "MERGED"
    github.add_pr("legion/eng-1", title="ENG-1: again", head_oid="a" * 40)
    github.add_pr("legion/eng-2", state="CLOSED", head_oid="b" * 40)
    # Someone else's PRs, one of them from a fork's branch of the same name: not Legion's.
    github.add_pr("feature/other", head_oid="c" * 40)
    github.add_pr("legion/eng-3", head_oid="d" * 40, fork=True, title="From a fork")
    issues = [f"ENG-{n}" for n in range(1, 121)] + ["ENG-500", "not an issue"]

    found = forge.prs_by_issue(issues)

    assert len(github.requests) == 3  # ceil(121 / 50): the branches' batches, nothing else
    assert batch_requests(github) == 3
    assert set(found) == {f"ENG-{n}" for n in range(1, 121)}
    assert found["ENG-1"].title == "ENG-1: again" and found["ENG-1"].state is PrState.OPEN
    assert found["ENG-2"].number == 2 and found["ENG-2"].state is PrState.OPEN  # open wins
    assert found["ENG-77"].issue == "ENG-77" and found["ENG-77"].branch == "legion/eng-77"
    assert found["ENG-3"].number == 3
    first = github.requests[0]
    assert sorted(first.variables) == sorted(["owner", "name", *(f"h{n}" for n in range(50))])
    assert "legion/eng-" not in first.query  # branch names are variables, never query text
    assert all(not r.errors for r in github.requests)


def test_without_an_open_pr_the_latest_one_counts(forge: GitHubForge, github: FakeGitHub) -> None:
    github.add_pr("legion/eng-3", state="MERGED", head_oid="1" * 40)
    newest = github.add_pr("legion/eng-3", state="CLOSED", head_oid="2" * 40)
    assert forge.prs_by_issue(["ENG-3"])["ENG-3"].number == newest["number"]
    assert forge.get_pr("eng-3").number == newest["number"]
    assert forge.prs_by_issue([]) == {}


def test_a_pr_that_vanished_leaves_its_issue_without_one(
    forge: GitHubForge, github: FakeGitHub
) -> None:
    for n in (1, 2, 3):
        github.add_pr(f"legion/eng-{n}", head_oid=f"{n:040x}")
    github.vanish(2)

    found = forge.prs_by_issue(["ENG-1", "ENG-2", "ENG-3"])

    assert sorted(found) == ["ENG-1", "ENG-3"]
    assert any(r.errors for r in github.requests)  # GitHub did say NOT_FOUND for it
    with pytest.raises(NotFoundError, match="no pull request #2 in acme/widgets"):
        forge.get_pr("#2")


def test_a_pr_on_another_branch_is_found_by_the_trackers_link(
    forge: GitHubForge, github: FakeGitHub
) -> None:
    def url(number: int, slug: str = "acme/widgets") -> str:
        return f"https://github.com/{slug}/pull/{number}"

    fixed = github.add_pr("feature/login", title="Fix the login", head_oid="1" * 40)
    own = github.add_pr("legion/eng-2", head_oid="2" * 40)
    elsewhere = github.add_pr("feature/other", head_oid="3" * 40)
    merged = github.add_pr("feature/old", state="MERGED", head_oid="4" * 40)
    reopened = github.add_pr("feature/new", head_oid="5" * 40)
    closed = github.add_pr("feature/closed", state="CLOSED", head_oid="6" * 40)
    fork = github.add_pr("feature/fork", fork=True, head_oid="7" * 40)
    issue_number = github.add_issue("an issue, not a PR")["number"]
    links = {
        "ENG-1": [url(fixed["number"]).replace("acme/widgets", "ACME/Widgets")],
        "ENG-2": [url(elsewhere["number"])],  # its own branch has a PR: that one counts
        "ENG-4": [url(merged["number"]), url(reopened["number"])],  # the open one wins
        "ENG-5": [url(merged["number"]), url(closed["number"]) + "/"],  # else the latest
        "ENG-6": [
            url(fixed["number"], "someone/else"),  # another repository's
            f"https://gitlab.example/acme/widgets/pull/{fixed['number']}",  # another host's
            url(issue_number),  # an issue's number: GitHub answers NOT_FOUND
            url(999),  # no such PR
            url(fork["number"]),  # a fork's
        ],
    }

    found = forge.prs_by_issue([f"ENG-{n}" for n in range(1, 8)], links=links)

    assert {issue: pr.number for issue, pr in found.items()} == {
        "ENG-1": fixed["number"],
        "ENG-2": own["number"],
        "ENG-4": reopened["number"],
        "ENG-5": closed["number"],
    }
    # A linked PR is the issue's, whatever its branch or body names.
    assert (found["ENG-1"].issue, found["ENG-1"].branch) == ("ENG-1", "feature/login")
    assert "ENG-3" not in found and "ENG-7" not in found  # no PR, no link: none
    # One request: 7 branches and the 8 distinct linked numbers of this repository.
    assert batch_requests(github) == len(github.requests) == 1
    request = github.requests[0]
    assert sorted(request.variables) == sorted(
        ["owner", "name", *(f"h{k}" for k in range(7)), *(f"n{k}" for k in range(8))]
    )
    assert request.variables["n0"] == fixed["number"]
    # Numbers are variables too, never query text.
    assert "number: $n7)" in request.query and not re.search(r"number: \d", request.query)


def test_linked_numbers_count_toward_the_batch_size(forge: GitHubForge, github: FakeGitHub) -> None:
    issues = [f"ENG-{n}" for n in range(1, 61)]
    links = {}
    for n in range(1, 46):  # 45 issues whose PRs are on branches of their own names
        pr = github.add_pr(f"feature/eng-{n}", head_oid=f"{n:040x}")
        links[f"ENG-{n}"] = [pr["url"]]

    found = forge.prs_by_issue(issues, links=links)

    assert sorted(found, key=lambda i: int(i.split("-")[1])) == issues[:45]
    assert all(found[f"ENG-{n}"].branch == f"feature/eng-{n}" for n in range(1, 46))
    assert batch_requests(github) == len(github.requests) == -(-(60 + 45) // BATCH_SIZE) == 3
    sizes = [len(r.variables) - 2 for r in github.requests]  # less owner and name
    assert sizes == [BATCH_SIZE, BATCH_SIZE, 5]
    assert all(not r.errors for r in github.requests)


def test_get_pr_by_number_and_by_issue(forge: GitHubForge, github: FakeGitHub) -> None:
    github.add_pr("legion/eng-5", title="ENG-5: five", body="Resolves ENG-5", head_oid="5" * 40)
    github.add_pr("fix/typo", body="Fixes ENG-9", head_oid="9" * 40)
    assert forge.get_pr("1").issue == "ENG-5"
    assert forge.get_pr("#1").url == "https://github.com/acme/widgets/pull/1"
    assert forge.get_pr("ENG-5").number == 1
    assert forge.get_pr("2").issue == "ENG-9"  # not Legion's branch: the body names it
    with pytest.raises(NotFoundError, match="ENG-6 has no pull request"):
        forge.get_pr("ENG-6")
    with pytest.raises(NotFoundError, match="#99"):
        forge.get_pr("99")
    with pytest.raises(InputError):
        forge.get_pr("not a ref")


def test_a_not_found_error_is_not_found_for_get_pr(forge: GitHubForge, github: FakeGitHub) -> None:
    github.add_pr("legion/eng-1", head_oid="1" * 40)
    github.fail_next(
        Fault(
            errors=[{"type": "NOT_FOUND", "message": "Could not resolve to a PullRequest"}],
            operation="PullRequestByNumber",
        )
    )
    with pytest.raises(NotFoundError, match="no pull request #1"):
        forge.get_pr("1")
    assert forge.get_pr("1").number == 1


def test_list_prs_pages_through_legions_prs(forge: GitHubForge, github: FakeGitHub) -> None:
    for n in range(1, 61):
        github.add_pr(f"legion/eng-{n}", head_oid=f"{n:040x}")
    github.add_pr("feature/other", head_oid="f" * 40)
    github.add_pr("legion/eng-61", state="MERGED", head_oid="e" * 40)
    github.add_pr("legion/not-an-issue", head_oid="d" * 40)

    listed = forge.list_prs()

    assert [pr.issue for pr in listed] == [f"ENG-{n}" for n in range(1, 62)]
    assert listed[-1].state is PrState.MERGED
    pages = [r for r in github.requests if r.operation == "PullRequestPage"]
    assert len(pages) == 3  # two pages of open PRs, one of recent closed and merged ones
    assert pages[1].variables["after"] == "50"


def test_a_missing_repository_is_a_credential_or_setting_problem(
    repo: Path, github: FakeGitHub
) -> None:
    forge = GitHubForge(make_project(repo, github, github_repo="acme/nothing"))
    with pytest.raises(BackendError, match="acme/nothing not found") as caught:
        forge.prs_by_issue(["ENG-1"])
    assert caught.value.kind is BackendErrorKind.AUTH


# -- writing -------------------------------------------------------------------------------------


def test_create_pr_pushes_the_branch_and_opens_the_pr(
    forge: GitHubForge, github: FakeGitHub, repo: Path, remote: Path
) -> None:
    sha = commit_on_branch(repo, "legion/eng-12", "feature.txt", "feature\n")
    assert remote_sha(remote, "legion/eng-12") is None

    pr = forge.create_pr("eng-12", "legion/eng-12", body="Adds the feature.", draft=True)

    assert remote_sha(remote, "legion/eng-12") == sha
    assert (pr.issue, pr.branch, pr.base, pr.state, pr.is_draft) == (
        "ENG-12",
        "legion/eng-12",
        "main",
        PrState.OPEN,
        True,
    )
    assert pr.title == "ENG-12: Change feature.txt"  # the commit's subject, after the issue
    assert pr.body == "Adds the feature.\n\nResolves ENG-12"
    assert forge.get_pr("ENG-12").number == pr.number
    created = next(r for r in github.requests if r.operation == "CreatePullRequest")
    assert created.variables["input"]["repositoryId"] == github.repository_id

    with pytest.raises(ConflictError, match="ENG-12 already has open PR"):
        forge.create_pr("ENG-12", "legion/eng-12")
    commit_on_branch(repo, "legion/eng-13", "other.txt", "x\n")
    with pytest.raises(InputError, match="'legion/eng-13'"):
        forge.create_pr("ENG-14", "legion/eng-13")
    with pytest.raises(NotFoundError, match="no branch"):
        forge.create_pr("ENG-15", "legion/eng-15")
    # The repository id was read once, for both attempts that needed it.
    assert sum(1 for r in github.requests if r.operation == "RepositoryContext") == 1


def test_create_pr_keeps_a_body_that_names_the_issue(
    forge: GitHubForge, repo: Path, github: FakeGitHub
) -> None:
    commit_on_branch(repo, "legion/eng-4", "four.txt", "4\n")
    pr = forge.create_pr("ENG-4", "legion/eng-4", title="Four", body="Closes eng-4 at last")
    assert (pr.title, pr.body) == ("Four", "Closes eng-4 at last")
    assert linked_body("ENG-4", "") == "Resolves ENG-4"
    assert linked_body("ENG-4", "About ENG-40") == "About ENG-40\n\nResolves ENG-4"


def test_draft_and_ready(forge: GitHubForge, repo: Path, github: FakeGitHub) -> None:
    commit_on_branch(repo, "legion/eng-1", "a.txt", "a\n")
    forge.create_pr("ENG-1", "legion/eng-1")
    assert forge.set_draft("ENG-1", True).is_draft is True
    assert github.pulls[1]["isDraft"] is True
    assert forge.set_draft("#1", False).is_draft is False
    before = len(github.requests)
    assert forge.set_draft("1", False).is_draft is False  # already ready: nothing to change
    assert [r.operation for r in github.requests[before:]] == ["PullRequestByNumber"]
    ops = github.operations()
    assert "ConvertPullRequestToDraft" in ops and "MarkPullRequestReady" in ops


def test_a_worker_review_is_a_label_and_a_marked_comment(
    forge: GitHubForge, github: FakeGitHub
) -> None:
    github.add_pr("legion/eng-7", head_oid="7" * 40)
    assert not github.labels  # the labels are created at the first review

    approved = forge.add_review("ENG-7", "approved", body="Looks right.", author="ENG-7:review")

    assert approved.review is ReviewOutcome.APPROVED
    assert github.label_names(1) == [APPROVED_LABEL]
    assert APPROVED_LABEL in github.labels
    text, author, _ = unmark(github.comments(1)[-1])
    assert author == "ENG-7:review"
    assert "Looks right." in text
    assert approved.reviews[-1].body == "Looks right."  # read back without the marker

    changes = forge.add_review("#1", "changes_requested", body="Add a test.", author="ENG-7:review")

    assert changes.review is ReviewOutcome.CHANGES_REQUESTED
    assert github.label_names(1) == [CHANGES_LABEL]
    last_request = next(r for r in reversed(changes.reviews) if r.outcome == "changes_requested")
    assert last_request.body == "Add a test."  # what the implementer is told to fix
    assert all(r.outcome != "approved" for r in changes.reviews)  # the old verdict is words now

    commented = forge.add_review("1", "commented", body="Also, a nit.", author="someone")
    assert commented.review is ReviewOutcome.CHANGES_REQUESTED
    assert github.label_names(1) == [CHANGES_LABEL]
    assert len(github.comments(1)) == 3
    assert forge.prs_by_issue(["ENG-7"])["ENG-7"].review is ReviewOutcome.CHANGES_REQUESTED

    again = forge.add_review("1", "approved", body="", author="ENG-7:review")
    assert again.review is ReviewOutcome.APPROVED
    assert github.label_names(1) == [APPROVED_LABEL]
    assert sum(1 for r in github.requests if r.operation == "CreateLabel") == 2
    with pytest.raises(InputError, match="needs --body"):
        forge.add_review("1", "changes_requested", body=" ", author="x")
    with pytest.raises(InputError, match="unknown review outcome"):
        forge.add_review("1", "lgtm", body="", author="x")


def test_a_native_review_counts_when_there_is_no_label(
    forge: GitHubForge, github: FakeGitHub
) -> None:
    github.add_pr("legion/eng-8", head_oid="8" * 40)
    assert forge.get_pr("ENG-8").review is ReviewOutcome.NONE
    github.add_native_review(1, "COMMENTED", "alice", "Hmm.")
    assert forge.get_pr("ENG-8").review is ReviewOutcome.NONE
    github.add_native_review(1, "APPROVED", "alice", "Ship it.")

    pr = forge.get_pr("ENG-8")

    assert pr.review is ReviewOutcome.APPROVED
    assert (pr.reviews[-1].author, pr.reviews[-1].body) == ("alice", "Ship it.")
    # The label decides over a person's approval.
    forge.add_review("ENG-8", "changes_requested", body="Missing docs.", author="ENG-8:review")
    assert forge.get_pr("ENG-8").review is ReviewOutcome.CHANGES_REQUESTED
    github.pulls[1]["_labels"].clear()  # a person took the label off: the approval counts again
    assert forge.get_pr("ENG-8").review is ReviewOutcome.APPROVED


def test_github_review_decision_counts_over_the_latest_review(
    forge: GitHubForge, github: FakeGitHub
) -> None:
    github.add_pr("legion/eng-9", head_oid="9" * 40, review_decision="CHANGES_REQUESTED")
    github.add_native_review(1, "CHANGES_REQUESTED", "bob", "No.")
    github.add_native_review(1, "APPROVED", "alice", "Yes.")
    assert forge.get_pr("1").review is ReviewOutcome.CHANGES_REQUESTED


def test_merge_squashes_and_is_idempotent(
    forge: GitHubForge, github: FakeGitHub, repo: Path, remote: Path
) -> None:
    commit_on_branch(repo, "legion/eng-20", "twenty.txt", "20\n")
    forge.create_pr("ENG-20", "legion/eng-20")
    # The review asked for a fix, committed locally: the merge pushes it first.
    fixed = commit_on_branch(repo, "legion/eng-20", "twenty.txt", "20, fixed\n")

    merged = forge.merge("ENG-20")

    assert merged.state is PrState.MERGED and merged.merge_commit
    assert github.merges == [(1, "SQUASH")]
    assert remote_sha(remote, "legion/eng-20") == fixed
    merge_request = next(r for r in github.requests if r.operation == "MergePullRequest")
    assert merge_request.variables["expectedHeadOid"] == fixed
    again = forge.merge("#1")
    assert again.state is PrState.MERGED and again.number == 1
    assert github.merges == [(1, "SQUASH")]
    with pytest.raises(ConflictError, match="is merged"):
        forge.set_draft("1", True)


def test_a_merge_given_the_reviewed_head_lands_only_its_work(
    forge: GitHubForge, github: FakeGitHub, repo: Path, remote: Path
) -> None:
    """Issue 35: with the head an approving review saw, GitHub's PR is merged only when what
    lands is that head's work but for the retro's note, and exactly the head checked."""
    reviewed = commit_on_branch(repo, "legion/eng-22", "twenty.txt", "22\n")
    forge.create_pr("ENG-22", "legion/eng-22")
    assert forge.branch_head("ENG-22") == reviewed
    # A commit after the approval, not yet on GitHub: it is the head a merge would land.
    extra = commit_on_branch(repo, "legion/eng-22", "twenty.txt", "22, and more\n")
    assert forge.branch_head("ENG-22") == extra
    with pytest.raises(ConflictError) as refused:
        forge.merge("ENG-22", reviewed=reviewed)
    assert "the head changed after the review" in str(refused.value)
    assert "twenty.txt" in str(refused.value) and github.merges == []
    # Reviewed again at the new head, with the retro's note on top: merged, at that head.
    note = commit_on_branch(repo, "legion/eng-22", "docs/solutions/eng-22.md", "# Notes\n")
    merged = forge.merge("ENG-22", reviewed=extra)
    assert merged.state is PrState.MERGED and github.merges == [(1, "SQUASH")]
    merge_request = next(r for r in github.requests if r.operation == "MergePullRequest")
    assert merge_request.variables["expectedHeadOid"] == note


def test_a_push_between_the_check_and_the_merge_merges_nothing(
    forge: GitHubForge, github: FakeGitHub, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reviewed = commit_on_branch(repo, "legion/eng-23", "twenty.txt", "23\n")
    forge.create_pr("ENG-23", "legion/eng-23")
    checked = forge._check_reviewed

    def check_then_push(record: object, head: str) -> None:
        checked(record, head)  # type: ignore[arg-type]
        commit_on_branch(repo, "legion/eng-23", "sneaky.txt", "unreviewed\n")
        git(repo, "push", "--quiet", "origin", "legion/eng-23")

    monkeypatch.setattr(forge, "_check_reviewed", check_then_push)
    with pytest.raises(ConflictError, match="Head branch was modified"):
        forge.merge("ENG-23", reviewed=reviewed)
    assert github.merges == []


def test_merge_uses_the_configured_method(repo: Path, github: FakeGitHub, sleeps: Sleeps) -> None:
    forge = open_forge(make_project(repo, github, merge_method="rebase"), None, sleep=sleeps)
    github.add_pr("legion/eng-21", head_oid="2" * 40)
    forge.merge("ENG-21")
    assert github.merges == [(1, "REBASE")]


def test_a_conflict_or_a_draft_is_refused_with_a_clear_line(
    forge: GitHubForge, github: FakeGitHub
) -> None:
    github.add_pr("legion/eng-30", head_oid="3" * 40, mergeable="CONFLICTING")
    github.add_pr("legion/eng-31", head_oid="4" * 40, draft=True)
    github.add_pr("legion/eng-32", head_oid="5" * 40, state="CLOSED")
    with pytest.raises(ConflictError) as caught:
        forge.merge("ENG-30")
    message = str(caught.value)
    assert "\n" not in message
    assert "PR #1 cannot be merged: legion/eng-30 conflicts with main" in message
    with pytest.raises(ConflictError, match="draft: mark it ready"):
        forge.merge("ENG-31")
    with pytest.raises(ConflictError, match="is closed"):
        forge.merge("ENG-32")
    # GitHub refusing the merge for its own reasons is a conflict too, in its words.
    github.fail_next(
        Fault(
            errors=[{"type": "UNPROCESSABLE", "message": "Base branch was modified."}],
            operation="MergePullRequest",
        )
    )
    github.pulls[1]["mergeable"] = "UNKNOWN"
    with pytest.raises(ConflictError, match="Base branch was modified"):
        forge.merge("ENG-30")
    assert github.merges == []


# -- checks (issue 19 item 1) --------------------------------------------------------------------


def test_checks_come_with_the_pr_in_the_same_batched_request(
    forge: GitHubForge, github: FakeGitHub
) -> None:
    github.add_pr("legion/eng-40", head_oid="6" * 40)
    github.add_pr("legion/eng-41", head_oid="7" * 40)
    github.add_pr("legion/eng-42", head_oid="8" * 40, checks=None)
    github.set_checks(
        1,
        check_run("lint", url="https://ci.example/lint/1"),
        check_run("test (3.12)", conclusion="TIMED_OUT", url="https://ci.example/test/1"),
        status_context("deploy/preview", "ERROR", "https://deploy.example/1"),
        check_run("docs", status="IN_PROGRESS"),
    )
    github.set_checks(2, check_run("lint"), status_context("ci/legacy", "PENDING"))
    github.requests.clear()

    prs = forge.prs_by_issue(["ENG-40", "ENG-41", "ENG-42"])

    assert batch_requests(github) == 1 and len(github.requests) == 1
    failing = prs["ENG-40"]
    assert failing.checks is ChecksState.FAILING
    assert failing.failing_checks == (
        Check("test (3.12)", ChecksState.FAILING, "https://ci.example/test/1"),
        Check("deploy/preview", ChecksState.FAILING, "https://deploy.example/1"),
    )
    assert [c.name for c in failing.pending_checks] == ["docs"]
    assert prs["ENG-41"].checks is ChecksState.PENDING
    assert prs["ENG-42"].checks is ChecksState.NONE and prs["ENG-42"].check_runs == ()
    github.set_checks(2, check_run("lint"), status_context("ci/legacy", "SUCCESS"))
    assert forge.get_pr("ENG-41").checks is ChecksState.PASSING


def test_more_checks_than_a_page_still_read_as_github_rolls_them_up(
    forge: GitHubForge, github: FakeGitHub
) -> None:
    from legion.forges.github.documents import CHECKS_PAGE_SIZE

    github.add_pr("legion/eng-43", head_oid="9" * 40)
    passing = [check_run(f"matrix {n}") for n in range(CHECKS_PAGE_SIZE)]
    github.set_checks(1, *passing, check_run("slow", conclusion="FAILURE"))
    pr = forge.get_pr("ENG-43")
    assert pr.checks is ChecksState.FAILING
    assert [c.name for c in pr.failing_checks] == ["1 more check"]
    assert pr.failing_checks[0].url.endswith("/pull/1/checks")


def test_a_required_check_that_fails_or_runs_refuses_the_merge_in_one_clear_line(
    forge: GitHubForge, github: FakeGitHub
) -> None:
    github.add_pr("legion/eng-44", head_oid="a" * 40)
    github.set_checks(
        1,
        check_run("lint", conclusion="FAILURE", url="https://ci.example/lint/9"),
        check_run("build", status="QUEUED"),
        check_run("optional"),
        required=["lint", "build"],
    )
    with pytest.raises(ConflictError) as caught:
        forge.merge("ENG-44")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "PR #1 cannot be merged until its checks pass: "
        "failing: lint <https://ci.example/lint/9>; pending: build"
    )
    assert "2 of 2 required status checks have not succeeded" in message
    assert github.merges == []
    # Fixed and finished: the same merge goes through.
    github.set_checks(1, check_run("lint"), check_run("build"), required=["lint", "build"])
    assert forge.merge("ENG-44").state is PrState.MERGED


def test_a_failing_check_that_is_not_required_does_not_stop_the_merge(
    forge: GitHubForge, github: FakeGitHub
) -> None:
    github.add_pr("legion/eng-45", head_oid="b" * 40)
    github.set_checks(1, check_run("flaky", conclusion="FAILURE"), required=[])
    assert forge.merge("ENG-45").state is PrState.MERGED


# -- failures ------------------------------------------------------------------------------------


def test_a_rate_limit_with_a_reset_is_waited_out(
    forge: GitHubForge, github: FakeGitHub, sleeps: Sleeps
) -> None:
    github.add_pr("legion/eng-1", head_oid="1" * 40)
    github.fail_next(Fault(status=429, headers={"Retry-After": "3"}))
    assert forge.get_pr("1").number == 1
    assert sleeps == [3.0]

    reset = int(time.time()) + 5
    github.fail_next(
        Fault(
            status=403,
            headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
            body=b'{"message": "API rate limit exceeded"}',
        )
    )
    assert forge.get_pr("1").number == 1
    assert len(sleeps) == 2 and 0 < sleeps[1] <= 5


def test_a_rate_limit_in_graphql_errors_is_waited_out(
    forge: GitHubForge, github: FakeGitHub, sleeps: Sleeps
) -> None:
    github.add_pr("legion/eng-1", head_oid="1" * 40)
    github.fail_next(
        Fault(
            errors=[{"type": "RATE_LIMITED", "message": "API rate limit exceeded for user."}],
            headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 2)},
        )
    )
    assert forge.prs_by_issue(["ENG-1"])["ENG-1"].number == 1
    assert len(sleeps) == 1


def test_server_errors_are_transient_after_retries(
    forge: GitHubForge, github: FakeGitHub, sleeps: Sleeps
) -> None:
    github.fail_next(*[Fault(status=500, body=b"oops")] * 3)
    with pytest.raises(BackendError) as caught:
        forge.prs_by_issue(["ENG-1"])
    assert caught.value.kind is BackendErrorKind.TRANSIENT
    assert len(github.requests) == 3 and len(sleeps) == 2
    assert "PullRequestsForBranches" in str(caught.value)


def test_malformed_json_is_transient(forge: GitHubForge, github: FakeGitHub) -> None:
    github.fail_next(*[Fault(status=200, body=b"{not json")] * 3)
    with pytest.raises(BackendError, match="malformed") as caught:
        forge.get_pr("1")
    assert caught.value.kind is BackendErrorKind.TRANSIENT


def test_a_timeout_is_transient(repo: Path, github: FakeGitHub, sleeps: Sleeps) -> None:
    forge = GitHubForge(make_project(repo, github), timeout=0.2, sleep=sleeps)
    # An answer far past the timeout: a client held up by a loaded machine still gives up.
    github.fail_next(*[Fault(delay=5.0)] * 3)
    with pytest.raises(BackendError, match="no answer within") as caught:
        forge.get_pr("ENG-1")
    assert caught.value.kind is BackendErrorKind.TRANSIENT


def test_a_bad_token_is_auth_in_one_line_without_the_token(repo: Path, github: FakeGitHub) -> None:
    project = make_project(repo, github)
    wrong = "wrong-token-for-tests"
    forge = GitHubForge(replace(project, env={**project.env, "GITHUB_TOKEN": wrong}))
    with pytest.raises(BackendError) as caught:
        forge.prs_by_issue(["ENG-1"])
    message = str(caught.value)
    assert caught.value.kind is BackendErrorKind.AUTH
    assert "\n" not in message and "401" in message and "legion doctor" in message
    assert wrong not in message and github.token not in message
    assert len(github.requests) == 1  # a refused credential is not retried


def test_a_missing_token_names_the_variables(repo: Path, github: FakeGitHub) -> None:
    project = make_project(repo, github)
    env = {"GITHUB_API_URL": github.url, "PATH": str(repo)}  # no token, no gh on the PATH
    forge = GitHubForge(replace(project, env=env))
    with pytest.raises(ConfigError, match="set GITHUB_TOKEN or GH_TOKEN") as caught:
        forge.get_pr("1")
    assert "\n" not in str(caught.value)
    assert github.requests == []


def test_the_token_comes_from_gh_when_no_variable_has_one(tmp_path: Path) -> None:
    gh = tmp_path / "gh"
    gh.write_text('#!/bin/sh\n[ "$1 $2" = "auth token" ] && echo token-from-gh-for-tests\n')
    gh.chmod(gh.stat().st_mode | stat.S_IXUSR)
    token = find_token({"PATH": str(tmp_path)})
    assert token is not None
    assert (token.value, token.source) == ("token-from-gh-for-tests", "gh auth token")
    assert "token-from-gh-for-tests" not in repr(token)
    assert find_token({"GH_TOKEN": "x1", "PATH": str(tmp_path)}) == find_token({"GH_TOKEN": "x1"})
    assert find_token({"PATH": str(tmp_path / "nowhere")}) is None


def test_api_urls() -> None:
    assert graphql_url(api_base({})) == "https://api.github.com/graphql"
    enterprise = api_base({"GITHUB_API_URL": "https://ghe.example.com/api/v3/"})
    assert graphql_url(enterprise) == "https://ghe.example.com/api/graphql"


def test_the_repository_comes_from_the_remote_when_not_set(repo: Path, github: FakeGitHub) -> None:
    project = make_project(repo, github, github_repo=None)
    project = replace(project, env={"GITHUB_TOKEN": "x"})
    git(repo, "remote", "set-url", "origin", "git@github.com:acme/gadgets.git")
    assert repository_name(project) == ("acme", "gadgets")
    git(repo, "remote", "set-url", "origin", "https://gitlab.com/acme/gadgets.git")
    with pytest.raises(ConfigError, match="github_repo"):
        repository_name(project)


# -- doctor --------------------------------------------------------------------------------------


def test_doctor_checks_token_login_repository_and_labels(repo: Path, github: FakeGitHub) -> None:
    project = make_project(repo, github)
    checks = {name: (ok, detail) for name, ok, detail in doctor_checks(project)}
    assert checks["GitHub token"] == (True, "from GITHUB_TOKEN")
    assert checks["GitHub authentication"] == (True, "authenticated as legion-bot")
    assert checks["GitHub repository"] == (True, "acme/widgets: the token can push")
    assert checks["GitHub review labels"][0] is True
    assert "created at the first review" in checks["GitHub review labels"][1]
    assert all(github.token not in detail for _, detail in checks.values())
    assert GitHubForge(project).viewer_login == "legion-bot"

    github.permission = "READ"
    checks = {name: (ok, detail) for name, ok, detail in doctor_checks(project)}
    assert checks["GitHub repository"][0] is False
    assert "cannot push" in checks["GitHub repository"][1]
    assert checks["GitHub review labels"][0] is False


def test_doctor_without_a_token_or_with_a_bad_one(repo: Path, github: FakeGitHub) -> None:
    project = make_project(repo, github)
    none = doctor_checks(replace(project, env={"PATH": str(repo)}))
    assert none == [
        (
            "GitHub token",
            False,
            "not found: set GITHUB_TOKEN or GH_TOKEN, or log in with `gh auth login`",
        )
    ]
    bad = doctor_checks(replace(project, env={**project.env, "GITHUB_TOKEN": "nope"}))
    assert bad[0] == ("GitHub token", True, "from GITHUB_TOKEN")
    assert bad[1][0] == "GitHub authentication" and bad[1][1] is False
    missing = doctor_checks(make_project(repo, github, github_repo="acme/nothing"))
    assert missing[-1] == (
        "GitHub repository",
        False,
        "acme/nothing not found, or the token cannot see it",
    )


def test_batches_split_at_batch_size(forge: GitHubForge, github: FakeGitHub) -> None:
    assert forge.prs_by_issue([f"ENG-{n}" for n in range(1, BATCH_SIZE + 1)]) == {}
    assert batch_requests(github) == 1
    forge.prs_by_issue([f"ENG-{n}" for n in range(1, BATCH_SIZE + 2)])
    assert batch_requests(github) == 3


def test_review_labels_made_or_deleted_meanwhile_are_found_again(
    forge: GitHubForge, github: FakeGitHub
) -> None:
    github.add_pr("legion/eng-1", head_oid="1" * 40)
    github.add_pr("legion/eng-2", head_oid="2" * 40)
    assert forge.viewer_login == "legion-bot"  # the labels' ids are read with it: none yet
    github.add_label(APPROVED_LABEL)  # another Legion process made it since

    assert forge.add_review("ENG-1", "approved", body="", author="r").review is (
        ReviewOutcome.APPROVED
    )
    assert github.label_names(1) == [APPROVED_LABEL]
    refused = [r for r in github.requests if r.operation == "CreateLabel"]
    assert len(refused) == 1 and "already been taken" in refused[0].errors[0]

    del github.labels[APPROVED_LABEL]  # a person deleted it: its cached id is gone
    github.pulls[1]["_labels"].clear()
    assert forge.add_review("ENG-2", "approved", body="", author="r").review is (
        ReviewOutcome.APPROVED
    )
    assert github.label_names(2) == [APPROVED_LABEL]


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"type": "NOT_FOUND", "message": "Could not resolve"}, BackendErrorKind.NOT_FOUND),
        (
            {"type": "RATE_LIMITED", "message": "API rate limit exceeded"},
            BackendErrorKind.RATE_LIMITED,
        ),
        ({"type": "FORBIDDEN", "message": "Resource not accessible"}, BackendErrorKind.AUTH),
        ({"type": "INSUFFICIENT_SCOPES", "message": "needs repo"}, BackendErrorKind.AUTH),
        ({"type": "UNPROCESSABLE", "message": "not mergeable"}, BackendErrorKind.INVALID),
        (
            {"message": "Something went wrong while executing your query."},
            BackendErrorKind.TRANSIENT,
        ),
        ({"message": "Field 'x' doesn't exist on type 'PullRequest'"}, None),
    ],
)
def test_github_errors_are_classified(error: dict[str, str], kind: BackendErrorKind | None) -> None:
    assert classify(error) is kind


# -- after a merge: the base comes home ------------------------------------------------------


def merged_forge(repo: Path, github: FakeGitHub, warnings: list[str]) -> GitHubForge:
    return GitHubForge(
        make_project(repo, github), timeout=2.0, sleep=lambda _s: None, warn=warnings.append
    )


def test_a_merge_fast_forwards_the_local_base_and_new_workspaces_start_from_it(
    repo: Path, github: FakeGitHub, remote: Path, tmp_path: Path
) -> None:
    warnings: list[str] = []
    forge = merged_forge(repo, github, warnings)
    commit_on_branch(repo, "legion/eng-30", "thirty.txt", "30\n")
    forge.create_pr("ENG-30", "legion/eng-30")

    merged = forge.merge("ENG-30")

    remote_main = remote_sha(remote, "main")
    assert merged.merge_commit == remote_main  # GitHub's (the fake's) squash commit
    assert git(repo, "rev-parse", "refs/heads/main").strip() == remote_main
    assert (repo / "thirty.txt").read_text() == "30\n"  # the user's checkout has the work
    assert warnings == []
    workspace = GitWorktrees(repo, tmp_path / "ws", "main", remote="origin").ensure("ENG-31")
    assert git(workspace.path, "rev-parse", "HEAD").strip() == remote_main


def test_a_base_not_checked_out_moves_too(repo: Path, github: FakeGitHub, remote: Path) -> None:
    warnings: list[str] = []
    forge = merged_forge(repo, github, warnings)
    commit_on_branch(repo, "legion/eng-32", "x.txt", "x\n")
    forge.create_pr("ENG-32", "legion/eng-32")
    git(repo, "switch", "--quiet", "--detach")
    forge.merge("ENG-32")
    assert git(repo, "rev-parse", "refs/heads/main").strip() == remote_sha(remote, "main")
    assert warnings == []


def test_a_local_base_with_changes_or_its_own_commits_is_left_as_it_is_and_said(
    repo: Path, github: FakeGitHub, remote: Path, tmp_path: Path
) -> None:
    warnings: list[str] = []
    forge = merged_forge(repo, github, warnings)
    commit_on_branch(repo, "legion/eng-33", "a.txt", "a\n")
    commit_on_branch(repo, "legion/eng-34", "b.txt", "b\n")
    forge.create_pr("ENG-33", "legion/eng-33")
    forge.create_pr("ENG-34", "legion/eng-34")
    before = git(repo, "rev-parse", "refs/heads/main").strip()
    (repo / "README.md").write_text("my edit, not committed\n", encoding="utf-8")

    forge.merge("ENG-33")

    assert git(repo, "rev-parse", "refs/heads/main").strip() == before
    assert (repo / "README.md").read_text() == "my edit, not committed\n"
    assert len(warnings) == 1 and "local main was left as it is" in warnings[0]
    assert "with local changes" in warnings[0] and "git merge --ff-only origin/main" in warnings[0]
    # New workspaces start from the merged base all the same.
    workspace = GitWorktrees(repo, tmp_path / "ws", "main", remote="origin").ensure("ENG-35")
    assert (workspace.path / "a.txt").exists()

    git(repo, "checkout", "--quiet", "--", "README.md")
    (repo / "mine.txt").write_text("mine\n", encoding="utf-8")
    git(repo, "add", "mine.txt")
    git(repo, "commit", "--quiet", "-m", "a local commit")
    mine = git(repo, "rev-parse", "HEAD").strip()
    forge.merge("ENG-34")
    assert git(repo, "rev-parse", "refs/heads/main").strip() == mine
    assert "main has commits the merged base lacks" in warnings[-1]


# -- a check's log (issue 38) --------------------------------------------------------------------


def test_checks_list_with_status_and_a_log_comes_capped_without_the_token_past_github(
    forge: GitHubForge, github: FakeGitHub
) -> None:
    """`pr_checks` lists the head's check runs as GitHub says them; a job's log is the end of
    it only (last 200 lines, 64 KiB), fetched from the storage host GitHub redirects to,
    which never sees the token."""
    from legion.core.text import LOG_TAIL_BYTES, LOG_TAIL_LINES

    github.add_pr("legion/eng-46", head_oid="c" * 40)
    test = check_run("test (3.12)", conclusion="FAILURE", url="https://ci.example/t/1")
    github.set_checks(1, check_run("lint"), test, status_context("deploy", "PENDING"))
    lines = [f"line {n}: {'x' * 20}\n" for n in range(5000)] + ["\x1b[31mFAILED\x1b[0m test_x\n"]
    github.set_job_log(test, "".join(lines))

    found = forge.pr_checks("ENG-46")
    assert found.number == 1 and found.head == "c" * 40 and found.log is None
    assert [(c.name, c.state, c.status, c.conclusion) for c in found.checks] == [
        ("lint", ChecksState.PASSING, "completed", "success"),
        ("test (3.12)", ChecksState.FAILING, "completed", "failure"),
        ("deploy", ChecksState.PENDING, "", "pending"),
    ]

    got = forge.pr_checks("1", log="test (3.12)").log
    assert got is not None and got.name == "test (3.12)" and got.cut
    shown = got.text.splitlines(keepends=True)
    assert len(shown) == LOG_TAIL_LINES and shown == lines[-LOG_TAIL_LINES:]
    assert len(got.text.encode()) <= LOG_TAIL_BYTES
    # The storage host was asked for the end only, and never with a credential.
    assert github.storage is not None and github.storage.seen
    assert all(auth is None for _path, auth, _range in github.storage.seen)
    assert all(wanted and wanted.startswith("bytes=-") for _p, _a, wanted in github.storage.seen)
    # Found by case too; a log longer than 64 KiB in 200 lines is cut to 64 KiB.
    github.set_job_log(test, "".join(f"{n} {'y' * 1000}\n" for n in range(300)))
    capped = forge.pr_checks("ENG-46", log="TEST (3.12)").log
    assert capped is not None and capped.cut and len(capped.text.encode()) <= LOG_TAIL_BYTES
    assert capped.text.endswith(f"299 {'y' * 1000}\n")


def test_a_redirect_chain_to_another_host_never_gets_the_token(
    forge: GitHubForge, github: FakeGitHub
) -> None:
    github.add_pr("legion/eng-47", head_oid="d" * 40)
    build = check_run("build", conclusion="FAILURE")
    github.set_checks(1, build)
    github.set_job_log(build, "error: it broke\n")
    storage = github.storage
    assert storage is not None
    # The storage host sends it on once more, to a URL of its own: no token there either.
    storage.redirect_to = storage.signed(b"moved: it broke\n")
    got = forge.pr_checks("ENG-47", log="build").log
    assert got is not None and got.text == "moved: it broke\n" and not got.cut
    assert len(storage.seen) == 2 and all(auth is None for _p, auth, _r in storage.seen)
    # Only the API itself got the token, once.
    assert [r.path for r in github.requests if r.method == "GET"] == [
        f"/repos/acme/widgets/actions/jobs/{build['databaseId']}/logs"
    ]
    # A redirect off https (or the API's own scheme) is not followed.
    storage.redirect_to = "file:///etc/passwd"
    with pytest.raises(BackendError) as caught:
        forge.pr_checks("ENG-47", log="build")
    assert "redirected to a file URL" in str(caught.value)


def test_a_missing_pr_check_or_log_is_not_found_in_one_line(
    forge: GitHubForge, github: FakeGitHub
) -> None:
    github.add_pr("legion/eng-48", head_oid="e" * 40)
    github.set_checks(1, check_run("lint"), status_context("ci/legacy", "FAILURE", "https://x/1"))
    with pytest.raises(NotFoundError, match=r"^PR #1 has no check 'nope' \(its checks: lint, "):
        forge.pr_checks("ENG-48", log="nope")
    with pytest.raises(NotFoundError, match=r"has no log on GitHub .* see https://x/1$"):
        forge.pr_checks("ENG-48", log="ci/legacy")
    with pytest.raises(NotFoundError, match="'lint' of PR #1 has no log GitHub serves"):
        forge.pr_checks("ENG-48", log="lint")  # a job GitHub keeps no log of: 404
    with pytest.raises(NotFoundError):
        forge.pr_checks("ENG-49")
