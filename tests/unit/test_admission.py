"""`legion.core.admission`: the one decision whether a worker may start now, on each asker's
facts: the pass's limits, a person's or the controller's dispatch, the worker manager's."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from legion.core import roles
from legion.core.admission import Load, Reason, StartFacts, refusal
from legion.core.budget import Spent
from legion.core.model import Mode, Status


def _reason(facts: StartFacts) -> Reason | None:
    found = refusal(facts)
    return None if found is None else found.reason


def test_a_start_with_nothing_against_it_goes() -> None:
    assert refusal(StartFacts(issue="LEG-1", mode=Mode.IMPLEMENT)) is None
    assert refusal(StartFacts()) is None  # any session, nothing known


def test_the_wip_limit_counts_code_workers_and_exempts_reviewers() -> None:
    full = Load(code_workers=2, sessions=3, wip_limit=2)
    refused = refusal(StartFacts(issue="LEG-1", mode=Mode.PLAN, load=full))
    assert refused is not None and refused.reason is Reason.WIP and refused.reason.waits
    assert refused.detail == "WIP limit 2 reached"
    assert refusal(StartFacts(issue="LEG-1", mode=Mode.REVIEW, load=full)) is None
    room = Load(code_workers=1, sessions=3, wip_limit=2)
    assert refusal(StartFacts(issue="LEG-1", mode=Mode.PLAN, load=room)) is None


def test_capacity_says_whether_the_fleet_or_this_host_is_full() -> None:
    here = Load(code_workers=0, sessions=4, capacity=4)
    fleet = Load(code_workers=0, sessions=9, capacity=8, in_fleet=True)
    for load, said in ((here, "this host runs 4"), (fleet, "the fleet's hosts run 9")):
        refused = refusal(StartFacts(issue="LEG-1", mode=Mode.REVIEW, load=load))
        assert refused is not None and refused.reason is Reason.CAPACITY
        assert refused.detail.startswith(said)


def test_the_controller_is_bounded_by_the_phase_and_a_person_is_not() -> None:
    controller = StartFacts(
        issue="LEG-1", mode=Mode.IMPLEMENT, asked_by=roles.CONTROLLER, status=Status.TRIAGE
    )
    refused = refusal(controller)
    assert refused is not None and refused.reason is Reason.ROLE and not refused.reason.waits
    assert refused.detail == roles.dispatch_refusal(
        roles.CONTROLLER, Status.TRIAGE, Mode.IMPLEMENT, force=False
    )
    person = StartFacts(issue="LEG-1", mode=Mode.IMPLEMENT, asked_by="", status=Status.TRIAGE)
    assert refusal(person) is None


def test_a_blocked_issue_waits_unless_forced() -> None:
    blocked = StartFacts(issue="LEG-3", mode=Mode.PLAN, waiting_for=("LEG-2 (In Progress)",))
    refused = refusal(blocked)
    assert refused is not None and refused.reason is Reason.BLOCKED
    assert refused.detail.startswith("LEG-3 is blocked by LEG-2 (In Progress): ")
    forced = StartFacts(
        issue="LEG-3", mode=Mode.PLAN, waiting_for=("LEG-2 (In Progress)",), force=True
    )
    assert refusal(forced) is None


def test_no_daemon_in_the_pass_s_words_and_in_a_start_s() -> None:
    pass_said = refusal(StartFacts(issue="LEG-1", mode=Mode.PLAN, hosted=False))
    assert pass_said is not None and pass_said.reason is Reason.NO_DAEMON
    assert pass_said.detail == "no daemon runs to host the worker (`legion start`)"
    start_said = refusal(StartFacts(hosted=False, daemon_for="/work/app"))
    assert start_said is not None and start_said.detail.startswith("no daemon runs for /work/app")
    assert refusal(StartFacts(hosted=True, daemon_for="/work/app")) is None


def test_a_daemon_that_does_not_serve_sessions_yet_is_waited_for() -> None:
    """Its model proxy not up, a session started now would be given the model key: the start
    waits (a reason that passes by itself), and a stopped daemon is no daemon."""
    starting = refusal(StartFacts(hosted=True, serving=False, daemon_for="/work/app"))
    assert starting is not None and starting.reason is Reason.DAEMON_STARTING
    assert starting.reason.waits
    assert starting.detail.startswith("the daemon for /work/app has not started serving sessions")
    assert refusal(StartFacts(hosted=True, serving=True, daemon_for="/work/app")) is None
    stopped = refusal(StartFacts(hosted=False, serving=False, daemon_for="/work/app"))
    assert stopped is not None and stopped.reason is Reason.NO_DAEMON


def test_a_live_worker_and_a_spent_budget() -> None:
    live = refusal(StartFacts(issue="LEG-1", mode=Mode.PLAN, live_worker="leg-1-plan (idle)"))
    assert live is not None and live.reason is Reason.LIVE_WORKER
    assert live.detail == (
        "LEG-1 already has a live worker: window leg-1-plan (idle); see `legion workers`"
    )
    spent = Spent("LEG-1", 120_000, 100_000)
    budget = refusal(StartFacts(issue="LEG-1", mode=Mode.PLAN, budget_spent=spent))
    assert budget is not None and budget.reason is Reason.BUDGET and not budget.reason.waits
    assert budget.detail == "token budget spent (120,000 of 100,000)"


_FACTS = st.builds(
    StartFacts,
    issue=st.just("LEG-1"),
    mode=st.sampled_from(Mode),
    asked_by=st.sampled_from([None, "", roles.CONTROLLER]),
    status=st.sampled_from([None, *Status]),
    force=st.booleans(),
    waiting_for=st.sampled_from([(), ("LEG-2 (Todo)",)]),
    paused=st.booleans(),
    model_held=st.sampled_from([None, "held: a provider's 429"]),
    load=st.sampled_from([None, Load(1, 1, wip_limit=1), Load(0, 2, capacity=2)]),
    draining=st.booleans(),
    budget_spent=st.sampled_from([None, Spent("LEG-1", 2, 1)]),
    hosted=st.sampled_from([None, True, False]),
    serving=st.sampled_from([None, True, False]),
    live_worker=st.sampled_from([None, "w (running)"]),
)


@given(_FACTS)
def test_the_first_reason_in_order_wins_and_each_alone_refuses(facts: StartFacts) -> None:
    """Whatever the facts, the refusal is the earliest reason that holds on its own: so no
    asker's fact can hide an earlier one, and a reason never appears without its fact."""
    found = _reason(facts)
    alone = [r for r in Reason if _holds_alone(facts, r)]
    assert found == (alone[0] if alone else None)


def _holds_alone(facts: StartFacts, reason: Reason) -> bool:
    """Whether `reason` refuses `facts` with every other fact of it taken away."""
    base = StartFacts(issue=facts.issue, mode=facts.mode)
    only = {
        Reason.ROLE: dict(asked_by=facts.asked_by, status=facts.status, force=facts.force),
        Reason.BLOCKED: dict(waiting_for=facts.waiting_for, force=facts.force),
        Reason.PAUSED: dict(paused=facts.paused),
        Reason.MODEL_HELD: dict(model_held=facts.model_held),
        Reason.WIP: dict(load=facts.load),
        Reason.CAPACITY: dict(load=facts.load),
        Reason.DRAINING: dict(draining=facts.draining),
        Reason.BUDGET: dict(budget_spent=facts.budget_spent),
        Reason.NO_DAEMON: dict(hosted=facts.hosted),
        Reason.DAEMON_STARTING: dict(hosted=facts.hosted, serving=facts.serving),
        Reason.LIVE_WORKER: dict(live_worker=facts.live_worker),
    }[reason]
    return _reason(StartFacts(**{**base.__dict__, **only})) is reason
