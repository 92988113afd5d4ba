"""CI checks: how GitHub's check runs and commit statuses read as Legion's `ChecksState`, and
how a pull request's checks combine (issue 19 item 1)."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legion.core.decide import Observation, decide
from legion.core.model import ChecksState, Label, ReviewOutcome, Status, combine_checks
from legion.forges.base import Check, PrState, PullRequest, Review
from legion.forges.github.checks import FAILED_CONCLUSIONS, check_of, checks_line, checks_of
from legion.reconcile.observe import IssueState, Snapshot
from legion.trackers.base import Issue

C = ChecksState
R = ReviewOutcome


def run(status: str = "COMPLETED", conclusion: str | None = "SUCCESS") -> dict[str, object]:
    return {
        "__typename": "CheckRun",
        "name": "ci",
        "status": status,
        "conclusion": conclusion,
        "detailsUrl": "https://ci.example/1",
    }


def status(state: str) -> dict[str, object]:
    return {"__typename": "StatusContext", "context": "ci/x", "state": state, "targetUrl": None}


@pytest.mark.parametrize(
    ("node", "state"),
    [
        *((run(conclusion=c), C.FAILING) for c in sorted(FAILED_CONCLUSIONS)),
        (run(conclusion="SUCCESS"), C.PASSING),
        (run(conclusion="NEUTRAL"), C.PASSING),
        (run(conclusion="SKIPPED"), C.PASSING),
        *(
            (run(status=s, conclusion=None), C.PENDING)
            for s in ("QUEUED", "IN_PROGRESS", "PENDING", "REQUESTED", "WAITING")
        ),
        (run(conclusion=None), C.PENDING),  # completed, conclusion not written yet
        (status("FAILURE"), C.FAILING),
        (status("ERROR"), C.FAILING),
        (status("PENDING"), C.PENDING),
        (status("EXPECTED"), C.PENDING),
        (status("SUCCESS"), C.PASSING),
    ],
)
def test_a_check_run_or_a_status_reads_as_its_state(node: dict[str, object], state: C) -> None:
    check = check_of(node)
    assert check is not None and check.state is state


def test_a_check_keeps_its_name_and_log_link() -> None:
    assert check_of(run()) == Check("ci", C.PASSING, "https://ci.example/1")
    assert check_of(status("SUCCESS")) == Check("ci/x", C.PASSING, "")
    assert check_of(None) is None
    assert check_of({"__typename": "SomethingNew"}) is None


def test_a_rollup_that_is_null_is_no_checks() -> None:
    assert checks_of(None) == ()
    rollup = {"state": "SUCCESS", "contexts": {"totalCount": 0, "nodes": []}}
    assert checks_of(rollup) == ()


def test_checks_beyond_the_page_are_one_check_when_the_rollup_disagrees() -> None:
    page = {"totalCount": 3, "nodes": [run()]}
    assert checks_of({"state": "SUCCESS", "contexts": page}) == (check_of(run()),)
    found = checks_of({"state": "PENDING", "contexts": page}, "https://gh/pull/2")
    assert found[-1] == Check("2 more checks", C.PENDING, "https://gh/pull/2/checks")


def test_combine_checks() -> None:
    assert combine_checks([]) is C.NONE
    assert combine_checks([C.PASSING]) is C.PASSING
    assert combine_checks([C.PASSING, C.PENDING]) is C.PENDING
    assert combine_checks([C.PENDING, C.FAILING, C.PASSING]) is C.FAILING


@given(st.lists(st.sampled_from([C.PASSING, C.FAILING, C.PENDING])))
def test_failing_wins_then_pending_then_passing(states: list[C]) -> None:
    combined = combine_checks(states)
    if C.FAILING in states:
        assert combined is C.FAILING
    elif C.PENDING in states:
        assert combined is C.PENDING
    else:
        assert combined is (C.PASSING if states else C.NONE)


def pr(*checks: Check) -> PullRequest:
    return PullRequest(
        1, "LEG-1", "t", "", "legion/leg-1", "main", PrState.OPEN, False, (), check_runs=checks
    )


def test_a_pull_request_says_its_checks_and_which_fail() -> None:
    lint = Check("lint", C.FAILING, "https://ci.example/lint")
    build = Check("build", C.PENDING)
    assert pr().checks is C.NONE  # the embedded forge: no CI
    assert pr(Check("ok", C.PASSING), build).checks is C.PENDING
    assert pr(Check("ok", C.PASSING), build, lint).checks is C.FAILING
    assert pr(lint, build).failing_checks == (lint,)
    assert checks_line(pr(lint, build)) == "failing: lint <https://ci.example/lint>; pending: build"
    assert checks_line(pr(Check("ok", C.PASSING))) == ""


# -- what `legion pr view` and `legion state` print ---------------------------------------------


def _printed(renderable: object, width: int = 160) -> str:
    from rich.console import Console

    console = Console(width=width, color_system=None, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


HOSTILE = "lint\x1b]52;c;aGk=\x07\u202e"  # an OSC clipboard write and a bidi override


def test_pr_view_lists_the_checks_that_are_not_passing_escaped() -> None:
    from legion.cli.render import pr_detail, pr_json

    failing = Check(HOSTILE, C.FAILING, "https://ci.example/\x1b[2J")
    text = _printed(pr_detail(pr(Check("ok", C.PASSING), failing, Check("build", C.PENDING))))
    assert "Checks: failing" in text
    assert "failing: lint\\x1b]52;c;aGk=\\x07\\u202e  https://ci.example/\\x1b[2J" in text
    assert "pending: build" in text and "ok" not in text.split("Checks:")[1]
    assert "\x1b" not in text and "\u202e" not in text
    data = pr_json(pr(failing))
    assert data["checks"] == "failing"
    assert data["failing_checks"] == [
        {
            "name": HOSTILE,
            "state": "failing",
            "status": "",
            "conclusion": "",
            "url": "https://ci.example/\x1b[2J",
        }
    ]
    assert pr_json(pr())["checks"] == "none" and pr_json(pr())["failing_checks"] == []


def _state(checks: C, *checks_found: Check, review: R = R.APPROVED) -> IssueState:
    issue = Issue("LEG-1", "Parser", "", Status.NEEDS_REVIEW, frozenset({"worker-done"}))
    observation = Observation(
        Status.NEEDS_REVIEW,
        frozenset({Label.WORKER_DONE}),
        has_pr=True,
        pr_review=review,
        checks=checks,
    )
    found = replace(pr(*checks_found), reviews=(Review("approved", "r", "", ""),))
    return IssueState(
        issue, found, review, False, decide(observation), None, observation, False, checks=checks
    )


def test_state_says_the_checks_and_why_it_waits() -> None:
    from legion.cli.render import state_table

    waiting = _state(C.PENDING, Check("build", C.PENDING))
    assert waiting.to_json()["checks"] == "pending"
    assert waiting.to_json()["waiting"] == "checks pending"
    text = _printed(state_table(Snapshot([waiting], []), width=120))
    assert "#1 approved, checks pending" in text
    assert "skip (checks pending)" in text

    failing = _state(C.FAILING, Check(HOSTILE, C.FAILING))
    assert failing.to_json()["suggested_action"] == "resume_implementer_for_checks"
    assert failing.to_json()["waiting"] is None
    text = _printed(state_table(Snapshot([failing], []), width=120))
    assert "checks failing" in text and "resume implement (checks failing)" in text

    no_ci = _state(C.NONE)
    text = _printed(state_table(Snapshot([no_ci], []), width=120))
    assert "checks" not in text and "move to Retro, start retro" in text
    unknown = _state(C.UNKNOWN, review=R.UNKNOWN)
    assert unknown.to_json()["checks"] == "unknown"
    assert unknown.waiting == "forge not read"


def test_a_workers_prompt_names_each_failing_check_and_its_log_escaped() -> None:
    from legion.sessions.prompts import failing_checks_text

    text = failing_checks_text(
        pr(
            Check(HOSTILE, C.FAILING, "https://ci.example/1"),
            Check("ci/lint", C.FAILING),
            Check("build", C.PENDING),
        )
    )
    assert text.splitlines() == [
        "CI checks fail on PR #1:",
        "- lint\\x1b]52;c;aGk=\\x07\\u202e: https://ci.example/1",
        "- ci/lint (no log link; see the PR's checks)",
    ]


# -- a check's log (issue 38) --------------------------------------------------------------------


@given(st.text(alphabet=st.sampled_from("ab\n\u00e9\u4e2d"), max_size=3000), st.booleans())
def test_a_log_tail_is_the_end_within_both_caps(text: str, cut: bool) -> None:
    from legion.core.text import log_tail

    with_small = {"LOG_TAIL_LINES": 20, "LOG_TAIL_BYTES": 200}
    import legion.core.text as module

    saved = {name: getattr(module, name) for name in with_small}
    try:
        for name, value in with_small.items():
            setattr(module, name, value)
        tail, left_out = log_tail(text, cut=cut)
    finally:
        for name, value in saved.items():
            setattr(module, name, value)
    assert len(tail.encode()) <= 200 and len(tail.splitlines()) <= 20
    assert text.endswith(tail)
    assert left_out == (cut or tail != text)


def test_the_named_check_is_exact_then_by_case_else_not_found() -> None:
    from legion.errors import NotFoundError
    from legion.forges.base import named_check

    lint, test = Check("Lint", C.PASSING), Check("test", C.FAILING)
    assert named_check((lint, test), "test", 1) is test
    assert named_check((lint, test), "lint", 1) is lint
    with pytest.raises(NotFoundError, match=r"^PR #3 has no check 'x' \(its checks: Lint, test\)$"):
        named_check((lint, test), "x", 3)
    with pytest.raises(NotFoundError, match="its checks: none"):
        named_check((), "x", 3)
