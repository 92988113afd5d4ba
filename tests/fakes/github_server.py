"""A fake GitHub GraphQL API: one repository with pull requests, labels, reviews and comments.

Requests are validated and executed against GitHub's published schema (`GraphQLFake`), so a
document the real API would refuse is refused here too. Resolvers cover exactly what Legion's
GitHub forge asks: `repository(owner:, name:)` with its `pullRequests(headRefName:, states:,
first:, after:, orderBy:)` (really filtered, ordered and paged), `pullRequest(number:)`,
`label(name:)`, the viewer, and the mutations, which change the data.

Like GitHub: GraphQL errors come with HTTP 200 and a top-level `type` (NOT_FOUND,
UNPROCESSABLE), a bad token gets 401. With `remote` (a bare repository, the project's git
remote) a PR's head commit is the remote branch's, and a PR cannot be opened for a branch that
was not pushed.
"""

from __future__ import annotations

import hashlib
import subprocess
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.fakes.graphql_server import FakeError, GraphQLFake, attach
from tests.fakes.schemas import github_schema

Node = dict[str, Any]

_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)


def _not_found(message: str) -> FakeError:
    return FakeError(message, top_level={"type": "NOT_FOUND"})


def _unprocessable(message: str) -> FakeError:
    return FakeError(message, top_level={"type": "UNPROCESSABLE"})


class FakeGitHub(GraphQLFake):
    name = "github"
    graphql_path = "/graphql"

    def __init__(
        self,
        *,
        token: str = "fake-github-token-for-tests",
        owner: str = "acme",
        repo: str = "widgets",
        viewer: str = "legion-bot",
        permission: str = "WRITE",
        remote: Path | None = None,
    ) -> None:
        super().__init__(github_schema(), token=token)
        _attach_resolvers()
        self.owner = owner
        self.repo = repo
        self.repository_id = "R_kgDOLegion1"
        self.viewer = viewer
        self.default_branch = "main"
        self.labels: dict[str, Node] = {}  # by name
        self.pulls: dict[int, Node] = {}  # by number
        self.vanished: set[int] = set()  # PRs that now answer NOT_FOUND
        self.merges: list[tuple[int, str]] = []  # (number, merge method) of each merge
        self.reset(remote=remote, permission=permission)

    def reset(self, *, remote: Path | None = None, permission: str = "WRITE") -> None:
        """Empty again, for the next test (one running fake can serve a whole module)."""
        with self.lock:
            self.requests.clear()
            self.faults.clear()
            self.labels.clear()
            self.pulls.clear()
            self.vanished.clear()
            self.merges.clear()
            self.remote = remote
            self.permission = permission
            self._clock = 0

    # -- fixture data --------------------------------------------------------------------------

    def now(self) -> str:
        self._clock += 1
        return (_EPOCH + timedelta(seconds=self._clock)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def add_label(self, name: str, color: str = "ededed") -> Node:
        with self.lock:
            if name not in self.labels:
                self.labels[name] = {
                    "__typename": "Label",
                    "id": f"LA_{len(self.labels) + 1}",
                    "name": name,
                    "color": color,
                }
            return self.labels[name]

    def add_pr(
        self,
        branch: str,
        *,
        state: str = "OPEN",
        draft: bool = False,
        title: str | None = None,
        body: str = "",
        base: str = "main",
        labels: tuple[str, ...] = (),
        mergeable: str = "MERGEABLE",
        checks: str | None = "SUCCESS",
        review_decision: str | None = None,
        head_oid: str | None = None,
        fork: bool = False,
    ) -> Node:
        """A PR as if opened on GitHub (from a `fork` of the repository, or from the repository
        itself). Without `head_oid`, the head is the remote branch's."""
        with self.lock:
            number = max(self.pulls, default=0) + 1
            stamp = self.now()
            pr: Node = {
                "__typename": "PullRequest",
                "id": f"PR_{number}",
                "number": number,
                "title": title or f"Work on {branch}",
                "body": body,
                "url": f"https://github.com/{self.owner}/{self.repo}/pull/{number}",
                "state": state,
                "isDraft": draft,
                "headRefName": branch,
                "baseRefName": base,
                "isCrossRepository": fork,
                "createdAt": stamp,
                "updatedAt": stamp,
                "mergeable": mergeable,
                "_author": self.viewer,
                "_labels": [self.add_label(name)["name"] for name in labels],
                "_reviews": [],
                "_comments": [],
                "_checks": checks,
                "_review_decision": review_decision,
                "_head_oid": head_oid,
                "_merge_commit": _sha(f"merge {number}") if state == "MERGED" else None,
            }
            self.pulls[number] = pr
            return pr

    def add_native_review(self, number: int, state: str, login: str, body: str = "") -> None:
        with self.lock:
            pr = self.pulls[number]
            stamp = self.now()
            pr["_reviews"].append(
                {"state": state, "login": login, "body": body, "submittedAt": stamp}
            )
            pr["updatedAt"] = stamp

    def vanish(self, number: int) -> None:
        with self.lock:
            self.vanished.add(number)

    def label_names(self, number: int) -> list[str]:
        with self.lock:
            return list(self.pulls[number]["_labels"])

    def comments(self, number: int) -> list[str]:
        with self.lock:
            return [comment["body"] for comment in self.pulls[number]["_comments"]]

    # -- GitHub's ways -------------------------------------------------------------------------

    def authorized(self, header: str | None) -> bool:
        return header in (f"Bearer {self.token}", f"bearer {self.token}", f"token {self.token}")

    # -- what resolvers use --------------------------------------------------------------------

    def repository_node(self) -> Node:
        return {
            "__typename": "Repository",
            "id": self.repository_id,
            "name": self.repo,
            "nameWithOwner": f"{self.owner}/{self.repo}",
            "viewerPermission": self.permission,
            "defaultBranchRef": {"__typename": "Ref", "name": self.default_branch},
        }

    def pr_by_node_id(self, node_id: str) -> Node:
        for pr in self.pulls.values():
            if pr["id"] == node_id and pr["number"] not in self.vanished:
                return pr
        raise _not_found(f"Could not resolve to a node with the global id of '{node_id}'")

    def remote_head(self, branch: str) -> str | None:
        if self.remote is None:
            return None
        result = subprocess.run(
            [
                "git",
                "--git-dir",
                str(self.remote),
                "rev-parse",
                "--verify",
                "--quiet",
                f"refs/heads/{branch}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        return result.stdout.strip() if result.returncode == 0 else None

    def head_oid(self, pr: Node) -> str:
        if pr["_head_oid"] is not None:
            return str(pr["_head_oid"])
        return self.remote_head(pr["headRefName"]) or _sha(pr["headRefName"])

    def touch(self, pr: Node) -> None:
        pr["updatedAt"] = self.now()


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def _fake(info: Any) -> FakeGitHub:
    fake = info.context
    assert isinstance(fake, FakeGitHub)
    return fake


def _connection(nodes: list[Any], offset: int = 0, more: bool = False) -> Node:
    return {
        "nodes": nodes,
        "totalCount": len(nodes),
        "pageInfo": {
            "hasNextPage": more,
            "hasPreviousPage": offset > 0,
            "startCursor": str(offset) if nodes else None,
            "endCursor": str(offset + len(nodes)) if nodes else None,
        },
    }


def _user(login: str) -> Node:
    return {"__typename": "User", "login": login}


# -- Query and Repository ----------------------------------------------------------------------


def _viewer(_parent: Any, info: Any) -> Node:
    return _user(_fake(info).viewer)


def _repository(_parent: Any, info: Any, owner: str, name: str, **_: Any) -> Node:
    fake = _fake(info)
    if (owner.lower(), name.lower()) != (fake.owner.lower(), fake.repo.lower()):
        raise _not_found(f"Could not resolve to a Repository with the name '{owner}/{name}'.")
    return fake.repository_node()


def _label(_parent: Any, info: Any, name: str) -> Node | None:
    return _fake(info).labels.get(name)  # GitHub answers null for a missing label


def _pull_request(_parent: Any, info: Any, number: int) -> Node:
    fake = _fake(info)
    pr = fake.pulls.get(number)
    if pr is None or number in fake.vanished:
        raise _not_found(f"Could not resolve to a PullRequest with the number of {number}.")
    return pr


def _pull_requests(
    _parent: Any,
    info: Any,
    states: list[str] | None = None,
    labels: list[str] | None = None,
    headRefName: str | None = None,
    baseRefName: str | None = None,
    orderBy: dict[str, str] | None = None,
    after: str | None = None,
    first: int | None = None,
    **_: Any,
) -> Node:
    fake = _fake(info)
    if first is None or not 1 <= first <= 100:
        raise FakeError("You must provide a `first` value between 1 and 100 (the fake needs it).")
    found = [
        pr
        for pr in fake.pulls.values()
        if (headRefName is None or pr["headRefName"] == headRefName)
        and (baseRefName is None or pr["baseRefName"] == baseRefName)
        and (not states or pr["state"] in states)
        and (not labels or set(labels) & set(pr["_labels"]))
    ]
    order = orderBy or {"field": "CREATED_AT", "direction": "ASC"}
    key = {"CREATED_AT": "createdAt", "UPDATED_AT": "updatedAt"}.get(order["field"], "createdAt")
    found.sort(key=lambda pr: (pr[key], pr["number"]), reverse=order["direction"] == "DESC")
    offset = int(after) if after else 0
    page = found[offset : offset + first]
    return _connection(page, offset, offset + first < len(found))


# -- PullRequest fields --------------------------------------------------------------------------


def _pr_number(pr: Node, info: Any) -> int:
    if pr["number"] in _fake(info).vanished:
        # A PR deleted between listing and reading: its item of the list comes back null.
        raise _not_found(f"Could not resolve to a PullRequest with the number of {pr['number']}.")
    return int(pr["number"])


def _pr_head_oid(pr: Node, info: Any) -> str:
    return _fake(info).head_oid(pr)


def _pr_merge_commit(pr: Node, _info: Any) -> Node | None:
    oid = pr["_merge_commit"]
    return None if oid is None else {"__typename": "Commit", "oid": oid}


def _pr_labels(pr: Node, info: Any, first: int | None = None, **_: Any) -> Node:
    fake = _fake(info)
    names = pr["_labels"][: first or 100]
    return _connection([fake.labels[name] for name in names])


def _pr_latest_reviews(pr: Node, _info: Any, first: int | None = None, **_: Any) -> Node:
    latest: dict[str, Node] = {}
    for review in pr["_reviews"]:  # in submission order: each author's last one stays
        latest.pop(review["login"], None)
        latest[review["login"]] = review
    nodes = [
        {
            "__typename": "PullRequestReview",
            "author": _user(review["login"]),
            "state": review["state"],
            "body": review["body"],
            "submittedAt": review["submittedAt"],
        }
        for review in latest.values()
    ]
    return _connection(nodes[: first or 100])


def _pr_review_decision(pr: Node, _info: Any) -> str | None:
    return pr["_review_decision"]  # null unless the repository requires reviews


def _pr_comments(
    pr: Node, _info: Any, first: int | None = None, last: int | None = None, **_: Any
) -> Node:
    comments = pr["_comments"]
    if last is not None:
        comments = comments[-last:] if last else []
    elif first is not None:
        comments = comments[:first]
    nodes = [
        {
            "__typename": "IssueComment",
            "author": _user(comment["login"]),
            "body": comment["body"],
            "createdAt": comment["createdAt"],
        }
        for comment in comments
    ]
    return _connection(nodes)


def _pr_commits(pr: Node, info: Any, **_: Any) -> Node:
    rollup = (
        None
        if pr["_checks"] is None
        else {"__typename": "StatusCheckRollup", "state": pr["_checks"]}
    )
    commit = {"__typename": "Commit", "oid": _fake(info).head_oid(pr), "statusCheckRollup": rollup}
    return _connection([{"__typename": "PullRequestCommit", "commit": commit}])


# -- mutations -----------------------------------------------------------------------------------


def _create_pull_request(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    fake = _fake(info)
    if input["repositoryId"] != fake.repository_id:
        raise _not_found(
            f"Could not resolve to a node with the global id of '{input['repositoryId']}'"
        )
    head = input["headRefName"]
    if fake.remote is not None and fake.remote_head(head) is None:
        raise _unprocessable("Head sha can't be blank, No commits between main and " + head)
    for pr in fake.pulls.values():
        if pr["headRefName"] == head and pr["state"] == "OPEN":
            raise _unprocessable(f"A pull request already exists for {fake.owner}:{head}.")
    pr = fake.add_pr(
        head,
        title=input["title"],
        body=input.get("body") or "",
        base=input["baseRefName"],
        draft=bool(input.get("draft")),
        checks=None,
    )
    return {"pullRequest": pr}


def _ready(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    fake = _fake(info)
    pr = fake.pr_by_node_id(input["pullRequestId"])
    pr["isDraft"] = False
    fake.touch(pr)
    return {"pullRequest": pr}


def _to_draft(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    fake = _fake(info)
    pr = fake.pr_by_node_id(input["pullRequestId"])
    if pr["state"] != "OPEN":
        raise _unprocessable("Pull request is not open")
    pr["isDraft"] = True
    fake.touch(pr)
    return {"pullRequest": pr}


def _labels_by_id(fake: FakeGitHub, ids: list[str]) -> list[str]:
    by_id = {label["id"]: name for name, label in fake.labels.items()}
    missing = [label_id for label_id in ids if label_id not in by_id]
    if missing:
        raise _not_found(f"Could not resolve to a node with the global id of '{missing[0]}'")
    return [by_id[label_id] for label_id in ids]


def _add_labels(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    fake = _fake(info)
    pr = fake.pr_by_node_id(input["labelableId"])
    for name in _labels_by_id(fake, input["labelIds"]):
        if name not in pr["_labels"]:
            pr["_labels"].append(name)
    fake.touch(pr)
    return {"labelable": pr, "clientMutationId": None}


def _remove_labels(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    fake = _fake(info)
    pr = fake.pr_by_node_id(input["labelableId"])
    for name in _labels_by_id(fake, input["labelIds"]):
        if name in pr["_labels"]:
            pr["_labels"].remove(name)
    fake.touch(pr)
    return {"labelable": pr, "clientMutationId": None}


def _create_label(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    fake = _fake(info)
    if input["repositoryId"] != fake.repository_id:
        raise _not_found("Could not resolve to a Repository")
    if input["name"] in fake.labels:
        raise _unprocessable("Name has already been taken")
    return {"label": fake.add_label(input["name"], input["color"]), "clientMutationId": None}


def _add_comment(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    fake = _fake(info)
    pr = fake.pr_by_node_id(input["subjectId"])
    stamp = fake.now()
    pr["_comments"].append({"login": fake.viewer, "body": input["body"], "createdAt": stamp})
    pr["updatedAt"] = stamp
    return {"subject": pr, "commentEdge": None, "timelineEdge": None}


def _merge(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    fake = _fake(info)
    pr = fake.pr_by_node_id(input["pullRequestId"])
    if pr["state"] == "MERGED":
        raise _unprocessable("Pull Request is already merged")
    if pr["state"] != "OPEN":
        raise _unprocessable("Pull Request is closed")
    if pr["isDraft"]:
        raise _unprocessable("Pull Request is still a draft")
    if pr["mergeable"] == "CONFLICTING":
        raise _unprocessable("Pull Request is not mergeable")
    expected = input.get("expectedHeadOid")
    if expected and expected != fake.head_oid(pr):
        raise _unprocessable("Head branch was modified. Review and try the merge again.")
    method = input.get("mergeMethod") or "MERGE"  # GitHub's default
    fake.merges.append((pr["number"], method))
    pr["state"] = "MERGED"
    pr["_merge_commit"] = _sha(f"merge {pr['number']} {method}")
    fake.touch(pr)
    return {"pullRequest": pr, "actor": _user(fake.viewer), "clientMutationId": None}


_attached: set[int] = set()  # id() of each schema the resolvers are attached to
_attach_lock = threading.Lock()


def _attach_resolvers() -> None:
    """Once per (cached) schema: every fake finds its data through `info.context`."""
    schema = github_schema()
    with _attach_lock:
        if id(schema) in _attached:
            return
        for type_name, field_name, resolver in (
            ("Query", "viewer", _viewer),
            ("Query", "repository", _repository),
            ("Repository", "label", _label),
            ("Repository", "pullRequest", _pull_request),
            ("Repository", "pullRequests", _pull_requests),
            ("PullRequest", "number", _pr_number),
            ("PullRequest", "headRefOid", _pr_head_oid),
            ("PullRequest", "mergeCommit", _pr_merge_commit),
            ("PullRequest", "labels", _pr_labels),
            ("PullRequest", "latestReviews", _pr_latest_reviews),
            ("PullRequest", "reviewDecision", _pr_review_decision),
            ("PullRequest", "comments", _pr_comments),
            ("PullRequest", "commits", _pr_commits),
            ("Mutation", "createPullRequest", _create_pull_request),
            ("Mutation", "markPullRequestReadyForReview", _ready),
            ("Mutation", "convertPullRequestToDraft", _to_draft),
            ("Mutation", "addLabelsToLabelable", _add_labels),
            ("Mutation", "removeLabelsFromLabelable", _remove_labels),
            ("Mutation", "createLabel", _create_label),
            ("Mutation", "addComment", _add_comment),
            ("Mutation", "mergePullRequest", _merge),
        ):
            attach(schema, type_name, field_name, resolver)
        _attached.add(id(schema))
