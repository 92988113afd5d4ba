"""A reconcile pass on Linear and GitHub (the fakes on 127.0.0.1) while they fail in every way
the issue names: a 500, a timeout, malformed JSON, an expired token, a rate limit, a pull
request that vanished. Each time: no wrong transition, one clear line in the action log,
and every other issue still handled; and once the fault is gone, the pass does what it should.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from legion.backends import open_backends, open_workers
from legion.config import load_project
from legion.forges.github import GitHubForge
from legion.reconcile import Outcome, Reconciler
from legion.store.actionlog import ActionLog, OutcomeKind
from legion.trackers.linear.adapter import open_tracker
from legion.trackers.linear.client import linear_client
from tests.fakes.github_server import FakeGitHub
from tests.fakes.graphql_server import Fault
from tests.fakes.linear_server import FakeLinear
from tests.support.cli import git, run_legion

# The client's timeout here: short, for the tests of a server that never answers, but not so
# short that a loaded machine's fake (which validates every document against the published
# schema) answers a healthy request too late.
TIMEOUT = 3.0  # a loaded CI machine once took longer than 1.5 s to answer a healthy call
BATCH = "PullRequestsForBranches"
UPDATE = "LinearIssueUpdate"


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[FakeLinear, FakeGitHub]]:
    linear, github = FakeLinear(retro_state=True), FakeGitHub()
    with linear.running(), github.running():
        yield linear, github


@pytest.fixture
def world(
    servers: tuple[FakeLinear, FakeGitHub], git_repo: Path, tmp_path: Path
) -> tuple[Reconciler, FakeLinear, FakeGitHub]:
    linear, github = servers
    remote = tmp_path / "remote.git"
    remote.mkdir()
    git(remote, "init", "--quiet", "--bare")
    git(git_repo, "remote", "add", "origin", str(remote))
    linear.reset(retro_state=True)
    github.reset(remote=remote)
    env = dict(os.environ) | {
        "LINEAR_API_URL": linear.api_url,
        "LINEAR_API_KEY": linear.token,
        "GITHUB_API_URL": github.url,
        "GITHUB_TOKEN": github.token,
    }
    init = run_legion(
        "init",
        "--tracker",
        "linear",
        "--team",
        "ENG",
        "--forge",
        "github",
        "--repo",
        "acme/widgets",
        cwd=git_repo,
        env=env,
    )
    assert init.returncode == 0, init.stderr
    # WIP 0: no worker is started, so every pass is about the backends alone.
    project = load_project(git_repo, env=env, flags={"wip_limit": 0})
    backends = open_backends(project)
    no_wait = lambda seconds: None  # noqa: E731
    tracker = open_tracker(project, None, client=linear_client(env, timeout=TIMEOUT, sleep=no_wait))
    forge = GitHubForge(project, timeout=TIMEOUT, sleep=no_wait)
    workers = open_workers(project, backends)
    reconciler = Reconciler(project, tracker, forge, workers, ActionLog(backends.db))
    # ENG-1: reviewed and approved on GitHub, so it is due to move to Retro; ENG-2: in
    # progress with nobody on it (its implementer waits for a WIP slot).
    linear.add_label("worker-done")
    one = linear.add_issue("Reviewed", state="In Review", labels=["worker-done"])
    linear.add_issue("Under way", state="In Progress")
    github.add_pr(f"legion/{one.lower()}", labels=("worker-approved",))
    return reconciler, linear, github


def service_env(linear: FakeLinear, github: FakeGitHub) -> dict[str, str]:
    """The environment that points Legion at the two fakes."""
    return dict(os.environ) | {
        "LINEAR_API_URL": linear.api_url,
        "LINEAR_API_KEY": linear.token,
        "GITHUB_API_URL": github.url,
        "GITHUB_TOKEN": github.token,
    }


def summary(outcomes: list[Outcome]) -> list[tuple[str, str, str]]:
    return [(o.issue, o.action, o.kind.value) for o in outcomes]


HANDLED_ENG2 = ("ENG-2", "dispatch_implementer", "deferred")


@pytest.mark.parametrize(
    ("faults", "says"),
    [
        ([Fault(status=500, body=b"oops", operation=BATCH)] * 3, "server error (HTTP 500)"),
        ([Fault(delay=TIMEOUT * 2, operation=BATCH)] * 3, "no answer within"),
        ([Fault(status=200, body=b"{not json", operation=BATCH)] * 3, "malformed answer"),
        ([Fault(status=401, body=b'{"message": "Bad credentials"}', operation=BATCH)], "refused"),
    ],
    ids=["500", "timeout", "malformed-json", "expired-token"],
)
def test_a_forge_that_fails_moves_nothing_and_says_so_once(
    world: tuple[Reconciler, FakeLinear, FakeGitHub], faults: list[Fault], says: str
) -> None:
    reconciler, linear, github = world
    github.fail_next(*faults)
    outcomes = reconciler.run()
    failed = [o for o in outcomes if o.kind is OutcomeKind.FAILED and o.action == "observe"]
    assert len(failed) == 1 and says in failed[0].detail, summary(outcomes)
    assert "\n" not in failed[0].detail and github.token not in failed[0].detail
    assert "pull requests unknown" in failed[0].detail
    assert linear.state_name("ENG-1") == "In Review"  # its review is unknown: no transition
    assert HANDLED_ENG2 in summary(outcomes)  # the other issue is still handled
    if says == "refused":  # a refused credential pauses dispatch, and says it once
        assert reconciler.pause.reason() is not None
        assert ("-", "pause_dispatch", "failed") in summary(outcomes)
        return
    assert reconciler.pause.reason() is None
    # The fault is gone: the approved issue moves on.
    after = reconciler.run()
    assert ("ENG-1", "transition_to_retro", "done") in summary(after)
    assert linear.state_name("ENG-1") == "Retro"


@pytest.mark.parametrize(
    ("faults", "says"),
    [
        ([Fault(status=500, body=b"oops", operation="LinearIssues")] * 3, "server error"),
        ([Fault(delay=TIMEOUT * 2, operation="LinearIssues")] * 3, "no answer within"),
        ([Fault(status=200, body=b"<html>", operation="LinearIssues")] * 3, "malformed"),
    ],
    ids=["500", "timeout", "malformed-json"],
)
def test_a_tracker_that_fails_makes_the_pass_do_nothing(
    world: tuple[Reconciler, FakeLinear, FakeGitHub], faults: list[Fault], says: str
) -> None:
    reconciler, linear, _github = world
    linear.fail_next(*faults)
    outcomes = reconciler.run()
    assert summary(outcomes) == [("-", "observe", "failed")], summary(outcomes)
    assert says in outcomes[0].detail and "issues unknown, nothing done" in outcomes[0].detail
    assert linear.state_name("ENG-1") == "In Review"
    assert ("ENG-1", "transition_to_retro", "done") in summary(reconciler.run())


def test_a_tracker_rate_limit_keeps_passes_away_until_the_reset(
    world: tuple[Reconciler, FakeLinear, FakeGitHub],
) -> None:
    reconciler, linear, _github = world
    limited = Fault(
        status=400,
        headers={"Retry-After": "600"},
        errors=[{"message": "Rate limit exceeded", "extensions": {"code": "RATELIMITED"}}],
        operation="LinearIssues",
    )
    linear.fail_next(limited)
    outcomes = reconciler.run()
    assert summary(outcomes) == [("-", "observe", "deferred")], summary(outcomes)
    assert "next try in 600 s" in outcomes[0].detail
    assert 590 < reconciler.quiet_for() <= 600
    assert linear.state_name("ENG-1") == "In Review"


def test_a_pull_request_that_vanished_is_no_pull_request_and_no_transition(
    world: tuple[Reconciler, FakeLinear, FakeGitHub],
) -> None:
    reconciler, linear, github = world
    github.vanish(1)
    outcomes = reconciler.run()
    # Without a PR, a finished review is the controller's to investigate, never a move.
    assert [o.action for o in outcomes if o.issue == "ENG-1"] == ["queue_judgment"]
    assert "investigate_no_pr" in next(o.detail for o in outcomes if o.issue == "ENG-1")
    assert linear.state_name("ENG-1") == "In Review"
    assert HANDLED_ENG2 in summary(outcomes)


def test_a_pull_request_linear_attached_is_the_issues_on_any_branch(
    world: tuple[Reconciler, FakeLinear, FakeGitHub],
) -> None:
    reconciler, linear, github = world
    # A person fixed ENG-3 on a branch of their own; Linear's GitHub integration attached it
    # ("Fixes ENG-3"). ENG-4's PR is on another branch too, but nothing links it.
    linked = linear.add_issue("Fixed by hand", state="In Review", labels=["worker-done"])
    unlinked = linear.add_issue("Fixed, unlinked", state="In Review", labels=["worker-done"])
    pr = github.add_pr("fix/login", body=f"Fixes {linked}", labels=("worker-approved",))
    github.add_pr("fix/other", labels=("worker-approved",))
    linear.add_attachment(linked, pr["url"], title=pr["title"])
    github.requests.clear()

    outcomes = reconciler.run()

    assert (linked, "transition_to_retro", "done") in summary(outcomes)
    assert linear.state_name(linked) == "Retro"
    assert [o.action for o in outcomes if o.issue == unlinked] == ["queue_judgment"]
    assert linear.state_name(unlinked) == "In Review"
    # The linked PR came in the same request as the branches' PRs.
    assert [r.operation for r in github.requests].count(BATCH) == 1


class Clock:
    """The reconciler's clock, moved by the test (backoffs are minutes long)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_issues_refused_step_backs_off_that_issue_alone(
    world: tuple[Reconciler, FakeLinear, FakeGitHub],
) -> None:
    """An invalid request is reported once and not sent again until the issue changes; a
    transient failure is tried again after a backoff that doubles; neither holds back another
    issue, and neither makes a pass wait."""
    reconciler, linear, github = world
    clock = Clock()
    reconciler.clock = clock
    # No fault here is a timeout: a loaded machine must not add one.
    env = reconciler.project.env
    client = linear_client(env, timeout=10.0, sleep=lambda _s: None)
    reconciler.tracker = open_tracker(reconciler.project, None, client=client)
    # ENG-3 is due to move to Retro too, like ENG-1.
    three = linear.add_issue("Reviewed too", state="In Review", labels=["worker-done"])
    github.add_pr(f"legion/{three.lower()}", labels=("worker-approved",))
    invalid = Fault(
        errors=[{"message": "Argument Validation Error", "extensions": {"code": "INVALID_INPUT"}}],
        operation=UPDATE,
    )
    down = Fault(status=500, body=b"oops", operation=UPDATE)
    # The moves run in identifier order: ENG-1's first update is refused as invalid, ENG-3's
    # fails as a server error (a mutation is not retried by the client: it may have landed).
    linear.fail_next(invalid, down)

    first = reconciler.run()

    eng1 = next(o for o in first if o.issue == "ENG-1")
    eng3 = next(o for o in first if o.issue == three)
    assert eng1.kind is OutcomeKind.FAILED and "not tried again until ENG-1 changes" in eng1.detail
    assert eng3.kind is OutcomeKind.FAILED and f"next try for {three} in 30 s" in eng3.detail
    assert HANDLED_ENG2 in summary(first)
    assert reconciler.quiet_for() == 0  # no pass waits for either
    assert {linear.state_name("ENG-1"), linear.state_name(three)} == {"In Review"}

    linear.requests.clear()
    second = reconciler.run()  # backing off: neither update is sent, nothing logged again
    assert linear.operations().count(UPDATE) == 0, summary(second)
    assert ("ENG-1", "transition_to_retro", "deferred") in summary(second)
    assert (three, "transition_to_retro", "deferred") in summary(second)
    assert HANDLED_ENG2 in summary(second)
    logged = [e.outcome for e in reconciler.log.tail(50, issue="ENG-1")]
    assert logged == [OutcomeKind.FAILED]  # said once

    # ENG-3 fails again after its backoff: the next one is twice as long.
    clock.now += 31
    linear.fail_next(down)
    third = reconciler.run()
    assert f"next try for {three} in 60 s" in next(o.detail for o in third if o.issue == three)
    assert ("ENG-1", "transition_to_retro", "deferred") in summary(third)

    # The server is back: ENG-3 moves once its backoff is over; ENG-1 still waits.
    clock.now += 61
    linear.requests.clear()
    fourth = reconciler.run()
    assert (three, "transition_to_retro", "done") in summary(fourth)
    assert linear.state_name(three) == "Retro"
    assert ("ENG-1", "transition_to_retro", "deferred") in summary(fourth)
    assert linear.state_name("ENG-1") == "In Review"

    # A person changes ENG-1 (a label): its step is tried again at once, and goes through.
    linear.add_label("needs-docs")
    with linear.lock:
        linear.issue("ENG-1")["label_ids"].append(linear.label("needs-docs")["id"])
    fifth = reconciler.run()
    assert ("ENG-1", "transition_to_retro", "done") in summary(fifth)
    assert linear.state_name("ENG-1") == "Retro"


def test_a_rate_limit_on_one_issues_step_holds_back_that_issue_alone(
    world: tuple[Reconciler, FakeLinear, FakeGitHub],
) -> None:
    reconciler, linear, github = world
    env = reconciler.project.env
    client = linear_client(env, timeout=10.0, sleep=lambda _s: None)
    reconciler.tracker = open_tracker(reconciler.project, None, client=client)
    three = linear.add_issue("Reviewed too", state="In Review", labels=["worker-done"])
    github.add_pr(f"legion/{three.lower()}", labels=("worker-approved",))
    limited = Fault(
        status=400,
        headers={"Retry-After": "600"},
        errors=[{"message": "Rate limit exceeded", "extensions": {"code": "RATELIMITED"}}],
        operation=UPDATE,
    )
    linear.fail_next(limited)

    outcomes = reconciler.run()

    eng1 = next(o for o in outcomes if o.issue == "ENG-1")
    assert eng1.kind is OutcomeKind.DEFERRED and "next try for ENG-1 in 600 s" in eng1.detail
    assert (three, "transition_to_retro", "done") in summary(outcomes)  # not held back
    assert reconciler.quiet_for() == 0  # and no pass waits
    assert ("ENG-1", "transition_to_retro", "deferred") in summary(reconciler.run())
    assert linear.state_name("ENG-1") == "In Review"


def test_checks_the_implementer_cannot_fix_go_to_a_human_after_three_tries(
    world: tuple[Reconciler, FakeLinear, FakeGitHub],
) -> None:
    """Each round of fixing failing checks costs an implementer's turn and a review: after
    three that left them failing, Legion asks a human instead of resuming it a fourth time,
    and a person's answer resumes it (the count starts again)."""
    from tests.fakes.github_server import check_run

    reconciler, linear, github = world
    log = reconciler.log
    for _ in range(3):  # three earlier rounds, each resumed (and each back with red checks)
        log.append("ENG-1", "resume_implementer_for_checks", OutcomeKind.DONE, "failing: build")
    github.set_checks(1, check_run("build", conclusion="FAILURE", url="https://ci.example/b/1"))

    asked = [o for o in reconciler.run() if o.issue == "ENG-1"]

    assert [(o.action, o.kind.value) for o in asked] == [
        ("ask_human_about_checks", "done"),
        ("resume_implementer_for_checks", "deferred"),
    ], asked
    assert asked[1].detail == "checks still fail after 3 fixes (build): asked a human"
    assert "user-input-needed" in linear.label_names("ENG-1")
    question = linear.comments_of("ENG-1")[-1]["body"]
    assert question.startswith("## Checks still failing") and "still fail: build" in question
    assert not [o for o in reconciler.run() if o.issue == "ENG-1"]  # it waits for the person
    # A person answers: their answer goes to the implementer, resumed for the checks (its
    # start waits for a WIP slot here), and the count starts again.
    linear.add_comment("ENG-1", "Pin the build's Python to 3.12.", by="human")
    reconciler.tracker.update_labels("ENG-1", add=["user-feedback-given"])
    [relayed] = [o for o in reconciler.run() if o.issue == "ENG-1"]
    assert relayed.action == "relay_user_feedback", relayed
    assert "answer to Legion's question: resume_implementer_for_checks" in relayed.detail


def test_ci_checks_hold_the_move_to_retro_and_the_finisher(
    world: tuple[Reconciler, FakeLinear, FakeGitHub],
) -> None:
    """Issue 19 item 1: an approved PR moves to Retro only once its checks pass; failing, the
    implementer is due (its start waits for a WIP slot here, so nothing is cleared); and the
    finisher, who merges, does not start while a check is pending or failing (in Retro, failing
    checks send the implementer, not the finisher)."""
    from tests.fakes.github_server import check_run

    reconciler, linear, github = world
    github.set_checks(1, check_run("build", status="IN_PROGRESS"))
    retro = linear.add_issue("Retro done", state="Retro", labels=["worker-done"])
    github.add_pr(f"legion/{retro.lower()}", labels=("worker-approved",), head_oid="e" * 40)
    github.set_checks(2, check_run("build", status="QUEUED"))

    waiting = summary(reconciler.run())

    assert not [o for o in waiting if o[0] in ("ENG-1", retro)], waiting
    assert linear.state_name("ENG-1") == "In Review" and linear.state_name(retro) == "Retro"

    github.set_checks(1, check_run("build", conclusion="FAILURE", url="https://ci.example/b/1"))
    github.set_checks(2, check_run("build", conclusion="FAILURE", url="https://ci.example/b/2"))
    failing = summary(reconciler.run())

    assert ("ENG-1", "resume_implementer_for_checks", "deferred") in failing, failing
    assert (retro, "resume_implementer_for_checks", "deferred") in failing, failing
    assert "worker-done" in linear.label_names("ENG-1")  # still says who is due
    assert linear.state_name("ENG-1") == "In Review"
    assert linear.state_name(retro) == "Retro"  # nothing moves while its start waits

    github.set_checks(1, check_run("build"))
    assert ("ENG-1", "transition_to_retro", "done") in summary(reconciler.run())
    assert linear.state_name("ENG-1") == "Retro"


def test_a_board_shows_what_the_pass_last_read_of_the_services_with_no_request_of_its_own(
    world: tuple[Reconciler, FakeLinear, FakeGitHub], git_repo: Path
) -> None:
    """On Linear and GitHub nothing announces a change to this machine; the daemon's pass,
    run on each of Legion's writes, reads them anyway. A board (the web view's, the TUI's)
    shows that reading while it is fresh, asking neither service, and is read again as the
    pass keeps a new one (the store moves): Legion's own changes reach an open page within a
    second of the pass that saw them. Older than `FRESH_S`, the board asks the services."""
    from legion.reconcile import last_read
    from legion.tui.sources import Board
    from legion.web.reads import MachineReads

    reconciler, linear, github = world
    env = service_env(linear, github)
    reads = MachineReads(env, git_repo)
    reconciler.run()
    asked = len(linear.requests) + len(github.requests)
    [board] = reads.boards()
    assert isinstance(board, Board), board
    assert {i.identifier for i in board.issues} == {"ENG-1", "ENG-2"}
    [reviewed] = [i for i in board.issues if i.identifier == "ENG-1"]
    assert reviewed.review == "#1 approved"  # its pull request, as the pass read it
    assert len(linear.requests) + len(github.requests) == asked  # no request of the board's
    stamp = reads.board_stamp()
    assert stamp is not None and reads.board_stamp() == stamp
    # A change on Linear, seen by the next pass (as a worker's write or a tick would run it).
    linear.add_issue("Filed by a person", state="Todo")
    reconciler.run()
    assert reads.board_stamp() != stamp  # the pass kept a new reading: read again now
    [board] = reads.boards()
    assert isinstance(board, Board) and len(board.issues) == 3
    # Stale (no daemon passes): the board asks the services itself, as before.
    with reconciler.log.db.write() as conn:
        conn.execute("UPDATE last_read SET taken_at = taken_at - ?", (last_read.FRESH_S + 1,))
    before = len(linear.requests)
    [board] = reads.boards()
    assert isinstance(board, Board) and len(linear.requests) > before
    assert reads.board_stamp() is None  # nothing here can tell: read every 15 s


def test_an_issue_page_on_a_service_is_read_again_at_once_when_the_pass_saw_it_change(
    world: tuple[Reconciler, FakeLinear, FakeGitHub], git_repo: Path
) -> None:
    """An open issue page asks the service for its part at most every `SLOW_S`, and at once
    when the daemon's pass saw the issue change (its `updated_at`): a comment Legion (or a
    person) wrote shows within a second of the pass, an unchanged issue costs nothing."""
    from legion.services.issue_view import IssuePage
    from legion.tui.projects import name_of
    from legion.web.reads import MachineReads

    reconciler, linear, github = world
    env = service_env(linear, github)
    reads = MachineReads(env, git_repo)
    name = name_of(load_project(git_repo, env=env))
    reconciler.run()
    first = reads.issue(name, "ENG-2")
    assert isinstance(first, IssuePage), first
    asked = len(linear.requests)
    assert isinstance(reads.issue(name, "ENG-2"), IssuePage)
    assert len(linear.requests) == asked  # unchanged: not asked again
    linear.add_comment("ENG-2", "Take the parser from ENG-1.", by="human")
    assert isinstance(reads.issue(name, "ENG-2"), IssuePage)
    assert len(linear.requests) == asked  # the pass has not seen it yet
    reconciler.run()
    page = reads.issue(name, "ENG-2")
    assert isinstance(page, IssuePage) and len(linear.requests) > asked
    assert [c.body for c in page.view.comments][-1] == "Take the parser from ENG-1."


def test_the_inbox_on_a_service_shows_a_question_as_soon_as_the_pass_saw_it(
    world: tuple[Reconciler, FakeLinear, FakeGitHub], git_repo: Path
) -> None:
    """A worker's question on Linear (its comment and `user-input-needed`) reaches the inbox
    once the daemon's pass has read it, with no listing of the inbox's own; a question's
    comments are asked of the service only when its issue changed since."""
    from legion.web.reads import MachineReads

    reconciler, linear, github = world
    env = service_env(linear, github)
    sources = MachineReads(env, git_repo).sources
    linear.add_label("user-input-needed")
    asking = linear.add_issue("Which parser?", state="Todo", labels=["user-input-needed"])
    linear.add_comment(asking, "## Question\n\nWhich parser should it use?", by="human")
    reconciler.run()
    first = sources.tracker_questions()
    assert [q.identifier for q in first.questions] == [asking], first
    assert first.questions[0].question.startswith("## Question"), first
    assert first.watched  # told of changes: read again when the store moves
    asked = len(linear.requests)
    again = sources.tracker_questions()
    assert again.questions == first.questions
    assert len(linear.requests) == asked  # nothing changed: neither listed nor asked again
