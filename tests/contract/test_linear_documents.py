"""Every document Legion can send to Linear is valid against Linear's published schema."""

from __future__ import annotations

import pytest

import legion.trackers.linear.documents  # noqa: F401  (registers the documents)
from legion.graphql_client import DOCUMENTS
from tests.fakes.graphql_server import validation_errors
from tests.fakes.schemas import linear_schema

EXPECTED_OPERATIONS = {
    "LinearViewer",
    "LinearTeam",
    "LinearLabels",
    "LinearIssues",
    "LinearIssue",
    "LinearComments",
    "LinearComment",
    "LinearIssueCreate",
    "LinearIssueUpdate",
    "LinearLabelCreate",
    "LinearCommentCreate",
    "LinearCommentUpdate",
    "LinearIssueRelationCreate",
    "LinearIssueRelationDelete",
}


def test_every_expected_operation_is_registered() -> None:
    assert set(DOCUMENTS["linear"]) >= EXPECTED_OPERATIONS


@pytest.mark.parametrize("name", sorted(EXPECTED_OPERATIONS))
def test_document_is_valid_against_the_schema(name: str) -> None:
    text = DOCUMENTS["linear"][name]
    assert validation_errors(linear_schema(), text) == []
    # One named operation per document, and it is the one it is registered under.
    assert text.count("query ") + text.count("mutation ") == 1
    assert f" {name}" in text


def test_every_registered_document_is_valid() -> None:
    problems = {
        name: errors
        for name, text in DOCUMENTS["linear"].items()
        if (errors := validation_errors(linear_schema(), text))
    }
    assert problems == {}


def test_an_invalid_document_is_rejected() -> None:
    made_up = "query LinearBroken { viewer { id legionShoeSize } }"
    errors = validation_errors(linear_schema(), made_up)
    assert errors and "legionShoeSize" in errors[0]
    wrong_argument = 'query LinearBroken2 { issue(identifier: "ENG-1") { id } }'
    assert validation_errors(linear_schema(), wrong_argument)
