"""The per-project status table: backend status names to Legion's phases and back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legion.core.model import Status
from legion.core.statusmap import StatusMap, parse_status_table
from legion.errors import ConfigError

LINEAR_DEFAULTS = ["Triage", "Backlog", "Todo", "In Progress", "In Review", "Done", "Canceled"]


def test_the_usual_names_map_without_a_table() -> None:
    statuses = StatusMap()
    assert statuses.to_legion("In Review") is Status.NEEDS_REVIEW
    assert statuses.to_legion("in progress") is Status.IN_PROGRESS
    assert statuses.to_legion("Todo") is Status.TODO
    assert statuses.to_legion("Canceled") is None  # not Legion's to act on
    assert statuses.unmapped(LINEAR_DEFAULTS) == ["Canceled"]
    assert statuses.missing(LINEAR_DEFAULTS) == [Status.RETRO]  # Icebox is a person's


def test_the_table_wins_over_names() -> None:
    statuses = StatusMap(parse_status_table({"QA": "Needs Review", "In Review": "Retro"}))
    assert statuses.to_legion("qa") is Status.NEEDS_REVIEW
    assert statuses.to_legion("In Review") is Status.RETRO
    names = ["Todo", "In Review", "QA"]
    assert statuses.to_backend(Status.NEEDS_REVIEW, names) == "QA"
    assert statuses.to_backend(Status.RETRO, names) == "In Review"
    assert statuses.to_backend(Status.TODO, names) == "Todo"


def test_a_status_nothing_maps_to_is_a_clear_error() -> None:
    with pytest.raises(ConfigError) as info:
        StatusMap().to_backend(Status.RETRO, LINEAR_DEFAULTS)
    message = str(info.value)
    assert "'Retro'" in message and "[statuses]" in message and "\n" not in message


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (["Todo"], "must be a table"),
        ({"QA": "Reviewing"}, "unknown status 'Reviewing'"),
        ({"QA": 3}, "must map a name"),
    ],
)
def test_a_bad_table_says_which_entry(value: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_status_table(value)


@given(st.sampled_from(list(Status)), st.lists(st.sampled_from(LINEAR_DEFAULTS), unique=True))
def test_to_backend_always_answers_with_a_name_that_maps_back(
    status: Status, names: list[str]
) -> None:
    statuses = StatusMap()
    try:
        name = statuses.to_backend(status, names)
    except ConfigError:
        assert all(statuses.to_legion(n) is not status for n in names)
    else:
        assert name in names and statuses.to_legion(name) is status
