"""Every document the GitHub Issues tracker can send is valid against GitHub's published schema."""

from __future__ import annotations

import re

import pytest

from legion.graphql_client import DOCUMENTS
from legion.trackers.github_issues import documents
from tests.fakes.graphql_server import validation_errors
from tests.fakes.schemas import github_schema

EXPECTED_OPERATIONS = {
    "IssueRepository",
    "IssueLabelPage",
    "IssuePage",
    "IssueByNumber",
    "IssueComments",
    "IssueCreate",
    "IssueClose",
    "IssueReopen",
    "IssueUpdateBody",
    "IssueUpdateTitle",
    "IssueAddLabels",
    "IssueRemoveLabels",
    "IssueCreateLabel",
    "IssueAddComment",
    "IssueCommentUpdate",
    "IssueCommentNode",
    "ProjectAddItem",
    "ProjectSetStatus",
    "ProjectClearStatus",
}


def test_every_expected_operation_is_registered() -> None:
    assert set(DOCUMENTS["github"]) >= EXPECTED_OPERATIONS
    registered = {
        value.name
        for value in vars(documents).values()
        if isinstance(value, type(documents.ISSUE_PAGE))
    }
    assert registered == EXPECTED_OPERATIONS  # and none the test does not know of


@pytest.mark.parametrize("name", sorted(EXPECTED_OPERATIONS))
def test_document_is_valid_against_the_schema(name: str) -> None:
    text = DOCUMENTS["github"][name]
    assert validation_errors(github_schema(), text) == []
    # One named operation per document, and it is the one it is registered under.
    assert len(re.findall(r"\b(?:query|mutation)\s+\w+", text)) == 1
    assert re.search(rf"\b(?:query|mutation)\s+{name}\b", text)


def test_the_forge_and_the_tracker_never_share_an_operation_name() -> None:
    from legion.forges.github import documents as forge_documents

    forge = {
        value.name
        for value in vars(forge_documents).values()
        if isinstance(value, type(documents.ISSUE_PAGE))
    }
    assert forge and not forge & EXPECTED_OPERATIONS


def test_a_made_up_field_or_argument_is_rejected() -> None:
    made_up = documents.ISSUE_PAGE.text.replace("updatedAt", "updatedAt legionShoeSize", 1)
    errors = validation_errors(github_schema(), made_up)
    assert errors and "legionShoeSize" in errors[0]
    wrong_argument = documents.ISSUE.text.replace("issueOrPullRequest(number:", "issue(id:")
    assert validation_errors(github_schema(), wrong_argument)
    undeclared = documents.CLOSE_ISSUE.text.replace(", $withProject: Boolean!", "")
    assert any("withProject" in error for error in validation_errors(github_schema(), undeclared))
