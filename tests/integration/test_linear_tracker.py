"""The Linear tracker against a fake Linear on 127.0.0.1 that executes the published schema."""

from __future__ import annotations

import json
import math
import stat
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from legion.config import Project
from legion.config.settings import settings_of
from legion.core.model import Status
from legion.core.statusmap import StatusMap
from legion.errors import BackendError, BackendErrorKind, ConfigError, InputError, NotFoundError
from legion.reconcile import human_answer
from legion.trackers.graphql import CACHE_TTL_S, RECHECK_S
from legion.trackers.linear.adapter import LinearTracker, open_tracker
from legion.trackers.linear.client import classify, linear_client
from legion.trackers.linear.doctor import doctor_checks
from legion.trackers.linear.documents import COMMENT_PAGE_SIZE, ISSUE_PAGE_SIZE
from tests.fakes.graphql_server import Fault
from tests.fakes.linear_server import TOKEN, FakeLinear
from tests.support.cli import LegionRunner, write_trusted_config
from tests.support.waits import wait_until


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLinear]:
    running = FakeLinear()
    with running.running():
        yield running


@pytest.fixture
def fake(server: FakeLinear) -> FakeLinear:
    server.reset()
    return server


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def env_for(fake: FakeLinear, key: str = TOKEN) -> dict[str, str]:
    return {"LINEAR_API_URL": fake.api_url, "LINEAR_API_KEY": key}


def make_tracker(
    fake: FakeLinear,
    tmp_path: Path,
    *,
    statuses: Mapping[str, Status] | None = None,
    key: str = TOKEN,
    timeout: float = 2.0,
    sleep: Callable[[float], None] | None = None,
    labels: tuple[str, ...] = (),
    clock: Callable[[], float] = time.time,
) -> LinearTracker:
    client = linear_client(
        env_for(fake, key), timeout=timeout, sleep=sleep if sleep is not None else _no_sleep
    )
    return LinearTracker(
        client,
        team_key="ENG",
        statuses=StatusMap(dict(statuses or {})),
        extra_labels=labels,
        cache_path=tmp_path / "state" / "linear-team-ENG.json",
        clock=clock,
    )


def _no_sleep(seconds: float) -> None:
    return None


def ops(fake: FakeLinear) -> list[str | None]:
    return fake.operations()


# -- reading -------------------------------------------------------------------------------------


def test_lists_every_active_issue_over_pages_with_one_request_per_page(
    fake: FakeLinear, tmp_path: Path
) -> None:
    states = ["Todo", "In Progress", "In Review", "Backlog", "Done"]
    for n in range(263):
        fake.add_issue(f"issue {n}", state=states[n % len(states)])
    for n in range(12):
        fake.add_issue(f"not Legion's {n}", state="Canceled" if n % 2 else "Duplicate")
    fake.add_issue("another team's", team="OPS")
    tracker = make_tracker(fake, tmp_path)
    tracker.team()  # the team's states and labels, cached
    fake.requests.clear()

    issues = tracker.list_issues()

    assert len(issues) == 263
    assert ops(fake) == ["LinearIssues"] * math.ceil(263 / ISSUE_PAGE_SIZE)
    assert [issue.identifier for issue in issues[:3]] == ["ENG-1", "ENG-2", "ENG-3"]
    assert issues[-1].identifier == "ENG-263"
    assert {issue.status for issue in issues} == {
        Status.TODO,
        Status.IN_PROGRESS,
        Status.NEEDS_REVIEW,
        Status.BACKLOG,
        Status.DONE,
    }
    first = issues[0]
    record = fake.issue("ENG-1")
    assert (first.id, first.url, first.backend_status) == (record["id"], record["url"], "Todo")
    assert first.created_at == record["createdAt"]
    # The filter went to the server: the team, and only the states Legion has a status for.
    sent = fake.requests[0].variables["filter"]
    assert sent["team"] == {"id": {"eq": fake.eng["id"]}}
    names = {fake.states[i]["name"] for i in sent["state"]["id"]["in"]}
    assert names == {"Triage", "Backlog", "Todo", "In Progress", "In Review", "Done"}


def test_list_by_status_and_label_filter_on_the_server(fake: FakeLinear, tmp_path: Path) -> None:
    fake.add_label("worker-done")
    fake.add_issue("a", state="In Progress", labels=["worker-done"])
    fake.add_issue("b", state="In Progress")
    fake.add_issue("c", state="Todo", labels=["worker-done"])
    tracker = make_tracker(fake, tmp_path)

    in_progress = tracker.list_issues(status=Status.IN_PROGRESS)
    assert [i.identifier for i in in_progress] == ["ENG-1", "ENG-2"]
    done_label = tracker.list_issues(label="Worker-Done")
    assert [i.identifier for i in done_label] == ["ENG-1", "ENG-3"]
    assert all("worker-done" in i.labels for i in done_label)
    both = tracker.list_issues(status=Status.TODO, label="worker-done")
    assert [i.identifier for i in both] == ["ENG-3"]
    with pytest.raises(InputError, match="unknown label"):
        tracker.list_issues(label="no-such-label")


def test_issue_has_parent_children_labels_and_body(fake: FakeLinear, tmp_path: Path) -> None:
    parent = fake.add_issue("parent", description="the plan", labels=["bug", "frontend"])
    child_a = fake.add_issue("child a", parent=parent)
    child_b = fake.add_issue("child b", parent=parent, state="Canceled")
    tracker = make_tracker(fake, tmp_path)

    issue = tracker.get_issue(parent.lower())
    assert issue.body == "the plan"
    assert issue.labels == frozenset({"bug", "frontend"})
    assert issue.children == (child_a, child_b)
    assert tracker.get_issue(child_a).parent == parent
    assert tracker.get_issue(child_a).body == ""


def test_pull_request_attachments_are_the_issues_links(fake: FakeLinear, tmp_path: Path) -> None:
    linked = fake.add_issue("fixed by a PR on another branch")
    plain = fake.add_issue("nothing attached")
    pr = "https://github.com/acme/widgets/pull/12"
    fake.add_attachment(linked, "https://acme.slack.com/archives/C1/p1")  # not a pull request
    fake.add_attachment(linked, pr, title="Fixes ENG-1")
    fake.add_attachment(linked, "https://github.com/acme/widgets/pull/7/")
    fake.add_attachment(linked, "https://github.com/acme/widgets/issues/3")
    fake.add_attachment(linked, pr)  # attached again: still one link
    tracker = make_tracker(fake, tmp_path)

    expected = (pr, "https://github.com/acme/widgets/pull/7/")
    assert tracker.get_issue(linked).links == expected
    assert tracker.get_issue(plain).links == ()
    by_identifier = {issue.identifier: issue for issue in tracker.list_issues()}
    assert by_identifier[linked].links == expected
    assert by_identifier[plain].links == ()
    # Written back, an issue keeps its links: every document reads them.
    assert tracker.set_status(linked, Status.IN_PROGRESS).links == expected


def test_status_mapping_alias_table_and_unmapped(fake: FakeLinear, tmp_path: Path) -> None:
    fake.add_state("Parked", "backlog")
    review = fake.add_issue("in review", state="In Review")
    parked = fake.add_issue("parked", state="Parked")
    canceled = fake.add_issue("canceled", state="Canceled")
    tracker = make_tracker(fake, tmp_path, statuses={"Parked": Status.ICEBOX})

    assert tracker.get_issue(review).status is Status.NEEDS_REVIEW
    assert tracker.get_issue(review).backend_status == "In Review"
    assert tracker.get_issue(parked).status is Status.ICEBOX
    listed = {i.identifier: i.status for i in tracker.list_issues()}
    assert listed == {review: Status.NEEDS_REVIEW, parked: Status.ICEBOX}
    with pytest.raises(NotFoundError, match="'Canceled', which is not Legion's"):
        tracker.get_issue(canceled)

    moved = tracker.set_status(canceled, Status.ICEBOX)  # a person's issue brought back
    assert (moved.status, moved.backend_status) == (Status.ICEBOX, "Parked")
    assert tracker.set_status(review, Status.DONE).backend_status == "Done"
    assert fake.state_name(review) == "Done"

    fake.requests.clear()
    with pytest.raises(ConfigError) as caught:
        tracker.set_status(review, Status.RETRO)
    message = str(caught.value)
    assert "'Retro'" in message and "[statuses]" in message and "\n" not in message
    assert fake.state_name(review) == "Done"
    assert "LinearIssueUpdate" not in ops(fake)


def test_set_status_is_idempotent_and_finds_a_state_added_later(
    fake: FakeLinear, tmp_path: Path
) -> None:
    clock = Clock()
    issue = fake.add_issue("x", state="In Review")
    tracker = make_tracker(fake, tmp_path, clock=clock)
    tracker.team()
    fake.requests.clear()
    assert tracker.set_status(issue, Status.NEEDS_REVIEW).backend_status == "In Review"
    assert ops(fake) == ["LinearIssue"]  # already there: nothing written

    fake.add_state("Retro", "started")
    clock.now += RECHECK_S + 1  # the cache is young, but a missing state refetches it
    moved = tracker.set_status(issue, Status.RETRO)
    assert (moved.status, fake.state_name(issue)) == (Status.RETRO, "Retro")
    assert ops(fake).count("LinearTeam") == 1


def test_the_team_cache_is_a_private_file_shared_between_runs(
    fake: FakeLinear, tmp_path: Path
) -> None:
    clock = Clock()
    fake.add_issue("x")
    make_tracker(fake, tmp_path, clock=clock).list_issues()
    assert ops(fake) == ["LinearTeam", "LinearLabels", "LinearIssues"]
    cache = tmp_path / "state" / "linear-team-ENG.json"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    assert json.loads(cache.read_text())["key"] == "ENG"
    assert TOKEN not in cache.read_text()

    fake.requests.clear()
    make_tracker(fake, tmp_path, clock=clock).list_issues()  # another process
    assert ops(fake) == ["LinearIssues"]

    fake.requests.clear()
    clock.now += CACHE_TTL_S + 1
    make_tracker(fake, tmp_path, clock=clock).list_issues()
    assert ops(fake) == ["LinearTeam", "LinearLabels", "LinearIssues"]

    cache.write_text("{not json")
    fake.requests.clear()
    make_tracker(fake, tmp_path, clock=clock).list_issues()
    assert ops(fake)[:2] == ["LinearTeam", "LinearLabels"]


def test_unknown_issues_are_not_found(fake: FakeLinear, tmp_path: Path) -> None:
    fake.add_issue("x")
    elsewhere = fake.add_issue("theirs", team="OPS")
    tracker = make_tracker(fake, tmp_path)
    for call in (
        lambda: tracker.get_issue("ENG-99"),
        lambda: tracker.set_status("ENG-99", Status.DONE),
        lambda: tracker.update_labels("ENG-99", add=["worker-done"]),
        lambda: tracker.add_comment("ENG-99", "hi", author="me"),
        lambda: tracker.list_comments("ENG-99"),
        lambda: tracker.create_issue("child", parent="ENG-99"),
    ):
        with pytest.raises(NotFoundError, match="no issue ENG-99"):
            call()
    with pytest.raises(NotFoundError, match="team OPS"):
        tracker.get_issue(elsewhere)
    with pytest.raises(InputError, match="invalid issue identifier"):
        tracker.get_issue("not an identifier")


# -- writing -------------------------------------------------------------------------------------


def test_labels_are_added_and_removed_keeping_the_others(fake: FakeLinear, tmp_path: Path) -> None:
    issue = fake.add_issue("x", labels=["bug", "frontend"])  # set by a person
    other = fake.add_issue("y")
    tracker = make_tracker(fake, tmp_path)

    added = tracker.update_labels(issue, add=["worker-active", "user-input-needed"])
    assert added.labels == {"bug", "frontend", "worker-active", "user-input-needed"}
    assert fake.label_names(issue) == {"bug", "frontend", "worker-active", "user-input-needed"}
    update = next(r for r in fake.requests if r.operation == "LinearIssueUpdate")
    assert set(update.variables["input"]) == {"addedLabelIds"}  # never the whole list

    tracker.update_labels(other, add=["worker-active"])
    assert ops(fake).count("LinearLabelCreate") == 2  # each missing label created once
    created = [label for label in fake.labels.values() if label["name"] == "worker-active"]
    assert len(created) == 1 and created[0]["team_id"] == fake.eng["id"]

    fake.requests.clear()
    removed = tracker.update_labels(issue, remove=["worker-active"], add=["worker-done"])
    assert removed.labels == {"bug", "frontend", "user-input-needed", "worker-done"}
    assert fake.label_names(issue) == removed.labels

    fake.requests.clear()
    same = tracker.update_labels(issue, add=["worker-done"], remove=["worker-active"])
    assert same.labels == removed.labels
    assert ops(fake) == ["LinearIssue"]  # nothing to change: nothing written

    # A fresh tracker (another process) reuses the label it created, through the cache.
    make_tracker(fake, tmp_path).update_labels(other, add=["worker-done"])
    assert [label["name"] for label in fake.labels.values()].count("worker-done") == 1


def test_a_label_already_on_linear_is_used_in_any_case(fake: FakeLinear, tmp_path: Path) -> None:
    fake.add_label("Worker-Done", team=None)  # a workspace label a person made
    issue = fake.add_issue("x")
    tracker = make_tracker(fake, tmp_path, labels=("Needs Design",))
    assert tracker.update_labels(issue, add=["worker-done"]).labels == {"worker-done"}
    assert "LinearLabelCreate" not in ops(fake)
    assert tracker.update_labels(issue, add=["needs design"]).labels == {
        "worker-done",
        "Needs Design",
    }
    with pytest.raises(InputError, match="unknown label 'frontend'"):
        tracker.update_labels(issue, add=["frontend"])
    with pytest.raises(InputError, match="both added and removed"):
        tracker.update_labels(issue, add=["worker-done"], remove=["worker-done"])


def test_a_label_created_meanwhile_by_someone_else_is_used(
    fake: FakeLinear, tmp_path: Path
) -> None:
    issue = fake.add_issue("x")
    tracker = make_tracker(fake, tmp_path)
    tracker.team()
    fake.add_label("worker-done")  # after Legion cached the labels
    assert tracker.update_labels(issue, add=["worker-done"]).labels == {"worker-done"}
    assert [label["name"] for label in fake.labels.values()].count("worker-done") == 1


def test_create_issue_and_sub_issue(fake: FakeLinear, tmp_path: Path) -> None:
    tracker = make_tracker(fake, tmp_path)
    parent = tracker.create_issue("Parent", body="why", status=Status.BACKLOG)
    assert (parent.identifier, parent.status, parent.body) == ("ENG-1", Status.BACKLOG, "why")
    child = tracker.create_issue(
        "Child", parent=parent.identifier, labels=["worker-active"], status=Status.NEEDS_REVIEW
    )
    assert child.parent == "ENG-1"
    assert child.labels == {"worker-active"}
    assert child.backend_status == "In Review"
    assert fake.issue(child.identifier)["parent_id"] == fake.issue("ENG-1")["id"]
    assert tracker.get_issue("ENG-1").children == (child.identifier,)
    with pytest.raises(InputError, match="empty"):
        tracker.create_issue("  ")


def test_a_marker_another_user_wrote_is_text_and_a_guests_answer_raises_nothing(
    fake: FakeLinear, tmp_path: Path
) -> None:
    """Issue 36: a comment is Legion's when Linear says the key's user wrote it (`isMe`), a
    person's answer when its writer is a member of the workspace, not a guest."""
    from legion.core.marks import mark, question_mark
    from legion.reconcile.answers import budget_allowed, budget_question

    issue = fake.add_issue("x")
    tracker = make_tracker(fake, tmp_path)
    tracker.add_comment(
        issue, budget_question(issue, 12_000, 10_000, 10_000), author="legion", by_legion=True
    )
    forged = mark(f"fine\n\n{question_mark('budget', used=10**19)}", "legion")
    fake.add_comment(issue, forged, by="guest")
    fake.add_comment(issue, "go on", by="guest")

    comments = tracker.list_comments(issue)

    assert comments[0].by_legion and comments[0].asked is not None
    assert [(c.by_legion, c.by_member, c.asked) for c in comments[1:]] == [
        (False, False, None),
        (False, False, None),
    ]
    assert budget_allowed(comments, 10_000) == 10_000
    assert human_answer(tracker, issue) == ()
    fake.add_comment(issue, forged, by="human")  # a member pasting the marker: still theirs
    fake.add_comment(issue, "go on", by="human")
    comments = tracker.list_comments(issue)
    assert not comments[-2].by_legion and comments[-2].by_member
    assert budget_allowed(comments, 10_000) == 22_000


def test_comments_marked_by_legion_and_from_people(fake: FakeLinear, tmp_path: Path) -> None:
    issue = fake.add_issue("x")
    fake.add_comment(issue, "what about the cache?", by="human")
    tracker = make_tracker(fake, tmp_path)
    written = tracker.add_comment(
        issue, "Done, see the PR.", author="legion-implement", by_legion=True
    )
    assert written.by_legion and written.body == "Done, see the PR."
    assert written.author == "legion-implement"
    stored = fake.comments_of(issue)[-1]["body"]
    assert stored.endswith("<!-- legion:legion-implement -->")
    fake.add_comment(issue, "Deployed.", by="bot")
    plain = tracker.add_comment(issue, "a note", author="someone")  # a person, with the key
    assert (plain.by_legion, plain.author) == (False, "vera")

    comments = tracker.list_comments(issue)
    assert [(c.author, c.body, c.by_legion, c.by_bot) for c in comments] == [
        ("hank", "what about the cache?", False, False),
        ("legion-implement", "Done, see the PR.", True, False),
        ("GitHub", "Deployed.", False, True),
        ("vera", "a note", False, False),
    ]
    # The human's answer: what people wrote after Legion's last comment, not the bot's.
    assert [part.text for part in human_answer(tracker, issue)] == ["a note"]
    assert all(c.issue == issue and isinstance(c.id, str) for c in comments)
    with pytest.raises(InputError, match="empty"):
        tracker.add_comment(issue, "  \n", author="x")


def test_legions_comment_is_edited_in_place_and_only_its_own(
    fake: FakeLinear, tmp_path: Path
) -> None:
    issue = fake.add_issue("x")
    tracker = make_tracker(fake, tmp_path)
    written = tracker.add_comment(issue, "- [ ] one", author="legion", by_legion=True)
    edited = tracker.edit_comment(issue, written.id, "- [x] one", author="legion")
    assert (edited.id, edited.body, edited.by_legion) == (written.id, "- [x] one", True)
    assert [c.body for c in tracker.list_comments(issue)] == ["- [x] one"]
    assert fake.comments_of(issue)[-1]["body"].endswith("<!-- legion:legion -->")
    # Checked before the edit: a person's comment (even one the key's account wrote without
    # Legion's marker), another issue's, or one a person deleted is never edited.
    theirs = fake.add_comment(issue, "mine", by="human")
    unmarked = tracker.add_comment(issue, "a person with the key", author="vera")
    other = fake.add_issue("y")
    on_other = tracker.add_comment(other, "list", author="legion", by_legion=True)
    for comment_id in (theirs["id"], unmarked.id, on_other.id):
        with pytest.raises(NotFoundError, match=f"no comment of Legion's to edit on {issue}"):
            tracker.edit_comment(issue, comment_id, "overwritten", author="legion")
    assert [c["body"] for c in fake.comments_of(issue)][1:] == ["mine", "a person with the key"]
    assert fake.comments_of(other)[-1]["body"].startswith("list")
    fake.delete_comment(written.id)  # type: ignore[arg-type]
    with pytest.raises(NotFoundError, match=f"no comment {written.id} on {issue}"):
        tracker.edit_comment(issue, written.id, "- [x] two", author="legion")


def test_comments_are_read_over_pages(fake: FakeLinear, tmp_path: Path) -> None:
    issue = fake.add_issue("x")
    for n in range(COMMENT_PAGE_SIZE + 30):
        fake.add_comment(issue, f"comment {n}")
    tracker = make_tracker(fake, tmp_path)
    comments = tracker.list_comments(issue)
    assert len(comments) == COMMENT_PAGE_SIZE + 30
    assert comments[-1].body == f"comment {COMMENT_PAGE_SIZE + 29}"
    assert ops(fake).count("LinearComments") == 2


def test_viewer_is_asked_once(fake: FakeLinear, tmp_path: Path) -> None:
    tracker = make_tracker(fake, tmp_path)
    assert tracker.viewer_id == fake.viewer["id"]
    assert tracker.viewer_id == fake.viewer["id"]
    assert ops(fake) == ["LinearViewer"]


# -- failures ------------------------------------------------------------------------------------

RATE_LIMITED = [
    {
        "message": "Rate limit exceeded",
        "extensions": {"code": "RATELIMITED", "type": "ratelimited", "userError": True},
    }
]


@pytest.mark.parametrize("status", [429, 400])
def test_a_rate_limit_is_waited_out_then_retried(
    fake: FakeLinear, tmp_path: Path, status: int
) -> None:
    fake.add_issue("x")
    slept: list[float] = []
    tracker = make_tracker(fake, tmp_path, sleep=slept.append)
    tracker.team()
    reset_ms = int((time.time() + 1.0) * 1000)  # the sleep is recorded, not slept
    fake.fail_next(
        Fault(
            status=status,
            errors=RATE_LIMITED,
            headers={"X-RateLimit-Requests-Reset": str(reset_ms)},
            operation="LinearIssues",
        )
    )
    fake.requests.clear()
    assert [i.identifier for i in tracker.list_issues()] == ["ENG-1"]
    assert len(slept) == 1 and 0 < slept[0] <= 1.0
    assert [(r.operation, r.status) for r in fake.requests] == [
        ("LinearIssues", status),
        ("LinearIssues", 200),
    ]


def test_a_long_rate_limit_is_reported_not_waited(fake: FakeLinear, tmp_path: Path) -> None:
    slept: list[float] = []
    tracker = make_tracker(fake, tmp_path, sleep=slept.append)
    fake.fail_next(Fault(status=429, errors=RATE_LIMITED, headers={"Retry-After": "3600"}))
    with pytest.raises(BackendError) as caught:
        tracker.team()
    assert caught.value.kind is BackendErrorKind.RATE_LIMITED
    assert caught.value.retry_after == pytest.approx(3600)
    assert slept == []


def test_a_server_error_is_retried_then_transient(fake: FakeLinear, tmp_path: Path) -> None:
    fake.add_issue("x")
    tracker = make_tracker(fake, tmp_path)
    fake.fail_next(Fault(status=500, body=b"oops"))
    assert tracker.get_issue("ENG-1").title == "x"
    fake.fail_next(*[Fault(status=502, body=b"bad gateway") for _ in range(3)])
    with pytest.raises(BackendError) as caught:
        tracker.get_issue("ENG-1")
    assert caught.value.kind is BackendErrorKind.TRANSIENT
    assert "HTTP 502" in str(caught.value)


def test_a_timeout_is_transient(fake: FakeLinear, tmp_path: Path) -> None:
    tracker = make_tracker(fake, tmp_path, timeout=0.1)
    # Answers far past the timeout: a client held up by a loaded machine still gives up.
    fake.fail_next(*[Fault(delay=5.0, operation="LinearTeam") for _ in range(3)])
    started = time.monotonic()
    with pytest.raises(BackendError) as caught:
        tracker.team()
    assert caught.value.kind is BackendErrorKind.TRANSIENT
    assert "no answer within 0.1 s" in str(caught.value)
    assert time.monotonic() - started < 10.0  # not the 15 s of three answers


def test_malformed_json_is_transient(fake: FakeLinear, tmp_path: Path) -> None:
    tracker = make_tracker(fake, tmp_path)
    fake.fail_next(*[Fault(status=200, body=b"{not json") for _ in range(3)])
    with pytest.raises(BackendError) as caught:
        tracker.viewer()
    assert caught.value.kind is BackendErrorKind.TRANSIENT
    assert "not JSON" in str(caught.value)


@pytest.mark.parametrize("fault", [None, Fault(status=401, body=b'{"message": "expired"}')])
def test_a_refused_key_is_auth_and_never_shown(
    fake: FakeLinear, tmp_path: Path, fault: Fault | None
) -> None:
    secret = "lin_api_" + uuid.uuid4().hex
    tracker = make_tracker(fake, tmp_path, key=secret)
    if fault is not None:
        fake.fail_next(fault)
    with pytest.raises(BackendError) as caught:
        tracker.list_issues()
    message = str(caught.value)
    assert caught.value.kind is BackendErrorKind.AUTH
    assert secret not in message and secret not in repr(caught.value)
    assert "\n" not in message and "legion doctor" in message
    assert len(fake.requests) == 1  # not retried


def test_a_lost_answer_to_a_create_does_not_write_twice(fake: FakeLinear, tmp_path: Path) -> None:
    issue = fake.add_issue("x")

    # The first try lands but its answer comes after the client gave up; the retry, once it
    # has landed, is refused as a duplicate; the comment is then found by the id Legion chose.
    def until_served(_seconds: float) -> None:
        wait_until("the first try served", lambda: all(r.status for r in fake.requests))

    # Time enough for every other answer on a loaded machine, not for the lost ones.
    tracker = make_tracker(fake, tmp_path, timeout=0.5, sleep=until_served)
    fake.fail_next(Fault(delay=2.0, operation="LinearCommentCreate"))
    comment = tracker.add_comment(issue, "once", author="legion", by_legion=True)
    assert comment.body == "once" and comment.by_legion
    assert len(fake.comments_of(issue)) == 1
    assert ops(fake)[-3:] == ["LinearCommentCreate", "LinearCommentCreate", "LinearComment"]

    fake.fail_next(Fault(delay=2.0, operation="LinearIssueCreate"))
    created = tracker.create_issue("only one")
    assert [i["title"] for i in fake.issues.values()].count("only one") == 1
    assert created.identifier == "ENG-2"


def test_classify_reads_linears_codes_and_types() -> None:
    assert classify({"extensions": {"code": "RATELIMITED"}}) is BackendErrorKind.RATE_LIMITED
    assert classify({"extensions": {"code": "AUTHENTICATION_ERROR"}}) is BackendErrorKind.AUTH
    assert classify({"extensions": {"code": "FORBIDDEN"}}) is BackendErrorKind.AUTH
    assert (
        classify({"message": "Entity not found: Issue", "extensions": {"code": "INPUT_ERROR"}})
        is BackendErrorKind.NOT_FOUND
    )
    assert classify({"extensions": {"code": "INVALID_INPUT"}}) is BackendErrorKind.INVALID
    assert classify({"extensions": {"type": "authentication error"}}) is BackendErrorKind.AUTH
    assert classify({"extensions": {"type": "internal error"}}) is BackendErrorKind.TRANSIENT
    assert classify({"message": "something else"}) is None


# -- opening and doctor --------------------------------------------------------------------------


def linear_project(tmp_path: Path, env: Mapping[str, str], **settings: Any) -> Project:
    values: dict[str, Any] = {
        "project_id": str(uuid.uuid4()),
        "tracker": "linear",
        "linear_team": "ENG",
        "state_dir": tmp_path / "state",
    }
    values.update(settings)
    return Project(root=tmp_path, settings=settings_of(values), env=dict(env))


def test_open_tracker_reads_the_project(fake: FakeLinear, tmp_path: Path) -> None:
    fake.add_issue("x", state="Triage")
    project = linear_project(tmp_path, env_for(fake), statuses={"Triage": Status.ICEBOX})
    tracker = open_tracker(project, None)
    assert [(i.identifier, i.status) for i in tracker.list_issues()] == [("ENG-1", Status.ICEBOX)]
    assert (tmp_path / "state" / "linear-team-ENG.json").is_file()

    with pytest.raises(ConfigError, match="LINEAR_API_KEY is not set"):
        open_tracker(linear_project(tmp_path, {"LINEAR_API_URL": fake.api_url}), None)
    with pytest.raises(ConfigError, match="linear_team"):
        open_tracker(linear_project(tmp_path, env_for(fake), linear_team=None), None)
    with pytest.raises(ConfigError, match="no Linear team with the key 'NOPE'"):
        open_tracker(linear_project(tmp_path, env_for(fake), linear_team="NOPE"), None).team()


def test_doctor_checks(fake: FakeLinear, tmp_path: Path) -> None:
    fake.reset(retro_state=False)  # Linear's default team: no state for Retro
    project = linear_project(tmp_path, env_for(fake))
    checks = {name: (ok, detail) for name, ok, detail in doctor_checks(project)}
    assert checks["Linear API key"][0] and checks["Linear API"][0]
    assert "vera" in checks["Linear API"][1]
    assert checks["Linear team"] == (True, "ENG (Engineering)")
    ok, detail = checks["Linear statuses"]
    assert not ok and "Retro" in detail and "not Legion's: Canceled, Duplicate" in detail
    assert "Icebox" not in detail  # a person's status: a team without it is fine
    assert "worker-done" in checks["Linear labels"][1]

    mapped = linear_project(tmp_path, env_for(fake), statuses={"Duplicate": Status.RETRO})
    checks = {name: (ok, detail) for name, ok, detail in doctor_checks(mapped)}
    ok, detail = checks["Linear statuses"]
    assert ok and "In Review = Needs Review" in detail and "Canceled" in detail

    secret = "lin_api_" + uuid.uuid4().hex
    refused = doctor_checks(linear_project(tmp_path, env_for(fake, secret)))
    assert [(name, ok) for name, ok, _ in refused] == [
        ("Linear API key", True),
        ("Linear API", False),
    ]
    assert secret not in refused[-1][2] and "authenticat" in refused[-1][2].lower()

    missing = doctor_checks(linear_project(tmp_path, {}))
    assert [(name, ok) for name, ok, _ in missing] == [("Linear API key", False)]


def test_cli_lists_linear_issues(fake: FakeLinear, legion: LegionRunner, project: Path) -> None:
    fake.add_issue("From Linear", state="In Review", labels=["bug"])
    fake.add_issue("Not Legion's", state="Canceled")
    config = project / ".legion" / "config.toml"
    text = config.read_text().replace('tracker = "embedded"', 'tracker = "linear"')
    write_trusted_config(project, text + 'linear_team = "ENG"\n')
    result = legion("issue", "list", "--json", env=env_for(fake))
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    assert [(i["identifier"], i["status"], i["labels"]) for i in listed] == [
        ("ENG-1", "Needs Review", ["bug"])
    ]
    refused = legion("issue", "list", env={**env_for(fake), "LINEAR_API_KEY": "lin_api_nope"})
    assert refused.returncode != 0
    assert "lin_api_nope" not in refused.stderr and "legion doctor" in refused.stderr


# -- blocked by ----------------------------------------------------------------------------------


def test_blockers_are_read_with_the_issues_in_the_same_requests(
    fake: FakeLinear, tmp_path: Path
) -> None:
    schema = fake.add_issue("schema")
    parser = fake.add_issue("parser")
    wiring = fake.add_issue("wiring")
    fake.add_relation(schema, wiring)  # schema blocks wiring
    fake.add_relation(parser, wiring)
    fake.add_relation(wiring, schema, kind="related")  # not a blocker
    tracker = make_tracker(fake, tmp_path)
    tracker.team()
    fake.requests.clear()
    issues = {issue.identifier: issue for issue in tracker.list_issues()}
    assert ops(fake) == ["LinearIssues"]
    assert issues[wiring].blocked_by == (schema, parser)
    assert issues[schema].blocked_by == () and issues[parser].blocked_by == ()
    assert tracker.get_issue(wiring).blocked_by == (schema, parser)


def test_blockers_are_written_as_blocks_relations(fake: FakeLinear, tmp_path: Path) -> None:
    one, two, three = (fake.add_issue(title) for title in ("one", "two", "three"))
    tracker = make_tracker(fake, tmp_path)
    assert tracker.set_blocked_by(three, add=[one, two.lower()]).blocked_by == (one, two)
    assert fake.blockers(three) == {one, two}
    [relation] = [r for r in fake.relations.values() if r["issue_id"] == fake.issue(one)["id"]]
    assert (relation["type"], relation["related_issue_id"]) == ("blocks", fake.issue(three)["id"])
    fake.requests.clear()
    assert tracker.set_blocked_by(three, add=[one]).blocked_by == (one, two)  # a no-op
    assert "LinearIssueRelationCreate" not in ops(fake)
    assert tracker.set_blocked_by(three, remove=[one]).blocked_by == (two,)
    assert fake.blockers(three) == {two}
    assert "LinearIssueRelationDelete" in ops(fake)

    created = tracker.create_issue("four", blocked_by=[three])
    assert created.blocked_by == (three,)
    assert fake.blockers(created.identifier) == {three}


def test_bad_blockers_are_refused_before_anything_is_written(
    fake: FakeLinear, tmp_path: Path
) -> None:
    one, two = fake.add_issue("one"), fake.add_issue("two")
    other_team = fake.add_issue("ops", team="OPS")
    tracker = make_tracker(fake, tmp_path)
    tracker.set_blocked_by(two, add=[one])
    with pytest.raises(InputError, match="blocked by itself"):
        tracker.set_blocked_by(one, add=[one])
    with pytest.raises(InputError, match="would make a cycle"):
        tracker.set_blocked_by(one, add=[two])
    with pytest.raises(InputError, match="no issue ENG-99 in team ENG to block"):
        tracker.set_blocked_by(one, add=["ENG-99"])
    with pytest.raises(InputError, match=f"no issue {other_team} in team ENG"):
        tracker.set_blocked_by(one, add=[other_team])
    with pytest.raises(InputError, match="no issue ENG-99"):
        tracker.create_issue("never", blocked_by=["ENG-99"])
    assert len(fake.relations) == 1 and len(fake.issues) == 3


def test_an_issue_with_ten_thousand_comments_is_read_from_its_end(
    fake: FakeLinear, tmp_path: Path
) -> None:
    """Issue 36: a look at an issue (a person's answer, a budget's reply) reads its latest
    comments in one request, however many it holds; a longer read pages back from the end."""
    issue = fake.add_issue("x")
    tracker = make_tracker(fake, tmp_path)
    for n in range(10_000):
        fake.add_comment(issue, f"noise {n}", by="guest")
    tracker.add_comment(issue, "Which database?", author="legion", by_legion=True)
    fake.add_comment(issue, "Postgres.", by="human")
    fake.requests.clear()

    assert [(part.text, part.author) for part in human_answer(tracker, issue)] == [
        ("Postgres.", "hank")
    ]
    assert len(fake.requests) == 1
    latest = tracker.list_comments(issue, newest=250)
    assert [c.body for c in latest[:2]] == ["noise 9752", "noise 9753"]
    assert [c.body for c in latest[-2:]] == ["Which database?", "Postgres."]
    assert len(latest) == 250 and len(fake.requests) == 1 + math.ceil(250 / COMMENT_PAGE_SIZE)
    # Strangers bury the answer under 150 comments: the look reaches back to Legion's question.
    for n in range(150):
        fake.add_comment(issue, f"flood {n}", by="guest")
    fake.requests.clear()
    assert [part.text for part in human_answer(tracker, issue)] == ["Postgres."]
    assert len(fake.requests) == 1 + math.ceil(1000 / COMMENT_PAGE_SIZE)


def test_edit_issue_sets_title_and_description_and_writes_nothing_unchanged(
    fake: FakeLinear, tmp_path: Path
) -> None:
    issue = fake.add_issue("Old title", description="Old body")
    tracker = make_tracker(fake, tmp_path)
    edited = tracker.edit_issue(issue, title="New title")
    assert (edited.title, edited.body) == ("New title", "Old body")
    edited = tracker.edit_issue(issue, body="New body")
    assert (edited.title, edited.body) == ("New title", "New body")
    fake.requests.clear()
    assert tracker.edit_issue(issue, title="New title").title == "New title"
    assert "LinearIssueUpdate" not in ops(fake)
    with pytest.raises(InputError):
        tracker.edit_issue(issue, title="  ")
