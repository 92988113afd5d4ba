"""The parts the GitHub and Linear adapters are made of, each on its own, with no server:
identifiers, the status stores (labels or a project's field), a PR node read, Legion's review
convention, Linear's nodes (issue 20: each piece owns its state and is testable alone)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from legion.core.ids import issue_for_branch
from legion.core.marks import mark
from legion.core.model import Status
from legion.core.statusmap import StatusMap
from legion.errors import ConfigError, InputError, NotFoundError
from legion.forges.base import PrState
from legion.forges.github.records import as_issues, current, record_of
from legion.forges.github.reviews import (
    APPROVED_LABEL,
    CHANGES_LABEL,
    review_comment,
    reviews_of,
    verdict_labels,
)
from legion.trackers.github_issues.catalog import RepositoryCatalog
from legion.trackers.github_issues.identifiers import IssueKeys
from legion.trackers.github_issues.labels import IssueLabels
from legion.trackers.github_issues.repository import ProjectBoard, RepositoryInfo
from legion.trackers.github_issues.statuses import (
    ProjectStatusField,
    StatusLabels,
    status_store,
)
from legion.trackers.linear.nodes import blocking_relations, identifier_order

# -- identifiers -------------------------------------------------------------------------------


def test_issue_keys_map_key_n_to_issue_n_both_ways() -> None:
    keys = IssueKeys("WIDGETS", "acme/widgets")
    assert keys.number("widgets-12") == ("WIDGETS-12", 12)
    assert keys.identifier(12) == "WIDGETS-12"
    assert keys.of({"number": 7}) == "WIDGETS-7"
    with pytest.raises(NotFoundError, match="WIDGETS-N, for issue #N of acme/widgets"):
        keys.number("ENG-3")
    with pytest.raises(InputError, match="a blocker of WIDGETS-1"):
        keys.blocker_number("ENG-3", "WIDGETS-1")


# -- status stores -----------------------------------------------------------------------------


def _catalog(tmp_path: Path, project: ProjectBoard | None) -> RepositoryCatalog:
    """A catalog that knows the repository already (its cache file), so it asks no server."""

    def no_client() -> Any:
        raise AssertionError("no request expected")

    info = RepositoryInfo(
        slug="acme/widgets",
        id="R1",
        name_with_owner="acme/widgets",
        viewer="bot",
        has_issues=True,
        permission="WRITE",
        labels={"status: Todo": "L1"},
        project_number=project.number if project else None,
        project=project,
        fetched_at=1000.0,
    )
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(info.to_json()), encoding="utf-8")
    return RepositoryCatalog(
        no_client, "acme", "widgets", info.project_number, path, lambda: 1000.0
    )


def _no_request(node: Mapping[str, Any], doc: Any, variables: Mapping[str, Any]) -> Any:
    raise AssertionError("no request expected")


BOARD = ProjectBoard("P1", 3, "Board", False, "F1", (("o1", "Todo"), ("o2", "Shipping")))


def _labels_store(tmp_path: Path) -> StatusLabels:
    catalog = _catalog(tmp_path, None)
    labels = IssueLabels(catalog, _no_request, with_project=False)
    store = status_store(None, StatusMap(), catalog, _no_request, labels)
    assert isinstance(store, StatusLabels)
    return store


def _labelled(state: str, *names: str) -> dict[str, Any]:
    return {
        "state": state,
        "labels": {"nodes": [{"name": name, "id": f"id-{name}"} for name in names]},
    }


def test_the_status_labels_are_the_status_and_not_the_issues_labels(tmp_path: Path) -> None:
    store = _labels_store(tmp_path)
    assert store.status_of(_labelled("OPEN", "status: In Progress", "bug")) == (
        Status.IN_PROGRESS,
        "In Progress",
    )
    assert store.status_of(_labelled("OPEN")) == (Status.TRIAGE, "")
    assert store.status_of(_labelled("OPEN", "status: Done")) == (Status.TRIAGE, "Done")
    assert store.status_of(_labelled("CLOSED", "status: Todo")) == (Status.DONE, "Closed")
    assert store.status_of(_labelled("OPEN", "status: Todo", "status: Done"))[0] is Status.TRIAGE
    assert store.status_of(_labelled("OPEN", "status: Blocked")) == (None, "Blocked")
    assert not store.shows_label("status: Todo") and store.shows_label("bug")
    assert store.labels_at_creation("Todo") == ["status: Todo"]
    assert store.target(Status.TODO) == "Todo"  # the repository's own label first


def test_a_status_already_carried_is_not_written_again(tmp_path: Path) -> None:
    node = _labelled("OPEN", "status: In Progress")
    assert _labels_store(tmp_path).set(node, Status.IN_PROGRESS) is node


def test_the_project_field_holds_the_status_and_leaves_the_labels(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path, BOARD)
    labels = IssueLabels(catalog, _no_request, with_project=True)
    store = status_store(
        3, StatusMap({"Shipping": Status.NEEDS_REVIEW}), catalog, _no_request, labels
    )
    assert isinstance(store, ProjectStatusField)
    item = {"project": {"id": "P1"}, "id": "I1", "fieldValueByName": {"name": "Shipping"}}
    node = {"state": "OPEN", "labels": {"nodes": []}, "projectItems": {"nodes": [item]}}
    assert store.status_of(node) == (Status.NEEDS_REVIEW, "Shipping")
    assert store.status_of({**node, "projectItems": {"nodes": []}}) == (Status.TRIAGE, "")
    assert store.shows_label("status: Todo")
    assert store.labels_at_creation("Todo") == []
    assert store.names(catalog.info()) == ["Todo", "Shipping"]
    with pytest.raises(ConfigError, match="has no option for 'In Progress'"):
        store.target(Status.IN_PROGRESS)


# -- a pull request and Legion's review --------------------------------------------------------


def _pr_node(**fields: Any) -> dict[str, Any]:
    return {
        "id": "PR1",
        "number": 4,
        "title": "t",
        "body": "",
        "headRefName": "legion/ENG-12",
        "baseRefName": "main",
        "state": "OPEN",
        **fields,
    }


def test_a_pr_node_reads_as_its_branchs_issue_with_its_label_verdict() -> None:
    comment = {"body": review_comment("approved", "fine", "rev"), "createdAt": "2026-01-02"}
    node = _pr_node(labels={"nodes": [{"name": APPROVED_LABEL}]}, comments={"nodes": [comment]})
    record = record_of(node)
    assert record.pr.issue == "ENG-12" and record.pr.state is PrState.OPEN
    assert record.pr.reviews[-1].outcome == "approved"
    assert record.mergeable == "UNKNOWN" and record.checks is None
    assert as_issues(record, "ENG-9").pr.issue == "ENG-9"
    assert current([record]) is record and current([]) is None
    assert issue_for_branch("feature/x") is None


def test_a_review_comment_without_its_label_is_only_a_comment() -> None:
    comment = {
        "body": review_comment("changes_requested", "fix", "rev"),
        "createdAt": "x",
        "viewerDidAuthor": True,  # Legion's token wrote it
    }
    (review,) = reviews_of({"comments": {"nodes": [comment]}}, frozenset())
    assert review.outcome == "commented" and review.body == "fix"
    assert reviews_of({"comments": {"nodes": [{"body": mark("hello", "rev")}]}}, frozenset()) == ()
    assert verdict_labels("approved") == (APPROVED_LABEL, CHANGES_LABEL)
    assert verdict_labels("changes_requested") == (CHANGES_LABEL, APPROVED_LABEL)
    assert verdict_labels("commented") is None


# -- Linear's nodes ----------------------------------------------------------------------------


def test_linear_blockers_are_the_blocks_relations_pointing_at_the_issue() -> None:
    relations = [
        {"id": "r1", "type": "blocks", "issue": {"identifier": "ENG-2"}},
        {"id": "r2", "type": "related", "issue": {"identifier": "ENG-3"}},
        None,
    ]
    assert blocking_relations({"inverseRelations": {"nodes": relations}}) == {"ENG-2": "r1"}
    assert sorted(["ENG-10", "ENG-2"], key=identifier_order) == ["ENG-2", "ENG-10"]
