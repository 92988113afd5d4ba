"""docs/state-machine.md shows the decision table to people; this keeps it true to the code.

Every row of the documented table is expanded over its wildcards and each combination it covers
(and that no earlier row covers) must decide to the documented action and mode.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from legion.core.decide import PHASE_MODE, ROW_WORDS, Observation, decide, explain
from legion.core.model import ChecksState, Label, Mode, ReviewOutcome, Status

DOC = Path(__file__).resolve().parents[2] / "docs" / "state-machine.md"
ACTIVE = [Status.BACKLOG, Status.TODO, Status.IN_PROGRESS, Status.NEEDS_REVIEW, Status.RETRO]
# PR column -> (has_pr, review) combinations
PR_CELLS = {
    "none": [(False, ReviewOutcome.NONE)],
    "no review": [(True, ReviewOutcome.NONE)],
    "approved": [(True, ReviewOutcome.APPROVED)],
    "changes requested": [(True, ReviewOutcome.CHANGES_REQUESTED)],
    "lookup failed": [(False, ReviewOutcome.UNKNOWN), (True, ReviewOutcome.UNKNOWN)],
}
PR_CELLS["any"] = [combo for cells in PR_CELLS.values() for combo in cells]
# Checks column -> the checks states it covers ("pending, unknown": either)
CHECKS: list[ChecksState] = list(ChecksState)


def _checks(cell: str) -> list[ChecksState]:
    if cell == "any":
        return CHECKS
    return [ChecksState(part.strip()) for part in cell.split(",")]


ALL_LABEL_SETS = [
    frozenset(c) for n in range(len(Label) + 1) for c in itertools.combinations(Label, n)
]


NOT_OPTED_IN = " not opted in"


def _statuses(cell: str) -> list[tuple[Status, bool]]:
    """(status, opted in) pairs: a bare status covers both; "Backlog not opted in" one."""
    if cell == "active":
        return [(status, opted) for status in ACTIVE for opted in (False, True)]
    pairs = []
    for part in cell.split(","):
        if part.endswith(NOT_OPTED_IN):
            pairs.append((Status.parse(part.removesuffix(NOT_OPTED_IN)), False))
        else:
            pairs += [(Status.parse(part), opted) for opted in (False, True)]
    return pairs


def _label_sets(cell: str) -> list[frozenset[Label]]:
    if cell == "any":
        return ALL_LABEL_SETS
    if cell == "(none)":
        return [frozenset()]
    required = {Label(name.strip()) for name in cell.split("+")}
    return [labels for labels in ALL_LABEL_SETS if required <= labels]


def _live(cell: str) -> list[bool]:
    return {"yes": [True], "no": [False], "any": [False, True]}[cell]


# Open blockers column -> the observation's `open_blockers`.
BLOCKERS: dict[str, list[tuple[str, ...]]] = {"yes": [("LEG-1",)], "no": [()]}
BLOCKERS["any"] = BLOCKERS["no"] + BLOCKERS["yes"]


# Children column -> the observation's (children, open_children).
CHILDREN: dict[str, list[tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "none": [((), ())],
    "all Done": [(("LEG-9",), ())],
    "some open": [(("LEG-9",), ("LEG-9",))],
}
CHILDREN["any"] = [pair for cells in CHILDREN.values() for pair in cells]


LATEST: list[Mode | None] = [None, *Mode]


def _latest(cell: str, status: Status) -> list[Mode | None]:
    if cell == "any":
        return LATEST
    assert cell == "another mode", cell
    return [mode for mode in Mode if mode is not PHASE_MODE.get(status)]


def _observation(
    status: Status,
    labels: frozenset[Label],
    live: bool,
    has_pr: bool,
    review: ReviewOutcome,
    latest: Mode | None,
    opted: bool,
    checks: ChecksState = ChecksState.NONE,
    blockers: tuple[str, ...] = (),
    children: tuple[tuple[str, ...], tuple[str, ...]] = ((), ()),
) -> Observation:
    return Observation(
        status=status,
        labels=labels,
        has_live_worker=live,
        has_pr=has_pr,
        pr_review=review,
        latest_mode=latest,
        opted_in=opted,
        checks=checks,
        open_blockers=blockers,
        children=children[0],
        open_children=children[1],
    )


def _rows() -> list[list[str]]:
    rows = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].isdigit():
            rows.append(cells)
    return rows


def test_documented_table_matches_decide() -> None:
    rows = _rows()
    assert len(rows) >= 21
    covered: set[tuple[object, ...]] = set()
    checked = 0
    for (
        number,
        status_cell,
        labels_cell,
        live_cell,
        pr_cell,
        checks_cell,
        latest_cell,
        blockers_cell,
        children_cell,
        action,
        mode_cell,
    ) in rows:
        for (
            (status, opted),
            labels,
            live,
            (has_pr, review),
            checks,
            blockers,
            children,
        ) in itertools.product(
            _statuses(status_cell),
            _label_sets(labels_cell),
            _live(live_cell),
            PR_CELLS[pr_cell],
            _checks(checks_cell),
            BLOCKERS[blockers_cell],
            CHILDREN[children_cell],
        ):
            for latest in _latest(latest_cell, status):
                key = (status, labels, live, has_pr, review, latest, opted, checks, blockers)
                key += children
                if key in covered:
                    continue  # an earlier row decides it
                covered.add(key)
                observation = _observation(
                    status, labels, live, has_pr, review, latest, opted, checks, blockers, children
                )
                verdict = explain(observation)
                decision = verdict.decision
                assert decision == decide(observation)
                assert decision.action.value == action, f"row {number}: {observation}"
                # The row the code names is the row the doc shows (the action log keeps it).
                assert verdict.row == int(number), f"row {number}: {observation}"
                expected_mode = None
                if mode_cell == "the phase's":
                    expected_mode = PHASE_MODE[status]
                elif mode_cell:
                    expected_mode = Mode(mode_cell)
                assert decision.mode == expected_mode, f"row {number}: {observation}"
                checked += 1
    # Each combination is covered once (`covered` holds only well-formed ones), so counting
    # them is enough to show that none is left out.
    everything = (
        len(Status)
        * len(ALL_LABEL_SETS)
        * 2  # live
        * len(PR_CELLS["any"])
        * len(LATEST)
        * 2  # opted in
        * len(CHECKS)
        * len(BLOCKERS["any"])
        * len(CHILDREN["any"])
    )
    assert len(covered) == everything, "the documented table leaves some inputs out"
    assert checked == everything


def test_documented_actions_are_all_the_actions() -> None:
    from legion.core.decide import Action

    documented = {row[-2] for row in _rows()}  # the Action column
    assert documented == {action.value for action in Action}
    assert re.search(r"uuid5\(UUID\(project_id\), \"<ISSUE>:<mode>\"\)", DOC.read_text())


def test_every_row_has_words_and_no_more() -> None:
    assert sorted(ROW_WORDS) == [int(row[0]) for row in _rows()]
