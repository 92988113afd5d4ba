"""The roles (`legion.core.roles`), row by row: which worker mode may make which pull-request
call on its own issue."""

from __future__ import annotations

import pytest

from legion.core.model import Mode
from legion.core.roles import PR_ROLES, controller_refusal, refusal

ALLOWED = {
    ("implement", "create_pr"),
    ("finish", "set_draft"),
    ("review", "add_review"),
    ("finish", "merge"),
}


@pytest.mark.parametrize("mode", [m.value for m in Mode] + ["", "controller", "REVIEW"])
@pytest.mark.parametrize("operation", sorted(PR_ROLES))
def test_each_mode_may_make_only_its_roles_calls(mode: str, operation: str) -> None:
    why = refusal(mode, operation)
    if (mode, operation) in ALLOWED:
        assert why is None
    else:
        who = mode or "worker"
        article = "an" if who[:1].lower() in "aeiou" else "a"
        assert why is not None and why.startswith(f"{article} {who} session may not")


def test_an_operation_that_is_not_a_roles_is_not_refused_here() -> None:
    assert refusal("plan", "get_pr") is None


def test_the_controller_opens_and_readies_but_neither_reviews_nor_merges() -> None:
    assert controller_refusal("create_pr") is None and controller_refusal("set_draft") is None
    for operation in ("add_review", "merge"):
        why = controller_refusal(operation)
        assert why is not None and why.startswith("the controller may not")
    assert controller_refusal("get_pr") is None


# -- the tracker's writes (issue 36): statuses, labels, new issues -----------------------------

from legion.core.model import Label, Status  # noqa: E402
from legion.core.roles import (  # noqa: E402
    CONTROLLER,
    creation_refusal,
    label_refusal,
    status_refusal,
)

WHO = [m.value for m in Mode] + [CONTROLLER, ""]
STATUS_ALLOWED = {
    ("finish", Status.DONE),
    ("finish", Status.NEEDS_REVIEW),
    *(
        (CONTROLLER, s)
        for s in (Status.TRIAGE, Status.ICEBOX, Status.BACKLOG, Status.TODO, Status.IN_PROGRESS)
    ),
}


@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize("status", list(Status))
def test_each_session_sets_only_its_statuses(who: str, status: Status) -> None:
    why = status_refusal(who, status)
    assert (why is None) == ((who, status) in STATUS_ALLOWED), why


@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize("status", list(Status))
def test_no_session_reopens_a_done_issue(who: str, status: Status) -> None:
    why = status_refusal(who, status, Status.DONE)
    if status is Status.DONE:
        assert (why is None) == ((who, status) in STATUS_ALLOWED), why
    else:
        assert why is not None and "may not reopen a Done issue" in why


ADDS = {**{m.value: {"worker-done", "user-input-needed"} for m in Mode}}
ADDS[CONTROLLER] = {"user-input-needed"}
REMOVES = {**{m.value: {"worker-active", "worker-done"} for m in Mode}}
# `user-feedback-given` only where the answer is its own to act on (below).
REMOVES[CONTROLLER] = {label.value for label in Label} - {"user-feedback-given"}


@pytest.mark.parametrize("who", WHO)
@pytest.mark.parametrize("label", [label.value for label in Label] + ["frontend"])
def test_each_session_puts_on_and_takes_off_only_its_labels(who: str, label: str) -> None:
    answered = frozenset({"user-feedback-given"})
    added = label_refusal(who, frozenset({label}), frozenset(), answered)
    removed = label_refusal(who, frozenset(), frozenset({label}), answered)
    own = label == "frontend"  # the project's own label: anyone's
    assert (added is None) == (own or label in ADDS.get(who, set())), added
    assert (removed is None) == (own or label in REMOVES.get(who, set())), removed


def test_the_controller_answers_nothing_that_waits_for_a_person() -> None:
    waiting = frozenset({"user-input-needed"})
    why = label_refusal(CONTROLLER, frozenset(), waiting, waiting)
    assert why is not None and "before a person answered" in why
    assert label_refusal(CONTROLLER, frozenset({"user-feedback-given"}), frozenset(), waiting)


@pytest.mark.parametrize("status", list(Status))
def test_the_controller_takes_an_answer_off_only_where_no_worker_waits_for_it(
    status: Status,
) -> None:
    """Else it could take the labels off a worker's issue and answer in the person's place."""
    answered = frozenset({"user-input-needed", "user-feedback-given"})
    why = label_refusal(CONTROLLER, frozenset(), answered, answered, status)
    mine = status in (Status.TRIAGE, Status.ICEBOX, Status.DONE)
    assert (why is None) == mine, why
    assert (
        label_refusal(CONTROLLER, frozenset(), frozenset({"user-input-needed"}), answered, status)
        is None
    )


def create(who: str, **kwargs: object) -> str | None:
    asked: dict[str, object] = {
        "parent": None, "own": "LEG-2", "status": Status.TRIAGE, "labels": frozenset(),
        "created": 0,
    }  # fmt: skip
    asked.update(kwargs)
    return creation_refusal(who, **asked)  # type: ignore[arg-type]


def test_the_architect_files_children_the_retro_follow_ups_the_controller_routes() -> None:
    assert create("architect", parent="LEG-2", status=Status.TODO) is None
    assert create("architect", parent="leg-2", status=Status.BACKLOG) is None
    assert create("architect", parent="LEG-3", status=Status.TODO)  # not its own
    assert create("architect", status=Status.TRIAGE)  # no parent
    assert create("architect", parent="LEG-2", status=Status.IN_PROGRESS)
    assert create("architect", parent="LEG-2", status=Status.TODO, created=20)
    assert create("retro") is None
    assert create("retro", parent="LEG-2")
    assert create("retro", status=Status.TODO)
    assert create("retro", created=5)
    for mode in ("plan", "implement", "review", "finish", ""):
        assert create(mode, parent="LEG-2", status=Status.TODO)
        assert create(mode)
    assert create(CONTROLLER, parent="LEG-9", status=Status.BACKLOG, labels={"legion"}) is None
    assert create(CONTROLLER, status=Status.DONE)
    assert create(CONTROLLER, status=Status.IN_PROGRESS)


@pytest.mark.parametrize("who", ["architect", "retro", CONTROLLER])
@pytest.mark.parametrize("label", [label.value for label in Label])
def test_no_session_creates_an_issue_with_a_workflow_label(who: str, label: str) -> None:
    why = create(who, parent="LEG-2", status=Status.TODO if who != "retro" else Status.TRIAGE,
                 labels=frozenset({label}))  # fmt: skip
    if who == "retro":
        why = create(who, labels=frozenset({label}))
    assert why is not None and "Legion's to set" in why


def test_a_worker_labels_nothing_it_creates() -> None:
    assert create("retro", labels=frozenset({"frontend"}))


# -- the controller's starts and answers ----------------------------------------------------

from legion.core.roles import answer_refusal, dispatch_refusal  # noqa: E402

DISPATCH_ALLOWED = {
    (Status.BACKLOG, Mode.ARCHITECT),
    (Status.TODO, Mode.PLAN),
    (Status.IN_PROGRESS, Mode.IMPLEMENT),
    (Status.NEEDS_REVIEW, Mode.REVIEW),
    (Status.NEEDS_REVIEW, Mode.IMPLEMENT),
    (Status.RETRO, Mode.RETRO),
    (Status.RETRO, Mode.FINISH),
}


@pytest.mark.parametrize("status", list(Status))
@pytest.mark.parametrize("mode", list(Mode))
def test_the_controller_starts_only_its_issues_phase_and_a_person_anything(
    status: Status, mode: Mode
) -> None:
    why = dispatch_refusal(CONTROLLER, status, mode, force=False)
    assert (why is None) == ((status, mode) in DISPATCH_ALLOWED), why
    assert dispatch_refusal("", status, mode, force=True) is None


def test_the_controller_never_forces_a_start() -> None:
    why = dispatch_refusal(CONTROLLER, Status.TODO, Mode.PLAN, force=True)
    assert why is not None and "--force" in why


@pytest.mark.parametrize(
    "labels",
    [set(), {"frontend"}, {"user-input-needed"}, {"user-feedback-given"}, {"worker-active"}],
)
def test_the_controller_answers_only_a_question_no_person_owns(labels: set[str]) -> None:
    owned = bool(labels & {"user-input-needed", "user-feedback-given"})
    why = answer_refusal(CONTROLLER, frozenset(labels))
    assert (why is None) == (not owned), why
    assert answer_refusal("", frozenset(labels)) is None  # a person answers any
    assert answer_refusal("legion", frozenset(labels)) is None  # Legion relays a person's
