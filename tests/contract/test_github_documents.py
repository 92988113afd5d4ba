"""Every document Legion can send to GitHub is valid against GitHub's published schema."""

from __future__ import annotations

import re

import pytest

from legion.forges.github import documents
from legion.graphql_client import DOCUMENTS
from tests.fakes.graphql_server import validation_errors
from tests.fakes.schemas import github_schema

EXPECTED_OPERATIONS = {
    "RepositoryContext",
    "PullRequestByNumber",
    "PullRequestPage",
    "CreatePullRequest",
    "MarkPullRequestReady",
    "ConvertPullRequestToDraft",
    "AddLabels",
    "RemoveLabels",
    "CreateLabel",
    "AddPullRequestComment",
    "MergePullRequest",
}


def test_every_expected_operation_is_registered() -> None:
    assert set(DOCUMENTS["github"]) >= EXPECTED_OPERATIONS


@pytest.mark.parametrize("name", sorted(EXPECTED_OPERATIONS))
def test_document_is_valid_against_the_schema(name: str) -> None:
    text = DOCUMENTS["github"][name]
    assert validation_errors(github_schema(), text) == []
    # One named operation per document, and it is the one it is registered under.
    assert len(re.findall(r"\b(?:query|mutation)\s+\w+", text)) == 1
    assert re.search(rf"\b(?:query|mutation)\s+{name}\b", text)


def test_every_registered_document_is_valid() -> None:
    problems = {
        name: errors
        for name, text in DOCUMENTS["github"].items()
        if (errors := validation_errors(github_schema(), text))
    }
    assert problems == {}


@pytest.mark.parametrize("count", [1, 2, documents.BATCH_SIZE])
def test_a_generated_batch_is_valid_and_named(count: int) -> None:
    doc = documents.pr_batch_document(count)
    assert validation_errors(github_schema(), doc.text) == []
    assert doc.name == documents.BATCH_OPERATION
    assert re.search(rf"\bquery {doc.name}\(", doc.text)
    # One alias per branch, each branch a variable: no branch name is ever query text.
    assert re.findall(r"\bi(\d+): pullRequests\(headRefName: \$h(\d+),", doc.text) == [
        (str(n), str(n)) for n in range(count)
    ]


@pytest.mark.parametrize(
    ("branches", "numbers"), [(0, 1), (1, 1), (3, 2), (documents.BATCH_SIZE - 1, 1), (0, 50)]
)
def test_a_batch_with_pr_numbers_is_valid(branches: int, numbers: int) -> None:
    doc = documents.pr_batch_document(branches, numbers)
    assert validation_errors(github_schema(), doc.text) == []
    assert doc.name == documents.BATCH_OPERATION
    # One alias per branch, then one per PR number, each number a variable of its own.
    assert len(re.findall(r"\bi\d+: pullRequests\(", doc.text)) == branches
    assert re.findall(r"\bp(\d+): pullRequest\(number: \$n(\d+)\)", doc.text) == [
        (str(k), str(k)) for k in range(numbers)
    ]
    assert len(re.findall(r"\$n\d+: Int!", doc.text)) == numbers


def test_every_generated_document_is_valid_at_each_size() -> None:
    for name, build in documents.GENERATED.items():
        for count in (1, documents.BATCH_SIZE):
            doc = build(count)
            assert doc.name == name
            assert validation_errors(github_schema(), doc.text) == []


def test_a_batch_has_at_most_batch_size_aliases() -> None:
    with pytest.raises(ValueError, match="1 to 50"):
        documents.pr_batch_document(documents.BATCH_SIZE + 1)
    with pytest.raises(ValueError, match="1 to 50"):
        documents.pr_batch_document(documents.BATCH_SIZE, 1)
    for empty_or_negative in ((0, 0), (0,), (-1, 2), (2, -1)):
        with pytest.raises(ValueError):
            documents.pr_batch_document(*empty_or_negative)


def test_an_invalid_document_is_rejected() -> None:
    made_up = "query GitHubBroken { viewer { login legionShoeSize } }"
    errors = validation_errors(github_schema(), made_up)
    assert errors and "legionShoeSize" in errors[0]
    wrong_argument = (
        'query GitHubBroken2 { repository(owner: "a", name: "b") { pullRequest(id: 1) { id } } }'
    )
    assert validation_errors(github_schema(), wrong_argument)
    broken_batch = documents.pr_batch_document(2).text.replace("headRefName", "headRefNames")
    assert validation_errors(github_schema(), broken_batch)
    by_string = documents.pr_batch_document(1, 1).text.replace("$n0: Int!", "$n0: String!")
    assert validation_errors(github_schema(), by_string)


def _cost(text: str) -> tuple[int, int]:
    """(nodes, connection pages) a query may make GitHub read: each `first:`/`last:` connection
    returns up to that many nodes for every node above it, and is one page per such node."""
    from graphql import parse
    from graphql.language import (
        FieldNode,
        FragmentDefinitionNode,
        FragmentSpreadNode,
        InlineFragmentNode,
        IntValueNode,
        OperationDefinitionNode,
        SelectionSetNode,
    )

    ast = parse(text)
    fragments = {d.name.value: d for d in ast.definitions if isinstance(d, FragmentDefinitionNode)}

    def walk(selections: SelectionSetNode | None, above: int) -> tuple[int, int]:
        nodes = pages = 0
        for item in selections.selections if selections else ():
            if isinstance(item, FragmentSpreadNode):
                found = walk(fragments[item.name.value].selection_set, above)
            elif isinstance(item, InlineFragmentNode):
                found = walk(item.selection_set, above)
            else:
                assert isinstance(item, FieldNode)
                size = next(
                    (
                        int(arg.value.value)
                        for arg in item.arguments or ()
                        if arg.name.value in ("first", "last")
                        and isinstance(arg.value, IntValueNode)
                    ),
                    None,
                )
                if size is None:
                    found = walk(item.selection_set, above)
                else:
                    inner = walk(item.selection_set, above * size)
                    found = (inner[0] + above * size, inner[1] + above)
            nodes, pages = nodes + found[0], pages + found[1]
        return nodes, pages

    operation = next(d for d in ast.definitions if isinstance(d, OperationDefinitionNode))
    return walk(operation.selection_set, 1)


def test_the_size_of_a_full_batch_is_what_the_docstring_says() -> None:
    """The checks come in the same request as the rest of each PR: the batch stays far below
    GitHub's 500,000-node limit, and its cost is the one documented."""
    nodes, pages = _cost(documents.pr_batch_document(documents.BATCH_SIZE).text)
    assert nodes <= 500_000
    assert documents.__doc__ is not None
    said = " ".join(documents.__doc__.split())
    assert f"= {nodes:,} nodes" in said
    assert f"{pages:,} connection pages, {-(-pages // 100)} points" in said
    assert "contexts(first:" in documents.pr_batch_document(1).text
