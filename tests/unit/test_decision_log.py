"""The decision log's pure rules: what a decision keeps, when a skip is logged, the replay."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legion.core import decision_log
from legion.core.decide import Action, Decision, Observation, Verdict, explain
from legion.core.decision_log import (
    Decided,
    Gates,
    Logged,
    inputs_words,
    key_of,
    replay,
    worth_logging,
)
from legion.core.model import ChecksState, Label, Mode, ReviewOutcome, Status
from tests.unit.test_decide import observations

gates = st.builds(
    Gates,
    paused=st.none() | st.text(min_size=1),
    model_held=st.none() | st.text(min_size=1),
    code_workers=st.none() | st.integers(0, 50),
    wip_limit=st.none() | st.integers(0, 50),
    sessions=st.none() | st.integers(0, 50),
    capacity=st.none() | st.integers(0, 50),
    draining=st.booleans(),
)


@given(observations, gates)
def test_a_decision_comes_back_from_the_log_as_it_was_kept(obs: Observation, seen: Gates) -> None:
    kept = Decided(obs, explain(obs), seen)
    again = Decided.from_json(json.loads(json.dumps(kept.to_json())))
    assert again == replace(kept, said=kept.verdict.why)  # its words, as they were then
    assert explain(again.observation) == kept.verdict  # what the replay runs on


@pytest.mark.parametrize(
    "change",
    [
        {"row": "4"},
        {"row": True},
        {"action": "launch_missiles"},
        {"mode": "overlord"},
        {"inputs": []},
        {"inputs": {"status": "Todo"}},
        {"inputs": {"labels": "worker-done"}},
    ],
)
def test_what_is_not_a_decision_is_refused_in_one_error(change: dict[str, object]) -> None:
    obs = Observation(status=Status.TODO)
    data = {**Decided(obs, explain(obs)).to_json(), **change}
    with pytest.raises(ValueError):
        Decided.from_json(data)


def test_a_flag_that_is_not_a_boolean_is_no_observation() -> None:
    data = Observation(status=Status.TODO).to_json() | {"live_worker": "yes"}
    with pytest.raises(ValueError):
        Observation.from_json(data)


def test_a_skip_is_logged_when_the_decision_changes_and_never_first_for_an_issue_left_alone() -> (
    None
):
    left_alone = explain(Observation(status=Status.DONE))
    blocked = explain(Observation(status=Status.TODO, open_blockers=("LEG-1",)))
    working = explain(Observation(status=Status.TODO, has_live_worker=True))
    assert left_alone.row == 1 and blocked.row == 4 and working.row == 21
    assert not worth_logging(None, left_alone)  # hundreds of Done issues Legion never touched
    assert worth_logging(None, blocked)
    assert not worth_logging(key_of(blocked), blocked)  # once per change, not per pass
    assert worth_logging(key_of(blocked), working)
    assert worth_logging(key_of(working), left_alone)  # it went to Done: said once


def test_the_replay_lists_what_an_altered_row_decides_differently(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    finished = Observation(
        status=Status.RETRO, labels=frozenset({Label.WORKER_DONE}), checks=ChecksState.FAILING
    )
    working = Observation(status=Status.RETRO, has_live_worker=True)
    log = [
        Logged(1, "2026-11-30T10:00:00Z", "LEG-1", Decided(working, explain(working))),
        Logged(2, "2026-11-30T10:05:00Z", "LEG-1", Decided(finished, explain(finished))),
    ]
    assert replay(log) == []  # today's table, over its own decisions

    def laxer(obs: Observation) -> Verdict:
        """Row 19 altered: the finisher starts though a check fails (as before issue 41)."""
        verdict = explain(obs)
        if verdict.row == 19:
            return Verdict(Decision(Action.DISPATCH_FINISHER, Mode.FINISH), 20)
        return verdict

    monkeypatch.setattr(decision_log, "explain", laxer)
    [different] = replay(log)
    assert different.entry.entry_id == 2
    then = {"row": 19, "action": "resume_implementer_for_checks", "mode": "implement"}
    assert different.to_json()["then"] == then
    assert different.to_json()["now"] == {
        "row": 20,
        "action": "dispatch_finisher",
        "mode": "finish",
    }


def test_the_inputs_read_as_words() -> None:
    obs = Observation(
        status=Status.NEEDS_REVIEW,
        labels=frozenset({Label.WORKER_DONE}),
        has_pr=True,
        pr_review=ReviewOutcome.APPROVED,
        checks=ChecksState.PENDING,
        latest_mode=Mode.REVIEW,
    )
    assert inputs_words(obs) == (
        "status Needs Review; labels worker-done; live worker no; PR review approved; "
        "checks pending; latest worker review; blocked by nothing"
    )
    assert "PR not read" in inputs_words(Observation(Status.RETRO, pr_review=ReviewOutcome.UNKNOWN))
    epic = Observation(Status.BACKLOG, opted_in=True, children=("LEG-2", "LEG-3"))
    assert inputs_words(epic).endswith("; opted in yes; children LEG-2, LEG-3")
    waiting = replace(epic, open_children=("LEG-3",))
    assert inputs_words(waiting).endswith("; children LEG-2, LEG-3 (LEG-3 not Done)")
    # An entry kept before children were: none.
    older = {k: v for k, v in epic.to_json().items() if k not in ("children", "open_children")}
    assert Observation.from_json(older) == replace(epic, children=())
    assert Observation.from_json(waiting.to_json()) == waiting
    with pytest.raises(ValueError, match="children is not a list"):
        Observation.from_json({**epic.to_json(), "children": "LEG-2"})
    assert Gates(code_workers=2, wip_limit=2, paused="two starts failed").words == [
        "dispatch paused: two starts failed",
        "WIP 2 of 2",
    ]


def test_a_kept_decision_says_why_in_the_words_of_its_day_and_an_unknown_row_is_said() -> None:
    obs = Observation(status=Status.TODO)
    data = Decided(obs, explain(obs)).to_json()
    renumbered = {**data, "row": 99}  # a later (or earlier) table's numbering
    kept = Decided.from_json(renumbered)
    assert kept.why == "no worker has finished in Todo: the planner starts (row 24)"
    assert Decided.from_json({**renumbered, "why": None}).why == (
        "a row this version of the table does not have (row 99)"
    )


def test_a_decision_about_thousands_of_blockers_is_kept_small_enough_to_read_back() -> None:
    """A stranger's issue body may name thousands of blockers (hidden in an HTML comment): the
    decision keeps a few, enough to decide the same again, so it is never too large to read
    back (`legion why`, `legion log --replay`)."""
    from legion.core.decide import KEPT_IDENTIFIERS
    from legion.store.actionlog import MAX_DECIDED

    blockers = tuple(f"LEGIONDEMO-{100_000_000 + n}" for n in range(3000))
    for obs in (
        Observation(status=Status.TODO, open_blockers=blockers),
        Observation(
            status=Status.BACKLOG,
            labels=frozenset({Label.WORKER_DONE}),
            opted_in=True,
            children=blockers,
            open_children=blockers[1:],
        ),
        Observation(
            status=Status.BACKLOG,
            labels=frozenset({Label.WORKER_DONE}),
            opted_in=True,
            children=blockers,
        ),
    ):
        kept = obs.to_json()
        assert len(kept["open_blockers"]) <= KEPT_IDENTIFIERS
        assert len(json.dumps(kept)) < MAX_DECIDED
        assert explain(Observation.from_json(json.loads(json.dumps(kept)))) == explain(obs)
