"""A fake GitHub GraphQL API: one repository with pull requests, issues, labels, reviews,
comments and Projects (v2) boards.

Requests are validated and executed against GitHub's published schema (`GraphQLFake`), so a
document the real API would refuse is refused here too. Resolvers cover exactly what Legion's
GitHub forge asks: `repository(owner:, name:)` with its `pullRequests(headRefName:, states:,
first:, after:, orderBy:)` (really filtered, ordered and paged), `pullRequest(number:)`,
`label(name:)`, the viewer, and the mutations, which change the data.

Like GitHub: GraphQL errors come with HTTP 200 and a top-level `type` (NOT_FOUND,
UNPROCESSABLE), a bad token gets 401. With `remote` (a bare repository, the project's git
remote) a PR's head commit is the remote branch's, and a PR cannot be opened for a branch that
was not pushed. A commit can carry CI checks (`set_checks`: check runs and commit statuses, read
through `statusCheckRollup`), and a check made required (branch protection) that fails or has
not finished makes `mergePullRequest` refuse, with GitHub's words.

Issues (for the GitHub Issues tracker): `repository.issues(states:, labels:, orderBy:, first:,
after:)` (filtered, ordered, paged), `issue(number:)`, `issueOrPullRequest(number:)`, an
issue's labels, comments (paged), project items, the issues that mention it (`#N`, its
timeline's cross-references) and the pull requests whose body closes it ("Fixes #N", into the
default branch: `closedByPullRequestsReferences`); the owner's `projectV2(number:)` with a
single-select `Status` field; and the mutations that create, close, reopen, label, comment and
set a project field.
Issues and pull requests share their numbers, as on GitHub.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import secrets
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.fakes.graphql_server import FakeError, GraphQLFake, RawAnswer, attach
from tests.fakes.schemas import github_schema
from tests.fakes.serving import threaded_server

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
        # Who has write access besides the owner (GitHub's COLLABORATOR association): the
        # token's account and the tests' human; anyone else comments as an outsider (NONE).
        self.collaborators = {viewer, "hank"}
        self.default_branch = "main"
        self.labels: dict[str, Node] = {}  # by name
        self.pulls: dict[int, Node] = {}  # by number
        self.vanished: set[int] = set()  # PRs that now answer NOT_FOUND
        self.merges: list[tuple[int, str]] = []  # (number, merge method) of each merge
        self.issues: dict[int, Node] = {}  # by number (shared with the PRs')
        self.projects: dict[int, Node] = {}  # the owner's Projects (v2) boards, by number
        self.project_items: list[Node] = []
        self.owner_type = "Organization"
        self.has_issues = True
        self.commit_checks: dict[str, list[Node]] = {}  # by commit oid: its check contexts
        # The checks every head commit has that `set_checks` gave none (CI on every push).
        self.head_checks: list[Node] = []
        self.required_checks: set[str] = set()  # names branch protection requires to pass
        self.job_logs: dict[int, bytes] = {}  # GitHub Actions jobs' logs, by job id
        # Where a log's URL redirects (a signed URL on a storage host), as GitHub does; None:
        # the API answers with the log itself.
        self.storage: LogStorage | None = LogStorage()
        self.route("GET", r"/repos/([^/]+)/([^/]+)/actions/jobs/([0-9]+)/logs", _job_logs)
        self.reset(remote=remote, permission=permission)

    @contextlib.contextmanager
    def running(self) -> Iterator[GraphQLFake]:
        """The API, and the storage host its log URLs redirect to (another port)."""
        with contextlib.ExitStack() as stack:
            if self.storage is not None:
                stack.enter_context(self.storage.running())
            yield stack.enter_context(super().running())

    def reset(self, *, remote: Path | None = None, permission: str = "WRITE") -> None:
        """Empty again, for the next test (one running fake can serve a whole module)."""
        with self.lock:
            self.requests.clear()
            self.faults.clear()
            self.labels.clear()
            self.pulls.clear()
            self.vanished.clear()
            self.merges.clear()
            self.issues.clear()
            self.comment_count = 0
            self.projects.clear()
            self.project_items.clear()
            self.owner_type = "Organization"
            self.has_issues = True
            self.commit_checks.clear()
            self.head_checks = []
            self.required_checks.clear()
            self.job_logs.clear()
            if self.storage is not None:
                self.storage.reset()
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
            number = self.next_number()
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

    def next_number(self) -> int:
        """Issues and pull requests count together, as on GitHub."""
        return max([*self.pulls, *self.issues], default=0) + 1

    def add_issue(
        self,
        title: str,
        *,
        body: str = "",
        labels: tuple[str, ...] | list[str] = (),
        state: str = "OPEN",
    ) -> Node:
        """An issue as if opened on GitHub (its labels created when missing)."""
        with self.lock:
            number = self.next_number()
            stamp = self.now()
            issue: Node = {
                "__typename": "Issue",
                "id": f"I_{number}",
                "number": number,
                "title": title,
                "body": body,
                "url": f"https://github.com/{self.owner}/{self.repo}/issues/{number}",
                "state": state,
                "stateReason": "COMPLETED" if state == "CLOSED" else None,
                "createdAt": stamp,
                "updatedAt": stamp,
                "closedAt": stamp if state == "CLOSED" else None,
                "_labels": [self.add_label(name)["name"] for name in labels],
                "_comments": [],
            }
            self.issues[number] = issue
            return issue

    def add_issue_comment(self, number: int, body: str, login: str = "hank") -> Node:
        with self.lock:
            issue = self.issues[number]
            stamp = self.now()
            self.comment_count += 1
            comment = {
                "__typename": "IssueComment",
                "id": f"IC_{number}_{self.comment_count}",
                "body": body,
                "createdAt": stamp,
                "author": _user(login),
            }
            issue["_comments"].append(comment)
            issue["updatedAt"] = stamp
            return comment

    def issue_labels(self, number: int) -> set[str]:
        with self.lock:
            return set(self.issues[number]["_labels"])

    def issue_comments(self, number: int) -> list[str]:
        with self.lock:
            return [comment["body"] for comment in self.issues[number]["_comments"]]

    def delete_issue_comment(self, comment_id: str) -> None:
        """A person deletes a comment."""
        with self.lock:
            for issue in self.issues.values():
                issue["_comments"] = [c for c in issue["_comments"] if c["id"] != comment_id]

    def comment_issue(self, comment_id: str) -> Node | None:
        """The issue a comment is on (None: no such comment)."""
        with self.lock:
            for issue in self.issues.values():
                if any(c["id"] == comment_id for c in issue["_comments"]):
                    return issue
            return None

    def add_project(
        self,
        number: int = 1,
        *,
        title: str = "Roadmap",
        options: tuple[str, ...] = ("Todo", "In Progress", "Done"),
        field_name: str = "Status",
    ) -> Node:
        """A Projects (v2) board of the repository's owner, with a single-select field
        (GitHub's default: Status with Todo, In Progress, Done)."""
        with self.lock:
            project: Node = {
                "__typename": "ProjectV2",
                "id": f"PVT_{number}",
                "number": number,
                "title": title,
                "closed": False,
                "url": f"https://github.com/orgs/{self.owner}/projects/{number}",
                "_field": {
                    "__typename": "ProjectV2SingleSelectField",
                    "id": f"PVTSSF_{number}",
                    "name": field_name,
                    "dataType": "SINGLE_SELECT",
                    "options": [],
                },
            }
            self.projects[number] = project
            for name in options:
                self.add_option(name, project=number)
            return project

    def add_option(self, name: str, *, project: int = 1) -> None:
        with self.lock:
            options = self.projects[project]["_field"]["options"]
            options.append(
                {
                    "__typename": "ProjectV2SingleSelectFieldOption",
                    "id": hashlib.sha1(f"{project}:{name}".encode()).hexdigest()[:8],
                    "name": name,
                    "nameHTML": name,
                    "description": "",
                    "descriptionHTML": "",
                    "color": "GRAY",
                }
            )

    def project_item(self, content: Node, project: Node, *, create: bool = False) -> Node | None:
        with self.lock:
            for item in self.project_items:
                if item["content"] is content and item["project"] is project:
                    return item
            if not create:
                return None
            item = {
                "__typename": "ProjectV2Item",
                "id": f"PVTI_{len(self.project_items) + 1}",
                "project": project,
                "content": content,
                "isArchived": False,
                "type": "ISSUE",
                "_option": None,
            }
            self.project_items.append(item)
            return item

    def set_project_status(self, number: int, option: str | None, *, project: int = 1) -> None:
        """Put issue `number` in the project (if it is not) with Status `option` (None: none)."""
        with self.lock:
            board = self.projects[project]
            item = self.project_item(self.issues[number], board, create=True)
            assert item is not None
            if option is None:
                item["_option"] = None
                return
            found = [o["id"] for o in board["_field"]["options"] if o["name"] == option]
            assert found, f"no option {option!r}"
            item["_option"] = found[0]

    def project_status(self, number: int, *, project: int = 1) -> str | None:
        with self.lock:
            board = self.projects[project]
            item = self.project_item(self.issues[number], board)
            if item is None or item["_option"] is None:
                return None
            options = board["_field"]["options"]
            return next(str(o["name"]) for o in options if o["id"] == item["_option"])

    def add_native_review(self, number: int, state: str, login: str, body: str = "") -> None:
        with self.lock:
            pr = self.pulls[number]
            stamp = self.now()
            pr["_reviews"].append(
                {"state": state, "login": login, "body": body, "submittedAt": stamp}
            )
            pr["updatedAt"] = stamp

    def set_checks(
        self, number: int, *checks: Node, required: tuple[str, ...] | list[str] = ()
    ) -> str:
        """The CI checks on PR `number`'s head commit as it is now (`check_run`,
        `status_context`), replacing any it had; `required`: check names the base branch's
        protection requires (a required check missing from the commit is expected, as on
        GitHub). A push moves the head to a commit without checks. The commit's oid."""
        with self.lock:
            oid = self.head_oid(self.pulls[number])
            self.commit_checks[oid] = list(checks)
            self.required_checks = set(required)
            return oid

    def set_job_log(self, check: Node, text: str | bytes) -> None:
        """The log of the GitHub Actions job a `check_run` is (its `databaseId`)."""
        with self.lock:
            data = text.encode() if isinstance(text, str) else text
            self.job_logs[int(check["databaseId"])] = data

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
            "hasIssuesEnabled": self.has_issues,
            "owner": {"__typename": self.owner_type, "id": "O_1", "login": self.owner},
        }

    def labelable_by_node_id(self, node_id: str) -> Node:
        """A pull request or an issue, by its node id."""
        for issue in self.issues.values():
            if issue["id"] == node_id:
                return issue
        return self.pr_by_node_id(node_id)

    def project_by_id(self, node_id: str) -> Node:
        for project in self.projects.values():
            if project["id"] == node_id:
                return project
        raise _not_found(f"Could not resolve to a node with the global id of '{node_id}'")

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

    def merge_in_remote(self, pr: Node, method: str) -> str | None:
        """Merge the PR's branch into its base in the remote, as GitHub does (one commit on the
        base: a squash, or a merge commit with both parents); its sha, or None without a
        remote or when either branch is not there."""
        base, head = self.remote_head(pr["baseRefName"]), self.remote_head(pr["headRefName"])
        if self.remote is None or base is None or head is None:
            return None

        def git(*args: str) -> str:
            return subprocess.run(
                ["git", "--git-dir", str(self.remote), *args],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()

        tree = git("merge-tree", "--write-tree", base, head).splitlines()[0]
        parents = ["-p", base] + (["-p", head] if method == "MERGE" else [])
        identity = ("-c", "user.name=GitHub", "-c", "user.email=noreply@github.invalid")
        commit = git(
            *identity, "commit-tree", tree, *parents, "-m", f"{pr['title']} (#{pr['number']})"
        )
        git("update-ref", f"refs/heads/{pr['baseRefName']}", commit, base)
        return commit

    def head_oid(self, pr: Node) -> str:
        if pr["_head_oid"] is not None:
            return str(pr["_head_oid"])
        return self.remote_head(pr["headRefName"]) or _sha(pr["headRefName"])

    def touch(self, pr: Node) -> None:
        pr["updatedAt"] = self.now()


def check_run(
    name: str, status: str = "COMPLETED", conclusion: str | None = "SUCCESS", url: str = ""
) -> Node:
    """A check run (GitHub Actions, a CI app) as GitHub shows it in a commit's rollup; its
    `databaseId` is its job's id (`set_job_log`)."""
    return {
        "__typename": "CheckRun",
        "id": f"CR_{_sha(name)[:8]}",
        "databaseId": int(_sha(name)[:7], 16),
        "name": name,
        "status": status,
        "conclusion": conclusion if status == "COMPLETED" else None,
        "detailsUrl": url or None,
    }


def status_context(context: str, state: str = "SUCCESS", url: str = "") -> Node:
    """A commit status (the older statuses API) as GitHub shows it in a commit's rollup."""
    return {
        "__typename": "StatusContext",
        "id": f"SC_{_sha(context)[:8]}",
        "context": context,
        "state": state,
        "targetUrl": url or None,
    }


_FAILED = {"FAILURE", "TIMED_OUT", "CANCELLED", "ACTION_REQUIRED", "STARTUP_FAILURE", "ERROR"}


def _check_name(check: Node) -> str:
    return str(check["name"] if check["__typename"] == "CheckRun" else check["context"])


def _check_state(check: Node) -> str:
    """SUCCESS, FAILURE or PENDING: one check as the rollup counts it."""
    if check["__typename"] == "CheckRun":
        if check["status"] != "COMPLETED":
            return "PENDING"
        return "FAILURE" if check["conclusion"] in _FAILED else "SUCCESS"
    state = check["state"]
    return (
        "FAILURE"
        if state in _FAILED
        else "PENDING"
        if state in ("PENDING", "EXPECTED")
        else ("SUCCESS")
    )


def _rollup_state(checks: list[Node]) -> str:
    states = {_check_state(check) for check in checks}
    return next((s for s in ("FAILURE", "PENDING") if s in states), "SUCCESS")


def _unmet_requirements(fake: FakeGitHub, pr: Node) -> str | None:
    """Why branch protection refuses the merge (GitHub's words), or None: a required check
    that failed, is still running, or has not reported at all (expected)."""
    if not fake.required_checks:
        return None
    checks = {_check_name(c): c for c in fake.commit_checks.get(fake.head_oid(pr), [])}
    unmet: list[tuple[str, str]] = []
    for name in sorted(fake.required_checks):
        check = checks.get(name)
        state = "EXPECTED" if check is None else _check_state(check)
        if state != "SUCCESS":
            unmet.append((name, "failing" if state == "FAILURE" else "expected"))
    if not unmet:
        return None
    if len(unmet) == 1:
        name, how = unmet[0]
        return f'Required status check "{name}" is {how}.'
    counts = [
        f"{n} {how}" for how in ("failing", "expected") if (n := sum(h == how for _, h in unmet))
    ]
    return (
        f"{len(unmet)} of {len(fake.required_checks)} required status checks have not "
        f"succeeded: {', '.join(counts)}."
    )


def _job_logs(fake: GraphQLFake, _payload: dict[str, Any], match: re.Match[str]) -> Any:
    """`GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs`: GitHub's 302 to a signed URL
    on its storage host (or, without one, the log itself); 404 for a job it does not know."""
    assert isinstance(fake, FakeGitHub)
    owner, repo, job = match.group(1), match.group(2), int(match.group(3))
    log = fake.job_logs.get(job)
    if (owner, repo) != (fake.owner, fake.repo) or log is None:
        return 404, {"message": "Not Found"}
    if fake.storage is None:
        return 200, RawAnswer(log, {"Content-Type": "text/plain"})
    return 302, RawAnswer(b"", {"Location": fake.storage.signed(log)})


class LogStorage:
    """A storage host on 127.0.0.1 (a port of its own) serving signed URLs, as GitHub's logs
    are: no credential is needed, and each request's `Authorization` header is recorded (None
    when it had none). It answers a `Range: bytes=-N` with the last N bytes (206)."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.seen: list[tuple[str, str | None, str | None]] = []  # (path, Authorization, Range)
        # Where the next request is redirected once more, if set (a chain of hops).
        self.redirect_to: str | None = None
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the storage host is not running"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def reset(self) -> None:
        with self.lock:
            self.blobs.clear()
            self.seen.clear()
            self.redirect_to = None

    def signed(self, data: bytes) -> str:
        key = secrets.token_hex(8)
        with self.lock:
            self.blobs[key] = data
        return f"{self.url}/blobs/{key}?sig={secrets.token_hex(8)}"

    @contextlib.contextmanager
    def running(self) -> Iterator[LogStorage]:
        with threaded_server(_storage_handler(self)) as server:
            self._server = server
            try:
                yield self
            finally:
                self._server = None


def _storage_handler(storage: LogStorage) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            wanted = self.headers.get("Range")
            with storage.lock:
                storage.seen.append((path, self.headers.get("Authorization"), wanted))
                data = storage.blobs.get(path.removeprefix("/blobs/"))
                onward, storage.redirect_to = storage.redirect_to, None
            if onward is not None:
                self._send(302, b"", {"Location": onward})
                return
            if data is None:
                self._send(404, b"BlobNotFound", {"Content-Type": "text/plain"})
                return
            suffix = re.fullmatch(r"bytes=-([0-9]+)", wanted or "")
            if suffix is None or int(suffix.group(1)) >= len(data):
                self._send(200, data, {"Content-Type": "text/plain"})
                return
            start = len(data) - int(suffix.group(1))
            headers = {"Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"}
            self._send(206, data[start:], headers)

    return Handler


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
    # GitHub's apps comment as "<name>[bot]", and their author is a Bot.
    return {"__typename": "Bot" if login.endswith("[bot]") else "User", "login": login}


# -- Query and Repository ----------------------------------------------------------------------


def _viewer(_parent: Any, info: Any) -> Node:
    return _user(_fake(info).viewer)


def _comment_viewer_did_author(comment: Node, info: Any) -> bool:
    return bool(comment["author"]["login"] == _fake(info).viewer)


def _comment_author_association(comment: Node, info: Any) -> str:
    fake, login = _fake(info), comment["author"]["login"]
    if login == fake.owner:
        return "OWNER"
    return "COLLABORATOR" if login in fake.collaborators else "NONE"


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
    fake = _fake(info)
    oid = fake.head_oid(pr)
    checks = fake.commit_checks.get(oid)
    if checks is None and fake.head_checks:
        checks = list(fake.head_checks)
    rollup: Node | None
    if checks:
        rollup = {"__typename": "StatusCheckRollup", "id": f"SCR_{oid[:8]}"}
        rollup |= {"state": _rollup_state(checks), "_contexts": checks}
    elif checks is None and pr["_checks"] is not None:  # a rollup state alone (`add_pr`)
        rollup = {"__typename": "StatusCheckRollup", "id": f"SCR_{oid[:8]}"}
        rollup |= {"state": pr["_checks"], "_contexts": []}
    else:
        rollup = None  # GitHub's answer for a commit without any check
    commit = {"__typename": "Commit", "oid": oid, "statusCheckRollup": rollup}
    return _connection([{"__typename": "PullRequestCommit", "commit": commit}])


def _rollup_contexts(
    rollup: Node, _info: Any, first: int | None = None, after: str | None = None, **_: Any
) -> Node:
    contexts = rollup["_contexts"]
    offset = int(after) if after else 0
    size = first or 100
    page = _connection(contexts[offset : offset + size], offset, offset + size < len(contexts))
    page["totalCount"] = len(contexts)
    runs = [c for c in contexts if c["__typename"] == "CheckRun"]
    page["checkRunCount"] = len(runs)
    page["statusContextCount"] = len(contexts) - len(runs)
    return page


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
        # A fork's branch of the same name is another head (`someone:legion/eng-2`).
        if pr["headRefName"] == head and pr["state"] == "OPEN" and not pr["isCrossRepository"]:
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
    pr = fake.labelable_by_node_id(input["labelableId"])
    for name in _labels_by_id(fake, input["labelIds"]):
        if name not in pr["_labels"]:
            pr["_labels"].append(name)
    fake.touch(pr)
    return {"labelable": pr, "clientMutationId": None}


def _remove_labels(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    fake = _fake(info)
    pr = fake.labelable_by_node_id(input["labelableId"])
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
    subject = fake.labelable_by_node_id(input["subjectId"])
    if subject["__typename"] == "Issue":
        comment = fake.add_issue_comment(subject["number"], input["body"], fake.viewer)
        edge = {"cursor": comment["id"], "node": comment}
        return {"subject": subject, "commentEdge": edge, "timelineEdge": None}
    pr = subject
    stamp = fake.now()
    pr["_comments"].append({"login": fake.viewer, "body": input["body"], "createdAt": stamp})
    pr["updatedAt"] = stamp
    return {"subject": pr, "commentEdge": None, "timelineEdge": None}


def _update_issue_comment(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    """Like GitHub: only the comment's writer (here, the token's user) edits it; one that is
    gone does not resolve."""
    fake = _fake(info)
    issue = fake.comment_issue(input["id"])
    if issue is None:
        raise _not_found(f"Could not resolve to a node with the global id of '{input['id']}'")
    [comment] = [c for c in issue["_comments"] if c["id"] == input["id"]]
    if comment["author"]["login"] != fake.viewer:
        raise FakeError("Resource not accessible by integration", top_level={"type": "FORBIDDEN"})
    comment["body"] = input["body"]
    issue["updatedAt"] = fake.now()
    return {"issueComment": comment, "clientMutationId": input.get("clientMutationId")}


def _node(_parent: Any, info: Any, id: str) -> Node:
    """Like GitHub's `node(id)`, for the nodes Legion asks by id: an issue's comment."""
    fake = _fake(info)
    issue = fake.comment_issue(id)
    if issue is None:
        raise _not_found(f"Could not resolve to a node with the global id of '{id}'")
    [comment] = [c for c in issue["_comments"] if c["id"] == id]
    return comment


def _comment_issue(comment: Node, info: Any) -> Node | None:
    return _fake(info).comment_issue(comment["id"])


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
    unmet = _unmet_requirements(fake, pr)
    if unmet is not None:
        raise _unprocessable(unmet)
    method = input.get("mergeMethod") or "MERGE"  # GitHub's default
    fake.merges.append((pr["number"], method))
    pr["state"] = "MERGED"
    pr["_merge_commit"] = fake.merge_in_remote(pr, method) or _sha(f"merge {pr['number']} {method}")
    fake.touch(pr)
    return {"pullRequest": pr, "actor": _user(fake.viewer), "clientMutationId": None}


# -- issues --------------------------------------------------------------------------------------


def _issue_not_found(number: int, what: str = "an Issue") -> FakeError:
    return _not_found(f"Could not resolve to {what} with the number of {number}.")


def _issue(_parent: Any, info: Any, number: int) -> Node:
    issue = _fake(info).issues.get(number)
    if issue is None:
        raise _issue_not_found(number)
    return issue


def _issue_or_pull_request(_parent: Any, info: Any, number: int) -> Node:
    fake = _fake(info)
    found = fake.issues.get(number)
    if found is None and number not in fake.vanished:
        found = fake.pulls.get(number)
    if found is None:
        raise _issue_not_found(number, "an issue or pull request")
    return found


def _issues(
    _parent: Any,
    info: Any,
    states: list[str] | None = None,
    labels: list[str] | None = None,
    orderBy: dict[str, str] | None = None,
    after: str | None = None,
    first: int | None = None,
    **_: Any,
) -> Node:
    fake = _fake(info)
    if first is None or not 1 <= first <= 100:
        raise FakeError("You must provide a `first` value between 1 and 100 (the fake needs it).")
    wanted = {name.casefold() for name in labels or ()}
    found = [
        issue
        for issue in fake.issues.values()
        if (not states or issue["state"] in states)
        and (not wanted or wanted & {name.casefold() for name in issue["_labels"]})
    ]
    order = orderBy or {"field": "CREATED_AT", "direction": "ASC"}
    key = {"CREATED_AT": "createdAt", "UPDATED_AT": "updatedAt"}.get(order["field"], "createdAt")
    found.sort(key=lambda i: (i[key], i["number"]), reverse=order["direction"] == "DESC")
    offset = int(after) if after else 0
    page = found[offset : offset + first]
    return _connection(page, offset, offset + first < len(found))


def _repository_labels(
    _parent: Any, info: Any, first: int | None = None, after: str | None = None, **_: Any
) -> Node:
    labels = list(_fake(info).labels.values())
    offset = int(after) if after else 0
    size = first or 100
    return _connection(labels[offset : offset + size], offset, offset + size < len(labels))


def _issue_labels(issue: Node, info: Any, first: int | None = None, **_: Any) -> Node:
    fake = _fake(info)
    return _connection([fake.labels[name] for name in issue["_labels"][: first or 100]])


def _issue_comments(
    issue: Node,
    _info: Any,
    first: int | None = None,
    after: str | None = None,
    last: int | None = None,
    before: str | None = None,
    **_: Any,
) -> Node:
    """A page of an issue's comments, forward (`first` after `after`) or, as GitHub pages
    with `last`, backward (the `last` before `before`). Cursors are positions; a page's
    start cursor is its first comment's, its end cursor the position after its last."""
    comments = issue["_comments"]
    if last is not None:
        if not 0 < last <= 100:
            raise FakeError("You must provide a `last` value between 1 and 100.")
        end = int(before) if before else len(comments)
        start = max(0, end - last)
        return _connection(comments[start:end], start, end < len(comments))
    offset = int(after) if after else 0
    size = first or 100
    return _connection(comments[offset : offset + size], offset, offset + size < len(comments))


def _issue_project_items(issue: Node, info: Any, first: int | None = None, **_: Any) -> Node:
    items = [item for item in _fake(info).project_items if item["content"] is issue]
    return _connection(items[: first or 100])


def _issue_timeline(
    issue: Node, info: Any, itemTypes: list[str] | None = None, first: int | None = None, **_: Any
) -> Node:
    """The cross-references: the other issues whose body mentions `#N`."""
    if itemTypes is not None and "CROSS_REFERENCED_EVENT" not in itemTypes:
        return _connection([])
    mention = re.compile(rf"(?<![\w/])#{issue['number']}\b")
    events = [
        {
            "__typename": "CrossReferencedEvent",
            "id": f"CRE_{other['number']}_{issue['number']}",
            "isCrossRepository": False,
            "willCloseTarget": False,
            "source": other,
            "target": issue,
            "createdAt": other["createdAt"],
            "referencedAt": other["createdAt"],
        }
        for other in _fake(info).issues.values()
        if other is not issue and mention.search(other["body"])
    ]
    return _connection(events[: first or 100])


_CLOSING_KEYWORD = r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+#{number}\b"


def _issue_closing_prs(
    issue: Node,
    info: Any,
    includeClosedPrs: bool | None = False,
    orderByState: bool | None = False,
    userLinkedOnly: bool | None = False,
    first: int | None = None,
    **_: Any,
) -> Node:
    """The pull requests into the default branch whose body closes the issue with a keyword
    (only the open ones unless `includeClosedPrs`, open first with `orderByState`)."""
    fake = _fake(info)
    if userLinkedOnly:
        return _connection([])  # the fake has no links made by hand in the sidebar
    closes = re.compile(_CLOSING_KEYWORD.format(number=issue["number"]), re.IGNORECASE)
    found = [
        pr
        for number, pr in sorted(fake.pulls.items())
        if number not in fake.vanished
        and pr["baseRefName"] == fake.default_branch
        and (includeClosedPrs or pr["state"] == "OPEN")
        and closes.search(pr["body"])
    ]
    if orderByState:
        found.sort(key=lambda pr: pr["state"] != "OPEN")
    size = first or 100
    return _connection(found[:size], more=len(found) > size)


def _owner_project(owner: Node, info: Any, number: int) -> Node:
    fake = _fake(info)
    project = fake.projects.get(number)
    if project is None or owner["login"] != fake.owner:
        kind = "an Organization" if owner["__typename"] == "Organization" else "a User"
        raise _not_found(f"Could not resolve to a ProjectV2 with the number {number} of {kind}.")
    return project


def _project_field(project: Node, _info: Any, name: str) -> Node | None:
    field = project["_field"]
    return field if field["name"] == name else None


def _item_field_value(item: Node, _info: Any, name: str) -> Node | None:
    field = item["project"]["_field"]
    if field["name"] != name or item["_option"] is None:
        return None
    option = next(o for o in field["options"] if o["id"] == item["_option"])
    return {
        "__typename": "ProjectV2ItemFieldSingleSelectValue",
        "id": f"PVTFSV_{item['id']}",
        "name": option["name"],
        "optionId": option["id"],
        "field": field,
    }


def _create_issue(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    fake = _fake(info)
    if input["repositoryId"] != fake.repository_id:
        raise _not_found(
            f"Could not resolve to a node with the global id of '{input['repositoryId']}'"
        )
    names = _labels_by_id(fake, input.get("labelIds") or [])
    issue = fake.add_issue(input["title"], body=input.get("body") or "", labels=tuple(names))
    return {"issue": issue, "clientMutationId": None}


def _set_issue_state(fake: FakeGitHub, node_id: str, state: str, reason: str | None) -> Node:
    issue = fake.labelable_by_node_id(node_id)
    if issue["__typename"] != "Issue":
        raise _not_found(f"Could not resolve to an Issue with the global id of '{node_id}'")
    issue["state"] = state
    issue["stateReason"] = reason
    fake.touch(issue)
    issue["closedAt"] = issue["updatedAt"] if state == "CLOSED" else None
    return {"issue": issue, "clientMutationId": None}


def _update_issue(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    fake = _fake(info)
    unknown = {key for key, value in input.items() if value is not None} - {"id", "body", "title"}
    if unknown:
        raise FakeError(f"the fake GitHub does not implement updating {sorted(unknown)}")
    issue = fake.labelable_by_node_id(input["id"])
    if issue["__typename"] != "Issue":
        raise _not_found(f"Could not resolve to an Issue with the global id of '{input['id']}'")
    if input.get("body") is not None:
        issue["body"] = input["body"]
    if input.get("title") is not None:
        issue["title"] = input["title"]
    fake.touch(issue)
    return {"issue": issue, "clientMutationId": None}


def _close_issue(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    reason = input.get("stateReason") or "COMPLETED"
    return _set_issue_state(_fake(info), input["issueId"], "CLOSED", reason)


def _reopen_issue(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    return _set_issue_state(_fake(info), input["issueId"], "OPEN", "REOPENED")


def _add_project_item(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    fake = _fake(info)
    project = fake.project_by_id(input["projectId"])
    content = fake.labelable_by_node_id(input["contentId"])
    return {"item": fake.project_item(content, project, create=True), "clientMutationId": None}


def _project_item_by_id(fake: FakeGitHub, input: dict[str, Any]) -> Node:
    project = fake.project_by_id(input["projectId"])
    if input["fieldId"] != project["_field"]["id"]:
        raise _not_found(f"Could not resolve to a node with the global id of '{input['fieldId']}'")
    for item in fake.project_items:
        if item["id"] == input["itemId"] and item["project"] is project:
            return item
    raise _not_found(f"Could not resolve to a node with the global id of '{input['itemId']}'")


def _update_item_field(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    fake = _fake(info)
    item = _project_item_by_id(fake, input)
    option = (input.get("value") or {}).get("singleSelectOptionId")
    options = {o["id"] for o in item["project"]["_field"]["options"]}
    if option not in options:
        raise _unprocessable("The single select option Id does not belong to the field")
    item["_option"] = option
    return {"projectV2Item": item, "clientMutationId": None}


def _clear_item_field(_parent: Any, info: Any, input: dict[str, Any]) -> Node:
    item = _project_item_by_id(_fake(info), input)
    item["_option"] = None
    return {"projectV2Item": item, "clientMutationId": None}


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
            ("Query", "node", _node),
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
            ("StatusCheckRollup", "contexts", _rollup_contexts),
            ("Mutation", "createPullRequest", _create_pull_request),
            ("Mutation", "markPullRequestReadyForReview", _ready),
            ("Mutation", "convertPullRequestToDraft", _to_draft),
            ("Mutation", "addLabelsToLabelable", _add_labels),
            ("Mutation", "removeLabelsFromLabelable", _remove_labels),
            ("Mutation", "createLabel", _create_label),
            ("Mutation", "addComment", _add_comment),
            ("Mutation", "mergePullRequest", _merge),
            ("Repository", "issues", _issues),
            ("Repository", "issue", _issue),
            ("Repository", "issueOrPullRequest", _issue_or_pull_request),
            ("Repository", "labels", _repository_labels),
            ("Issue", "labels", _issue_labels),
            ("Issue", "comments", _issue_comments),
            ("IssueComment", "viewerDidAuthor", _comment_viewer_did_author),
            ("IssueComment", "issue", _comment_issue),
            ("Mutation", "updateIssueComment", _update_issue_comment),
            ("IssueComment", "authorAssociation", _comment_author_association),
            ("PullRequestReview", "viewerDidAuthor", _comment_viewer_did_author),
            ("PullRequestReview", "authorAssociation", _comment_author_association),
            ("Issue", "projectItems", _issue_project_items),
            ("Issue", "timelineItems", _issue_timeline),
            ("Issue", "closedByPullRequestsReferences", _issue_closing_prs),
            ("Organization", "projectV2", _owner_project),
            ("User", "projectV2", _owner_project),
            ("ProjectV2", "field", _project_field),
            ("ProjectV2Item", "fieldValueByName", _item_field_value),
            ("Mutation", "createIssue", _create_issue),
            ("Mutation", "closeIssue", _close_issue),
            ("Mutation", "updateIssue", _update_issue),
            ("Mutation", "reopenIssue", _reopen_issue),
            ("Mutation", "addProjectV2ItemById", _add_project_item),
            ("Mutation", "updateProjectV2ItemFieldValue", _update_item_field),
            ("Mutation", "clearProjectV2ItemFieldValue", _clear_item_field),
        ):
            attach(schema, type_name, field_name, resolver)
        _attached.add(id(schema))
