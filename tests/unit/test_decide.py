"""The decision table, row by row, and its properties over every possible input."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legion.core.decide import (
    PHASE_MODE,
    Action,
    Decision,
    Observation,
    completion_labels,
    decide,
    due_after_answer,
)
from legion.core.model import ChecksState, Label, Mode, ReviewOutcome, Status

A = Action
S = Status
R = ReviewOutcome
C = ChecksState
DONE = Label.WORKER_DONE
ACTIVE = Label.WORKER_ACTIVE
INPUT = Label.USER_INPUT_NEEDED
FEEDBACK = Label.USER_FEEDBACK_GIVEN
ACTIVE_STATUSES = (S.BACKLOG, S.TODO, S.IN_PROGRESS, S.NEEDS_REVIEW, S.RETRO)


def obs(
    status: Status,
    *labels: Label,
    live: bool = False,
    pr: ReviewOutcome | None = None,
    opted: bool = True,
) -> Observation:
    """pr=None: no pull request; otherwise a pull request with that review outcome. `opted`:
    a person opted the issue in (`backlog_opt_in_labels`)."""
    if pr is R.UNKNOWN:
        return Observation(status, frozenset(labels), live, False, R.UNKNOWN, opted_in=opted)
    return Observation(
        status, frozenset(labels), live, pr is not None, pr or R.NONE, opted_in=opted
    )


# The seed's Status-Specific Logic table, then the additions the issue names.
ROWS: list[tuple[str, Observation, Action, Mode | None]] = [
    ("todo, nothing: plan", obs(S.TODO), A.DISPATCH_PLANNER, Mode.PLAN),
    ("todo, live worker: wait", obs(S.TODO, live=True), A.SKIP, None),
    ("todo done: to in progress", obs(S.TODO, DONE), A.TRANSITION_TO_IN_PROGRESS, Mode.IMPLEMENT),
    ("in progress, worker running", obs(S.IN_PROGRESS, live=True), A.SKIP, None),
    (
        "in progress done: to review",
        obs(S.IN_PROGRESS, DONE),
        A.TRANSITION_TO_NEEDS_REVIEW,
        Mode.REVIEW,
    ),
    (
        "needs review, nothing: reviewer",
        obs(S.NEEDS_REVIEW, pr=R.NONE),
        A.DISPATCH_REVIEWER,
        Mode.REVIEW,
    ),
    ("needs review, reviewer running", obs(S.NEEDS_REVIEW, live=True, pr=R.NONE), A.SKIP, None),
    ("review done, no verdict yet", obs(S.NEEDS_REVIEW, DONE, pr=R.NONE), A.SKIP, None),
    (
        "review done, changes",
        obs(S.NEEDS_REVIEW, DONE, pr=R.CHANGES_REQUESTED),
        A.RESUME_IMPLEMENTER_FOR_CHANGES,
        Mode.IMPLEMENT,
    ),
    (
        "review done, approved",
        obs(S.NEEDS_REVIEW, DONE, pr=R.APPROVED),
        A.TRANSITION_TO_RETRO,
        Mode.RETRO,
    ),
    (
        "retro, nothing: resume implementer",
        obs(S.RETRO),
        A.RESUME_IMPLEMENTER_FOR_RETRO,
        Mode.RETRO,
    ),
    ("retro running", obs(S.RETRO, live=True), A.SKIP, None),
    ("retro done: finisher", obs(S.RETRO, DONE), A.DISPATCH_FINISHER, Mode.FINISH),
    ("done", obs(S.DONE), A.SKIP, None),
    # additions
    ("backlog: architect", obs(S.BACKLOG), A.DISPATCH_ARCHITECT, Mode.ARCHITECT),
    ("backlog done: to todo", obs(S.BACKLOG, DONE), A.TRANSITION_TO_TODO, Mode.PLAN),
    (
        "epic split, a child open: waits",
        replace(obs(S.BACKLOG, DONE), children=("LEG-2", "LEG-3"), open_children=("LEG-3",)),
        A.SKIP,
        None,
    ),
    (
        "epic split, every child Done: closes",
        replace(obs(S.BACKLOG, DONE), children=("LEG-2", "LEG-3")),
        A.CLOSE_EPIC,
        None,
    ),
    # issue 19 item 3: a Backlog issue nobody opted in costs nothing, whatever its labels
    ("backlog, not opted in: left alone", obs(S.BACKLOG, opted=False), A.SKIP, None),
    ("backlog, not opted in, done", obs(S.BACKLOG, DONE, opted=False), A.SKIP, None),
    ("backlog, not opted in, active", obs(S.BACKLOG, ACTIVE, opted=False), A.SKIP, None),
    ("backlog, not opted in, answer", obs(S.BACKLOG, FEEDBACK, opted=False), A.SKIP, None),
    ("icebox, opted in: still left alone", obs(S.ICEBOX), A.SKIP, None),
    ("todo needs no opt-in", obs(S.TODO, opted=False), A.DISPATCH_PLANNER, Mode.PLAN),
    (
        "feedback given: relay",
        obs(S.IN_PROGRESS, INPUT, FEEDBACK),
        A.RELAY_USER_FEEDBACK,
        Mode.IMPLEMENT,
    ),
    (
        "feedback while live: relay",
        obs(S.TODO, INPUT, FEEDBACK, live=True),
        A.RELAY_USER_FEEDBACK,
        Mode.PLAN,
    ),
    (
        "feedback in retro: implementer session",
        obs(S.RETRO, INPUT, FEEDBACK),
        A.RELAY_USER_FEEDBACK,
        Mode.RETRO,
    ),
    ("waiting for a human", obs(S.IN_PROGRESS, INPUT), A.SKIP, None),
    ("waiting for a human, worker done", obs(S.TODO, INPUT, DONE), A.SKIP, None),
    (
        "dead worker",
        obs(S.IN_PROGRESS, ACTIVE),
        A.REMOVE_WORKER_ACTIVE_AND_REDISPATCH,
        Mode.IMPLEMENT,
    ),
    (
        "dead reviewer",
        obs(S.NEEDS_REVIEW, ACTIVE, pr=R.NONE),
        A.REMOVE_WORKER_ACTIVE_AND_REDISPATCH,
        Mode.REVIEW,
    ),
    ("active and live", obs(S.IN_PROGRESS, ACTIVE, live=True), A.SKIP, None),
    ("review done, no PR", obs(S.NEEDS_REVIEW, DONE), A.INVESTIGATE_NO_PR, None),
    ("review done, forge unknown", obs(S.NEEDS_REVIEW, DONE, pr=R.UNKNOWN), A.SKIP, None),
    ("triage", obs(S.TRIAGE), A.SKIP, None),
    ("icebox", obs(S.ICEBOX, DONE), A.SKIP, None),
    ("done with a stale label", obs(S.DONE, ACTIVE), A.SKIP, None),
    (
        "in progress, nobody: dispatch again",
        obs(S.IN_PROGRESS),
        A.DISPATCH_IMPLEMENTER,
        Mode.IMPLEMENT,
    ),
    (
        "done beats stale active",
        obs(S.TODO, DONE, ACTIVE),
        A.TRANSITION_TO_IN_PROGRESS,
        Mode.IMPLEMENT,
    ),
    # issue 19 item 1: CI checks
    (
        "approved, checks failing: implementer fixes them",
        replace(obs(S.NEEDS_REVIEW, DONE, pr=R.APPROVED), checks=C.FAILING),
        A.RESUME_IMPLEMENTER_FOR_CHECKS,
        Mode.IMPLEMENT,
    ),
    (
        "approved, checks pending: wait",
        replace(obs(S.NEEDS_REVIEW, DONE, pr=R.APPROVED), checks=C.PENDING),
        A.SKIP,
        None,
    ),
    (
        "approved, checks unknown: wait",
        replace(obs(S.NEEDS_REVIEW, DONE, pr=R.APPROVED), checks=C.UNKNOWN),
        A.SKIP,
        None,
    ),
    (
        "approved, checks passing: retro",
        replace(obs(S.NEEDS_REVIEW, DONE, pr=R.APPROVED), checks=C.PASSING),
        A.TRANSITION_TO_RETRO,
        Mode.RETRO,
    ),
    (
        "changes requested, checks failing: the changes (the prompt names the checks)",
        replace(obs(S.NEEDS_REVIEW, DONE, pr=R.CHANGES_REQUESTED), checks=C.FAILING),
        A.RESUME_IMPLEMENTER_FOR_CHANGES,
        Mode.IMPLEMENT,
    ),
    (
        "retro done, checks pending: the finisher waits for CI",
        replace(obs(S.RETRO, DONE, pr=R.APPROVED), checks=C.PENDING),
        A.SKIP,
        None,
    ),
    (
        "retro done, checks failing: never the finisher; the implementer fixes them",
        replace(obs(S.RETRO, DONE, pr=R.APPROVED), checks=C.FAILING),
        A.RESUME_IMPLEMENTER_FOR_CHECKS,
        Mode.IMPLEMENT,
    ),
    (
        "a finished planner's worker-done in In Progress is not the implementer's",
        replace(obs(S.IN_PROGRESS, DONE), latest_mode=Mode.PLAN),
        A.REMOVE_STALE_WORKER_DONE,
        Mode.IMPLEMENT,
    ),
]


@pytest.mark.parametrize(("name", "observation", "action", "mode"), ROWS, ids=[r[0] for r in ROWS])
def test_row(name: str, observation: Observation, action: Action, mode: Mode | None) -> None:
    assert decide(observation) == Decision(action, mode)


def test_every_action_is_reachable() -> None:
    reached = {action for _, _, action, _ in ROWS}
    assert reached == set(Action)


def test_every_decision_is_said_in_words_never_by_its_internal_name() -> None:
    for _, observation, _, _ in ROWS:
        decision = decide(observation)
        assert "_" not in decision.words and "{" not in decision.words
    redispatch = Decision(A.REMOVE_WORKER_ACTIVE_AND_REDISPATCH, Mode.IMPLEMENT)
    assert redispatch.words == "re-dispatch implement (worker gone)"


def test_retro_runs_in_the_implementers_session() -> None:
    decision = decide(obs(S.NEEDS_REVIEW, DONE, pr=R.APPROVED))
    assert decision.mode is Mode.RETRO
    assert decision.session_mode is Mode.IMPLEMENT


observations = st.builds(
    Observation,
    status=st.sampled_from(Status),
    labels=st.frozensets(st.sampled_from(Label)),
    has_live_worker=st.booleans(),
    has_pr=st.booleans(),
    pr_review=st.sampled_from(ReviewOutcome),
    latest_mode=st.none() | st.sampled_from(Mode),
    opted_in=st.booleans(),
    open_blockers=st.sampled_from([(), ("LEG-1",), ("LEG-1", "LEG-2")]),
    checks=st.sampled_from(ChecksState),
    children=st.sampled_from([(), ("LEG-5",)]),
    open_children=st.sampled_from([(), ("LEG-5",)]),
)


@given(observations)
def test_every_input_yields_exactly_one_action(observation: Observation) -> None:
    decision = decide(observation)
    assert isinstance(decision, Decision)
    assert isinstance(decision.action, Action)
    assert decide(observation) == decision  # depends only on the input


@given(observations)
def test_never_dispatches_beside_a_live_worker(observation: Observation) -> None:
    action = decide(observation).action
    if (
        observation.has_live_worker
        and action.name.startswith("DISPATCH_")
        and action is not A.DISPATCH_FINISHER
    ):
        raise AssertionError(f"{action} despite a live worker")


@given(observations)
def test_backlog_and_icebox_cost_nothing_without_the_opt_in(observation: Observation) -> None:
    """No Backlog or Icebox issue nobody opted in ever gets an action: no worker starts,
    resumes or is restarted on it, and no status or label moves."""
    if observation.status in (S.BACKLOG, S.ICEBOX) and not observation.opted_in:
        assert decide(observation) == Decision(A.SKIP)


@given(observations)
def test_the_opt_in_matters_only_in_backlog(observation: Observation) -> None:
    if observation.status is not S.BACKLOG:
        flipped = replace(observation, opted_in=not observation.opted_in)
        assert decide(flipped) == decide(observation)


@given(observations)
def test_unknown_review_never_transitions(observation: Observation) -> None:
    if observation.pr_review is R.UNKNOWN and observation.status is S.NEEDS_REVIEW:
        assert decide(observation).action.target_status is None


@given(observations)
def test_unknown_checks_never_transition_nor_start_the_finisher(observation: Observation) -> None:
    """Where checks are read (Needs Review, Retro), unknown ones never move the issue on."""
    if observation.checks is C.UNKNOWN and observation.status in (S.NEEDS_REVIEW, S.RETRO):
        action = decide(observation).action
        assert action.target_status is None and action is not A.DISPATCH_FINISHER


@given(observations)
def test_nothing_moves_on_to_retro_or_the_merge_while_ci_runs(observation: Observation) -> None:
    """Pending checks never move an issue to Retro nor start the finisher (who merges); failing
    checks never move it to Retro."""
    action = decide(observation).action
    if observation.checks is C.PENDING:
        assert action not in (A.TRANSITION_TO_RETRO, A.DISPATCH_FINISHER)
    if observation.checks is C.FAILING:
        assert action is not A.TRANSITION_TO_RETRO


@given(observations)
def test_checks_matter_only_after_an_approval_or_before_the_finisher(
    observation: Observation,
) -> None:
    """Checks change the decision only for a finished review that approved, or a finished
    retro: every other row reads as it did before checks were an input."""
    approved_review = observation.status is S.NEEDS_REVIEW and observation.pr_review is R.APPROVED
    if approved_review or observation.status is S.RETRO:
        return
    assert decide(observation) == decide(replace(observation, checks=C.NONE))


@given(observations)
def test_waiting_for_a_human_is_never_disturbed(observation: Observation) -> None:
    labels = observation.labels
    if INPUT in labels and FEEDBACK not in labels:
        assert decide(observation).action is A.SKIP


def blocked(observation: Observation, *by: str) -> Observation:
    return replace(observation, open_blockers=by or ("LEG-1",))


BLOCKED_ROWS: list[tuple[str, Observation, Decision]] = [
    ("todo blocked: no planner", blocked(obs(S.TODO)), Decision(A.SKIP)),
    ("backlog blocked: no architect", blocked(obs(S.BACKLOG)), Decision(A.SKIP)),
    (
        "an architected parent blocked by its children does not move to Todo",
        blocked(obs(S.BACKLOG, DONE), "LEG-2", "LEG-3"),
        Decision(A.SKIP),
    ),
    ("worker-done in Todo waits too", blocked(obs(S.TODO, DONE)), Decision(A.SKIP)),
    (
        "a finished worker that is still live does not move it either",
        blocked(obs(S.TODO, DONE, live=True)),
        Decision(A.SKIP),
    ),
    ("a dead worker is not restarted", blocked(obs(S.IN_PROGRESS, ACTIVE)), Decision(A.SKIP)),
    ("a live worker goes on (skip)", blocked(obs(S.IN_PROGRESS, live=True)), Decision(A.SKIP)),
    (
        "a human's answer is still relayed",
        blocked(obs(S.TODO, INPUT, FEEDBACK)),
        Decision(A.RELAY_USER_FEEDBACK, Mode.PLAN),
    ),
    ("still waiting for a human: skip", blocked(obs(S.TODO, INPUT)), Decision(A.SKIP)),
    ("Done is the controller's", blocked(obs(S.DONE)), Decision(A.SKIP)),
    (
        "no open blocker: the table as before",
        replace(obs(S.TODO), open_blockers=()),
        Decision(A.DISPATCH_PLANNER, Mode.PLAN),
    ),
]


@pytest.mark.parametrize(
    ("name", "observation", "decision"), BLOCKED_ROWS, ids=[r[0] for r in BLOCKED_ROWS]
)
def test_blocked_row(name: str, observation: Observation, decision: Decision) -> None:
    assert decide(observation) == decision


@given(observations)
def test_a_blocked_issue_starts_nothing_and_does_not_move(observation: Observation) -> None:
    """With an open blocker only a human's answer acts: no dispatch, no transition, no
    label cleared; and without one the blockers field changes nothing."""
    if observation.open_blockers:
        decision = decide(observation)
        if FEEDBACK in observation.labels and decision.action is A.RELAY_USER_FEEDBACK:
            return
        assert decision == Decision(A.SKIP)
    else:
        assert decide(replace(observation, open_blockers=())) == decide(observation)


@given(observations)
def test_worker_actions_name_a_mode(observation: Observation) -> None:
    decision = decide(observation)
    needs_mode = decision.action not in (A.SKIP, A.INVESTIGATE_NO_PR)
    assert (decision.mode is not None) == needs_mode


def test_table_is_total_over_the_whole_input_space() -> None:
    count = 0
    for status, has_live, has_pr, review, opted, checks in itertools.product(
        Status, [False, True], [False, True], ReviewOutcome, [False, True], ChecksState
    ):
        for n in range(len(Label) + 1):
            for labels in itertools.combinations(Label, n):
                decide(
                    Observation(
                        status,
                        frozenset(labels),
                        has_live,
                        has_pr,
                        review,
                        opted_in=opted,
                        checks=checks,
                    )
                )
                count += 1
    assert count == (
        len(Status) * 2 * 2 * len(ReviewOutcome) * 2 * len(ChecksState) * 2 ** len(Label)
    )


def test_phase_modes_cover_active_statuses() -> None:
    assert set(PHASE_MODE) == set(ACTIVE_STATUSES)


def _latest(observation: Observation, mode: Mode | None) -> Observation:
    return replace(observation, latest_mode=mode)


@pytest.mark.parametrize("status", ACTIVE_STATUSES)
def test_worker_done_counts_only_for_the_phases_own_worker(status: Status) -> None:
    """Issue 24, item 20: a mode's `worker-done` never counts for another mode."""
    phase = PHASE_MODE[status]
    done = obs(status, DONE, pr=R.APPROVED if status is S.NEEDS_REVIEW else None)
    # The phase's own worker, or no Legion worker at all (a person added it): it counts.
    assert decide(_latest(done, phase)) == decide(done)
    assert decide(done).action is not A.REMOVE_STALE_WORKER_DONE
    for other in set(Mode) - {phase}:
        for labels in (done.labels, done.labels | {ACTIVE}):
            stale = _latest(replace(done, labels=labels), other)
            assert decide(stale) == Decision(A.REMOVE_STALE_WORKER_DONE, phase), other
            # ... even beside a live worker (the other mode's, still finishing)
            assert decide(replace(stale, has_live_worker=True)).action is (
                A.REMOVE_STALE_WORKER_DONE
            )


def test_the_latest_worker_never_matters_without_worker_done() -> None:
    for status, labels, live, mode in itertools.product(
        Status,
        [frozenset(), frozenset({ACTIVE}), frozenset({INPUT}), frozenset({INPUT, FEEDBACK})],
        [False, True],
        [None, *Mode],
    ):
        plain = Observation(status, labels, live)
        assert decide(_latest(plain, mode)) == decide(plain)


def test_a_human_answer_and_input_needed_come_before_attribution() -> None:
    waiting = _latest(obs(S.IN_PROGRESS, DONE, INPUT), Mode.PLAN)
    assert decide(waiting).action is A.SKIP
    answered = _latest(obs(S.IN_PROGRESS, DONE, INPUT, FEEDBACK), Mode.PLAN)
    assert decide(answered) == Decision(A.RELAY_USER_FEEDBACK, Mode.IMPLEMENT)


def test_completion_labels_are_what_the_table_then_acts_on() -> None:
    """The phase's own worker adds `worker-done`, and the table acts on it."""
    for status, mode in PHASE_MODE.items():
        added, _ = completion_labels(mode, status)
        if Label.WORKER_DONE not in added:
            continue
        action = decide(_latest(obs(status, *added, pr=R.APPROVED), mode)).action
        assert action is not A.REMOVE_STALE_WORKER_DONE, (status, mode)


# A human's answer to a question Legion asked itself goes to the worker that is due.
DUE: list[tuple[str, Observation, Decision]] = [
    (
        "budget spent when the implementer was due (the planner finished)",
        _latest(obs(S.IN_PROGRESS, INPUT, FEEDBACK), Mode.PLAN),
        Decision(A.DISPATCH_IMPLEMENTER, Mode.IMPLEMENT),
    ),
    (
        "budget spent when the finisher was due",
        _latest(obs(S.RETRO, DONE, INPUT, FEEDBACK), Mode.RETRO),
        Decision(A.DISPATCH_FINISHER, Mode.FINISH),
    ),
    (
        "budget spent when the implementer was due for requested changes",
        _latest(obs(S.NEEDS_REVIEW, DONE, INPUT, FEEDBACK, pr=R.CHANGES_REQUESTED), Mode.REVIEW),
        Decision(A.RESUME_IMPLEMENTER_FOR_CHANGES, Mode.IMPLEMENT),
    ),
    (
        "a worker that keeps dying: restarted",
        _latest(obs(S.RETRO, ACTIVE, INPUT, FEEDBACK), Mode.FINISH),
        Decision(A.REMOVE_WORKER_ACTIVE_AND_REDISPATCH, Mode.RETRO),
    ),
    (
        "nothing due while a worker runs",
        _latest(obs(S.TODO, INPUT, FEEDBACK, live=True), Mode.PLAN),
        Decision(A.SKIP),
    ),
]


@pytest.mark.parametrize(("name", "observation", "due"), DUE, ids=[d[0] for d in DUE])
def test_due_after_answer(name: str, observation: Observation, due: Decision) -> None:
    assert decide(observation).action is A.RELAY_USER_FEEDBACK
    assert due_after_answer(observation) == due


@given(observations)
def test_the_answer_never_goes_back_to_waiting(observation: Observation) -> None:
    """Once answered, the due decision never waits for a human again nor relays again."""
    due = due_after_answer(observation)
    assert due.action is not A.RELAY_USER_FEEDBACK
    assert due == decide(replace(observation, labels=observation.labels - {INPUT, FEEDBACK}))


def test_an_epic_is_never_planned_and_closes_only_once_its_children_are_done() -> None:
    """The architect split it: whatever else holds, no plan or implement of its own."""
    epic = replace(obs(S.BACKLOG, DONE), children=("LEG-2", "LEG-3"))
    waiting = replace(epic, open_children=("LEG-2",))
    assert decide(waiting) == Decision(A.SKIP)
    assert decide(replace(waiting, has_live_worker=True)) == Decision(A.SKIP)
    assert decide(epic) == Decision(A.CLOSE_EPIC)
    # Before its architect finished, it is the architect's (who may add children).
    assert decide(replace(epic, labels=frozenset())).action is A.DISPATCH_ARCHITECT
    # An issue with children outside Backlog is worked as any other: no epic there.
    assert decide(replace(epic, status=S.TODO)).action is A.TRANSITION_TO_IN_PROGRESS
    # Not opted in, blocked or waiting for a person: those rows come first.
    assert decide(replace(epic, opted_in=False)) == Decision(A.SKIP)
    assert decide(replace(epic, open_blockers=("LEG-9",))) == Decision(A.SKIP)
    assert decide(replace(epic, labels=frozenset({DONE, INPUT}))) == Decision(A.SKIP)
