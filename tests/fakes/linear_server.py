"""A fake Linear API: the published schema, executed over a small workspace.

The workspace: team ENG ("Engineering") with Linear's default workflow states (Triage,
Backlog, Todo, In Progress, In Review, Done, Canceled, Duplicate; "Retro" when asked for), a
second team OPS, a workspace label `bug`, a team label `frontend`, and three users: the viewer
(whose key the tests use), another human, and a bot (an app user whose comments come as a bot
actor). Tests seed issues, comments and attachments (a pull request Linear's GitHub
integration linked) with `add_issue` / `add_comment` / `add_attachment` and read the result
back with `issue()` / `label_names()`.

Resolvers exist for exactly what Legion's documents ask; filtering and paging are real
(`first`, `after`, `hasNextPage`, `endCursor`, and the filter Legion sends: a filter key the
fake does not know is an error, never silently ignored). Mutations change the data.
Authentication is Linear's: the raw key in `Authorization`; a wrong one gets Linear's
`AUTHENTICATION_ERROR` with HTTP 400, as do validation errors.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.fakes.graphql_server import FakeError, GraphQLFake, attach
from tests.fakes.schemas import linear_schema

TOKEN = "lin_api_fake_0123456789abcdef"
MAX_PAGE = 250  # Linear refuses larger pages
DEFAULT_PAGE = 50

DEFAULT_STATES: tuple[tuple[str, str], ...] = (
    ("Triage", "triage"),
    ("Backlog", "backlog"),
    ("Todo", "unstarted"),
    ("In Progress", "started"),
    ("In Review", "started"),
    ("Done", "completed"),
    ("Canceled", "canceled"),
    ("Duplicate", "canceled"),
)

Record = dict[str, Any]


def _input_error(message: str, presentable: str | None = None) -> FakeError:
    return FakeError(
        message,
        {
            "type": "invalid input",
            "code": "INPUT_ERROR",
            "statusCode": 400,
            "userError": True,
            "userPresentableMessage": presentable or message,
        },
    )


def _not_found(kind: str) -> FakeError:
    return _input_error(f"Entity not found: {kind}", f"Could not find referenced {kind}.")


class FakeLinear(GraphQLFake):
    name = "linear"

    def __init__(self, *, token: str = TOKEN, retro_state: bool = False) -> None:
        super().__init__(linear_schema(), token=token)
        _attach_once()
        self.reset(retro_state=retro_state)

    def reset(self, *, retro_state: bool = False) -> None:
        """Back to the fixture workspace, with no request recorded and no fault queued (a
        running fake serves many tests: starting a server costs half a second to stop)."""
        with self.lock:
            self.requests.clear()
            self.faults.clear()
            self._clock = itertools.count()
            self._epoch = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
            self.users: dict[str, Record] = {}
            self.teams: dict[str, Record] = {}  # by id
            self.states: dict[str, Record] = {}
            self.labels: dict[str, Record] = {}
            self.issues: dict[str, Record] = {}  # by id, in creation order
            self.comments: dict[str, Record] = {}
            self.attachments: dict[str, Record] = {}  # by id, in creation order
            self.relations: dict[str, Record] = {}  # issue relations, by id
            self.viewer = self.add_user("Vera Viewer", "vera")
            self.human = self.add_user("Hank Human", "hank")
            self.bot = self.add_user("GitHub", "github", app=True)
            self.guest = self.add_user("Gus Guest", "gus", guest=True)
            self.eng = self.add_team("ENG", "Engineering")
            self.ops = self.add_team("OPS", "Operations")
            for key in ("ENG", "OPS"):
                for name, kind in DEFAULT_STATES:
                    self.add_state(name, kind, team=key)
            if retro_state:
                self.add_state("Retro", "started")
            self.add_label("bug", team=None)
            self.add_label("frontend")

    @property
    def api_url(self) -> str:
        return f"{self.url}{self.graphql_path}"

    # -- Linear's authentication and error statuses --------------------------------------------

    def authorized(self, header: str | None) -> bool:
        return header == self.token  # a personal API key, as is: no "Bearer"

    def unauthorized(self) -> tuple[int, dict[str, Any]]:
        return 400, {
            "errors": [
                {
                    "message": "Authentication required, not authenticated",
                    "extensions": {
                        "type": "authentication error",
                        "code": "AUTHENTICATION_ERROR",
                        "statusCode": 401,
                        "userError": True,
                        "userPresentableMessage": "You need to authenticate to access this "
                        "operation.",
                    },
                }
            ]
        }

    def graphql_error_status(self) -> int:
        return 400

    # -- seeding -------------------------------------------------------------------------------

    def now(self) -> str:
        moment = self._epoch + timedelta(seconds=next(self._clock))
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def add_user(
        self, name: str, display_name: str, *, app: bool = False, guest: bool = False
    ) -> Record:
        user = {
            "id": str(uuid.uuid4()),
            "name": name,
            "displayName": display_name,
            "app": app,
            "guest": guest,
        }
        self.users[user["id"]] = user
        return user

    def add_team(self, key: str, name: str) -> Record:
        team = {"id": str(uuid.uuid4()), "key": key, "name": name, "next_number": 1}
        self.teams[team["id"]] = team
        return team

    def team(self, key: str) -> Record:
        return next(t for t in self.teams.values() if t["key"] == key)

    def add_state(self, name: str, kind: str, *, team: str = "ENG") -> Record:
        team_id = self.team(team)["id"]
        position = sum(1 for s in self.states.values() if s["team_id"] == team_id)
        state = {
            "id": str(uuid.uuid4()),
            "name": name,
            "type": kind,
            "position": float(position),
            "team_id": team_id,
        }
        self.states[state["id"]] = state
        return state

    def state(self, name: str, *, team: str = "ENG") -> Record:
        team_id = self.team(team)["id"]
        return next(
            s for s in self.states.values() if s["name"] == name and s["team_id"] == team_id
        )

    def add_label(self, name: str, *, team: str | None = "ENG", group: bool = False) -> Record:
        label = {
            "id": str(uuid.uuid4()),
            "name": name,
            "isGroup": group,
            "team_id": self.team(team)["id"] if team else None,
            "createdAt": self.now(),
        }
        self.labels[label["id"]] = label
        return label

    def label(self, name: str) -> Record:
        return next(label for label in self.labels.values() if label["name"] == name)

    def add_issue(
        self,
        title: str,
        *,
        state: str = "Todo",
        labels: Iterable[str] = (),
        parent: str | None = None,
        description: str = "",
        team: str = "ENG",
    ) -> str:
        """Seed an issue as a person would make it; its identifier."""
        with self.lock:
            team_record = self.team(team)
            issue = self._new_issue(
                team_record,
                title=title,
                description=description,
                state_id=self.state(state, team=team)["id"],
                label_ids=[self.label(name)["id"] for name in labels],
                parent_id=self.issue(parent)["id"] if parent else None,
            )
            return str(issue["identifier"])

    def add_comment(self, identifier: str, body: str, *, by: str = "human") -> Record:
        """A comment from `by`: "viewer", "human", "guest" (a guest of the workspace) or
        "bot"."""
        with self.lock:
            issue = self.issue(identifier)
            return self._new_comment(issue["id"], body, actor=by)

    def add_attachment(self, identifier: str, url: str, *, title: str = "") -> Record:
        """An attachment as an integration makes it (a GitHub pull request that mentions the
        issue); attaching a URL the issue has already updates that attachment, as on Linear."""
        with self.lock:
            issue = self.issue(identifier)
            for attachment in self.attachments.values():
                if attachment["issue_id"] == issue["id"] and attachment["url"] == url:
                    attachment["updatedAt"] = self.now()
                    return attachment
            stamp = self.now()
            attachment = {
                "id": str(uuid.uuid4()),
                "url": url,
                "title": title or url,
                "createdAt": stamp,
                "updatedAt": stamp,
                "issue_id": issue["id"],
            }
            self.attachments[attachment["id"]] = attachment
            return attachment

    def add_relation(self, blocker: str, blocked: str, *, kind: str = "blocks") -> Record:
        """A relation as a person makes it in Linear: `blocker` blocks `blocked`."""
        with self.lock:
            return self._new_relation(self.issue(blocker), self.issue(blocked), kind)

    def blockers(self, identifier: str) -> set[str]:
        """The identifiers of the issues that block `identifier` ("blocks" relations)."""
        issue_id = self.issue(identifier)["id"]
        return {
            self.issues[r["issue_id"]]["identifier"]
            for r in self.relations.values()
            if r["related_issue_id"] == issue_id and r["type"] == "blocks"
        }

    def _new_relation(
        self, issue: Record, related: Record, kind: str, relation_id: str | None = None
    ) -> Record:
        stamp = self.now()
        relation = {
            "id": relation_id or str(uuid.uuid4()),
            "type": kind,
            "issue_id": issue["id"],
            "related_issue_id": related["id"],
            "createdAt": stamp,
            "updatedAt": stamp,
        }
        self.relations[relation["id"]] = relation
        return relation

    def set_state(self, identifier: str, state: str) -> None:
        with self.lock:
            issue = self.issue(identifier)
            issue["state_id"] = self.state(state)["id"]

    def issue(self, identifier_or_id: str) -> Record:
        for issue in self.issues.values():
            if identifier_or_id in (issue["id"], issue["identifier"]):
                return issue
        raise KeyError(identifier_or_id)

    def label_names(self, identifier: str) -> set[str]:
        return {self.labels[i]["name"] for i in self.issue(identifier)["label_ids"]}

    def state_name(self, identifier: str) -> str:
        return str(self.states[self.issue(identifier)["state_id"]]["name"])

    def comments_of(self, identifier: str) -> list[Record]:
        issue_id = self.issue(identifier)["id"]
        return [c for c in self.comments.values() if c["issue_id"] == issue_id]

    # -- the data behind the mutations ---------------------------------------------------------

    def _new_issue(
        self,
        team: Record,
        *,
        title: str,
        description: str,
        state_id: str,
        label_ids: list[str],
        parent_id: str | None,
        issue_id: str | None = None,
    ) -> Record:
        number = team["next_number"]
        team["next_number"] += 1
        stamp = self.now()
        identifier = f"{team['key']}-{number}"
        issue = {
            "id": issue_id or str(uuid.uuid4()),
            "identifier": identifier,
            "number": float(number),
            "title": title,
            "description": description or None,
            "url": f"https://linear.app/fake/issue/{identifier.lower()}",
            "createdAt": stamp,
            "updatedAt": stamp,
            "team_id": team["id"],
            "state_id": state_id,
            "label_ids": list(label_ids),
            "parent_id": parent_id,
        }
        self.issues[issue["id"]] = issue
        return issue

    def delete_comment(self, comment_id: str) -> None:
        """A person deletes a comment."""
        del self.comments[comment_id]

    def _new_comment(
        self, issue_id: str, body: str, *, actor: str, comment_id: str | None = None
    ) -> Record:
        user = {
            "viewer": self.viewer, "human": self.human, "guest": self.guest, "bot": self.bot
        }[actor]  # fmt: skip
        comment = {
            "id": comment_id or str(uuid.uuid4()),
            "body": body,
            "createdAt": self.now(),
            "issue_id": issue_id,
            "user_id": user["id"],
        }
        self.comments[comment["id"]] = comment
        self.issues[issue_id]["updatedAt"] = comment["createdAt"]
        return comment


# -- filters -------------------------------------------------------------------------------------

# entity kind: filter key: (value of the entity, the kind of that value or None for a scalar,
# and whether it is a collection).
Getter = Callable[[FakeLinear, Record], Any]
FIELDS: dict[str, dict[str, tuple[Getter, str | None, bool]]] = {
    "issue": {
        "id": (lambda f, r: r["id"], None, False),
        "number": (lambda f, r: r["number"], None, False),
        "title": (lambda f, r: r["title"], None, False),
        "team": (lambda f, r: f.teams[r["team_id"]], "team", False),
        "state": (lambda f, r: f.states[r["state_id"]], "state", False),
        "labels": (lambda f, r: [f.labels[i] for i in r["label_ids"]], "label", True),
        "parent": (lambda f, r: f.issues.get(r["parent_id"] or ""), "issue", False),
    },
    "team": {
        "id": (lambda f, r: r["id"], None, False),
        "key": (lambda f, r: r["key"], None, False),
        "name": (lambda f, r: r["name"], None, False),
    },
    "state": {
        "id": (lambda f, r: r["id"], None, False),
        "name": (lambda f, r: r["name"], None, False),
        "type": (lambda f, r: r["type"], None, False),
    },
    "attachment": {
        "id": (lambda f, r: r["id"], None, False),
        "url": (lambda f, r: r["url"], None, False),
        "title": (lambda f, r: r["title"], None, False),
    },
    "label": {
        "id": (lambda f, r: r["id"], None, False),
        "name": (lambda f, r: r["name"], None, False),
        "isGroup": (lambda f, r: r["isGroup"], None, False),
        "team": (lambda f, r: f.teams.get(r["team_id"] or ""), "team", False),
    },
}


def _unsupported(what: str) -> FakeError:
    return FakeError(f"the fake Linear does not implement the filter {what}")


def matches(fake: FakeLinear, kind: str, record: Record | None, condition: dict[str, Any]) -> bool:
    """Whether `record` (of `kind`; None for an absent relation) passes Linear's filter."""
    for key, value in condition.items():
        if key == "and":
            ok = all(matches(fake, kind, record, part) for part in value)
        elif key == "or":
            ok = any(matches(fake, kind, record, part) for part in value)
        elif key == "null":
            ok = (record is None) is bool(value)
        elif record is None:
            ok = False
        elif key not in FIELDS[kind]:
            raise _unsupported(f"{kind}.{key}")
        else:
            getter, sub_kind, collection = FIELDS[kind][key]
            got = getter(fake, record)
            if sub_kind is None:
                ok = compare(got, value, f"{kind}.{key}")
            elif collection:
                ok = _collection(fake, sub_kind, got, value, f"{kind}.{key}")
            else:
                ok = matches(fake, sub_kind, got, value)
        if not ok:
            return False
    return True


def _collection(
    fake: FakeLinear, kind: str, items: list[Record], condition: dict[str, Any], where: str
) -> bool:
    for key, value in condition.items():
        if key == "some":
            ok = any(matches(fake, kind, item, value) for item in items)
        elif key == "every":
            ok = all(matches(fake, kind, item, value) for item in items)
        else:
            raise _unsupported(f"{where}.{key}")
        if not ok:
            return False
    return True


def compare(got: Any, comparator: dict[str, Any], where: str) -> bool:
    for op, want in comparator.items():
        if op == "eq":
            ok = got == want
        elif op == "neq":
            ok = got != want
        elif op == "in":
            ok = got in want
        elif op == "nin":
            ok = got not in want
        elif op == "contains":
            ok = isinstance(got, str) and str(want) in got
        elif op == "eqIgnoreCase":
            ok = isinstance(got, str) and got.casefold() == str(want).casefold()
        elif op == "null":
            ok = (got is None) is bool(want)
        else:
            raise _unsupported(f"{where}.{op}")
        if not ok:
            return False
    return True


def connection(
    items: list[Record],
    first: int | None,
    after: str | None,
    last: int | None = None,
    before: str | None = None,
) -> Record:
    """A page of `items` (cursor: the item's id), as Linear pages: forward, `first` at most
    after `after`; or, given `last`, backward: the `last` before `before`."""
    ids = [item["id"] for item in items]

    def index(cursor: str) -> int:
        if cursor not in ids:
            raise _input_error("invalid cursor")
        return ids.index(cursor)

    if last is not None:
        if first is not None or after is not None:
            raise _input_error("first/after and last/before cannot be combined")
        if not 0 < last <= MAX_PAGE:
            raise _input_error(f"last must be between 1 and {MAX_PAGE}")
        end = len(items) if before is None else index(before)
        start = max(0, end - last)
        page = items[start:end]
        return {
            "nodes": page,
            "pageInfo": {
                "hasNextPage": end < len(items),
                "hasPreviousPage": start > 0,
                "startCursor": page[0]["id"] if page else None,
                "endCursor": page[-1]["id"] if page else None,
            },
        }
    size = DEFAULT_PAGE if first is None else first
    if not 0 < size <= MAX_PAGE:
        raise _input_error(f"first must be between 1 and {MAX_PAGE}")
    start = 0
    if after is not None:
        start = index(after) + 1
    page = items[start : start + size]
    return {
        "nodes": page,
        "pageInfo": {
            "hasNextPage": start + size < len(items),
            "hasPreviousPage": start > 0,
            "startCursor": page[0]["id"] if page else None,
            "endCursor": page[-1]["id"] if page else None,
        },
    }


# -- resolvers (attached once: the schema is shared by every FakeLinear) ---------------------------

_attached = threading.Lock()
_done: set[int] = set()


def _fake(info: Any) -> FakeLinear:
    fake = info.context
    assert isinstance(fake, FakeLinear)
    return fake


def _no_unknown(args: dict[str, Any], known: set[str]) -> None:
    unknown = {key for key, value in args.items() if value is not None} - known
    if unknown:
        raise FakeError(f"the fake Linear does not implement the arguments {sorted(unknown)}")


def _viewer(_: Any, info: Any) -> Record:
    return _fake(info).viewer


def _teams(_: Any, info: Any, **args: Any) -> Record:
    fake = _fake(info)
    _no_unknown(args, {"first", "after", "filter"})
    teams = [t for t in fake.teams.values() if matches(fake, "team", t, args.get("filter") or {})]
    return connection(teams, args.get("first"), args.get("after"))


def _team_states(team: Record, info: Any, **args: Any) -> Record:
    fake = _fake(info)
    _no_unknown(args, {"first", "after"})
    states = [s for s in fake.states.values() if s["team_id"] == team["id"]]
    return connection(states, args.get("first"), args.get("after"))


def _issue_labels(_: Any, info: Any, **args: Any) -> Record:
    fake = _fake(info)
    _no_unknown(args, {"first", "after", "filter"})
    condition = args.get("filter") or {}
    labels = [label for label in fake.labels.values() if matches(fake, "label", label, condition)]
    return connection(labels, args.get("first"), args.get("after"))


def _label_team(label: Record, info: Any) -> Record | None:
    return _fake(info).teams.get(label["team_id"] or "")


def _issues(_: Any, info: Any, **args: Any) -> Record:
    fake = _fake(info)
    _no_unknown(args, {"first", "after", "filter"})
    condition = args.get("filter") or {}
    issues = [i for i in fake.issues.values() if matches(fake, "issue", i, condition)]
    return connection(issues, args.get("first"), args.get("after"))


def _issue(_: Any, info: Any, id: str) -> Record:
    try:
        return _fake(info).issue(id)
    except KeyError:
        raise _not_found("Issue") from None


def _issue_team(issue: Record, info: Any) -> Record:
    return _fake(info).teams[issue["team_id"]]


def _issue_state(issue: Record, info: Any) -> Record:
    return _fake(info).states[issue["state_id"]]


def _issue_label_connection(issue: Record, info: Any, **args: Any) -> Record:
    fake = _fake(info)
    _no_unknown(args, {"first", "after"})
    labels = [fake.labels[i] for i in issue["label_ids"]]
    return connection(labels, args.get("first"), args.get("after"))


def _issue_parent(issue: Record, info: Any) -> Record | None:
    return _fake(info).issues.get(issue["parent_id"] or "")


def _issue_children(issue: Record, info: Any, **args: Any) -> Record:
    fake = _fake(info)
    _no_unknown(args, {"first", "after"})
    children = [i for i in fake.issues.values() if i["parent_id"] == issue["id"]]
    return connection(children, args.get("first"), args.get("after"))


def _issue_attachments(issue: Record, info: Any, **args: Any) -> Record:
    fake = _fake(info)
    _no_unknown(args, {"first", "after", "filter"})
    condition = args.get("filter") or {}
    attachments = [
        a
        for a in fake.attachments.values()
        if a["issue_id"] == issue["id"] and matches(fake, "attachment", a, condition)
    ]
    return connection(attachments, args.get("first"), args.get("after"))


def _issue_inverse_relations(issue: Record, info: Any, **args: Any) -> Record:
    """The relations whose related issue is this one (of every type, as on Linear)."""
    fake = _fake(info)
    _no_unknown(args, {"first", "after"})
    relations = [r for r in fake.relations.values() if r["related_issue_id"] == issue["id"]]
    return connection(relations, args.get("first"), args.get("after"))


def _relation_issue(relation: Record, info: Any) -> Record:
    return _fake(info).issues[relation["issue_id"]]


def _relation_related_issue(relation: Record, info: Any) -> Record:
    return _fake(info).issues[relation["related_issue_id"]]


def _relation_create(_: Any, info: Any, input: dict[str, Any], **args: Any) -> Record:
    fake = _fake(info)
    if input.get("id") and input["id"] in fake.relations:
        raise _input_error("Entity with this id already exists")
    try:
        issue = fake.issue(input["issueId"])
        related = fake.issue(input["relatedIssueId"])
    except KeyError:
        raise _not_found("Issue") from None
    if issue["id"] == related["id"]:
        raise _input_error("an issue cannot be related to itself")
    kind = input["type"]
    for relation in fake.relations.values():
        if (relation["issue_id"], relation["related_issue_id"], relation["type"]) == (
            issue["id"],
            related["id"],
            kind,
        ):
            raise _input_error("the relation already exists")
    relation = fake._new_relation(issue, related, kind, input.get("id"))
    return {"success": True, "lastSyncId": 1.0, "issueRelation": relation}


def _relation_delete(_: Any, info: Any, id: str) -> Record:
    fake = _fake(info)
    if fake.relations.pop(id, None) is None:
        raise _not_found("IssueRelation")
    return {"success": True, "lastSyncId": 1.0, "entityId": id}


def _issue_comments(issue: Record, info: Any, **args: Any) -> Record:
    fake = _fake(info)
    _no_unknown(args, {"first", "after", "last", "before"})
    comments = [c for c in fake.comments.values() if c["issue_id"] == issue["id"]]
    return connection(
        comments, args.get("first"), args.get("after"), args.get("last"), args.get("before")
    )


def _comment(_: Any, info: Any, **args: Any) -> Record:
    _no_unknown(args, {"id"})
    found = _fake(info).comments.get(args.get("id") or "")
    if found is None:
        raise _not_found("Comment")
    return found


def _user_is_me(user: Record, info: Any) -> bool:
    return bool(user["id"] == _fake(info).viewer["id"])


def _comment_user(comment: Record, info: Any) -> Record | None:
    user = _fake(info).users[comment["user_id"]]
    return None if user["app"] else user


def _comment_bot(comment: Record, info: Any) -> Record | None:
    user = _fake(info).users[comment["user_id"]]
    return {"id": user["id"], "name": user["name"], "type": "app"} if user["app"] else None


def _comment_external_user(comment: Record, info: Any) -> None:
    return None


def _comment_issue(comment: Record, info: Any) -> Record:
    return _fake(info).issues[comment["issue_id"]]


def _label_ids(fake: FakeLinear, team: Record, ids: Iterable[str]) -> list[str]:
    for label_id in ids:
        label = fake.labels.get(label_id)
        if label is None or label["team_id"] not in (None, team["id"]):
            raise _not_found("IssueLabel")
        if label["isGroup"]:
            raise _input_error("a label group cannot be applied to an issue")
    return list(dict.fromkeys(ids))


def _issue_create(_: Any, info: Any, input: dict[str, Any]) -> Record:
    fake = _fake(info)
    team = fake.teams.get(input["teamId"])
    if team is None:
        raise _not_found("Team")
    if input.get("id") and input["id"] in fake.issues:
        raise _input_error("Entity with this id already exists")
    state_id = input.get("stateId") or fake.state("Backlog", team=team["key"])["id"]
    if fake.states.get(state_id, {}).get("team_id") != team["id"]:
        raise _input_error("the state does not belong to the issue's team")
    parent_id = None
    if input.get("parentId"):
        try:
            parent_id = fake.issue(input["parentId"])["id"]
        except KeyError:
            raise _not_found("Issue") from None
    issue = fake._new_issue(
        team,
        title=input.get("title") or "",
        description=input.get("description") or "",
        state_id=state_id,
        label_ids=_label_ids(fake, team, input.get("labelIds") or []),
        parent_id=parent_id,
        issue_id=input.get("id"),
    )
    return {"success": True, "lastSyncId": 1.0, "issue": issue}


def _issue_update(_: Any, info: Any, id: str, input: dict[str, Any]) -> Record:
    fake = _fake(info)
    try:
        issue = fake.issue(id)
    except KeyError:
        raise _not_found("Issue") from None
    team = fake.teams[issue["team_id"]]
    supported = {"stateId", "addedLabelIds", "removedLabelIds", "labelIds", "title", "description"}
    unknown = set(input) - supported
    if unknown:
        raise FakeError(f"the fake Linear does not implement the update of {sorted(unknown)}")
    if "stateId" in input:
        if fake.states.get(input["stateId"], {}).get("team_id") != team["id"]:
            raise _input_error("the state does not belong to the issue's team")
        issue["state_id"] = input["stateId"]
    if "labelIds" in input:
        issue["label_ids"] = _label_ids(fake, team, input["labelIds"])
    for label_id in _label_ids(fake, team, input.get("addedLabelIds") or []):
        if label_id not in issue["label_ids"]:
            issue["label_ids"].append(label_id)
    removed = set(input.get("removedLabelIds") or [])
    issue["label_ids"] = [i for i in issue["label_ids"] if i not in removed]
    if "title" in input:
        issue["title"] = input["title"]
    if "description" in input:
        issue["description"] = input["description"]
    issue["updatedAt"] = fake.now()
    return {"success": True, "lastSyncId": 1.0, "issue": issue}


def _label_create(_: Any, info: Any, input: dict[str, Any], **args: Any) -> Record:
    fake = _fake(info)
    team_id = input.get("teamId")
    if team_id is not None and team_id not in fake.teams:
        raise _not_found("Team")
    name = input["name"]
    for label in fake.labels.values():
        same_scope = label["team_id"] in (None, team_id) or team_id is None
        if same_scope and label["name"].casefold() == name.casefold():
            raise _input_error("duplicate label name", "A label with this name already exists.")
    label = {
        "id": input.get("id") or str(uuid.uuid4()),
        "name": name,
        "isGroup": bool(input.get("isGroup")),
        "team_id": team_id,
        "createdAt": fake.now(),
    }
    fake.labels[label["id"]] = label
    return {"success": True, "lastSyncId": 1.0, "issueLabel": label}


def _comment_create(_: Any, info: Any, input: dict[str, Any]) -> Record:
    fake = _fake(info)
    if input.get("id") and input["id"] in fake.comments:
        raise _input_error("Entity with this id already exists")
    try:
        issue = fake.issue(input.get("issueId") or "")
    except KeyError:
        raise _not_found("Issue") from None
    body = input.get("body")
    if not body:
        raise _input_error("a comment needs a body")
    comment = fake._new_comment(issue["id"], body, actor="viewer", comment_id=input.get("id"))
    return {"success": True, "lastSyncId": 1.0, "comment": comment}


def _comment_update(_: Any, info: Any, id: str, input: dict[str, Any], **_args: Any) -> Record:
    """Like Linear: a comment is edited only by its writer; one that is gone is not found."""
    fake = _fake(info)
    comment = fake.comments.get(id)
    if comment is None:
        raise _not_found("Comment")
    if comment["user_id"] != fake.viewer["id"]:
        raise _input_error("You can only edit your own comments")
    if input.get("body"):
        comment["body"] = input["body"]
        fake.issues[comment["issue_id"]]["updatedAt"] = fake.now()
    return {"success": True, "lastSyncId": 1.0, "comment": comment}


def _attach_once() -> None:
    schema = linear_schema()
    with _attached:
        if id(schema) in _done:
            return
        for type_name, field_name, resolver in (
            ("Query", "viewer", _viewer),
            ("Query", "teams", _teams),
            ("Query", "issueLabels", _issue_labels),
            ("Query", "issues", _issues),
            ("Query", "issue", _issue),
            ("Query", "comment", _comment),
            ("Team", "states", _team_states),
            ("IssueLabel", "team", _label_team),
            ("Issue", "team", _issue_team),
            ("Issue", "state", _issue_state),
            ("Issue", "labels", _issue_label_connection),
            ("Issue", "parent", _issue_parent),
            ("Issue", "children", _issue_children),
            ("Issue", "comments", _issue_comments),
            ("Issue", "attachments", _issue_attachments),
            ("Issue", "inverseRelations", _issue_inverse_relations),
            ("IssueRelation", "issue", _relation_issue),
            ("IssueRelation", "relatedIssue", _relation_related_issue),
            ("Comment", "user", _comment_user),
            ("User", "isMe", _user_is_me),
            ("Comment", "botActor", _comment_bot),
            ("Comment", "externalUser", _comment_external_user),
            ("Comment", "issue", _comment_issue),
            ("Mutation", "issueCreate", _issue_create),
            ("Mutation", "issueUpdate", _issue_update),
            ("Mutation", "issueLabelCreate", _label_create),
            ("Mutation", "commentCreate", _comment_create),
            ("Mutation", "commentUpdate", _comment_update),
            ("Mutation", "issueRelationCreate", _relation_create),
            ("Mutation", "issueRelationDelete", _relation_delete),
        ):
            attach(schema, type_name, field_name, resolver)
        _done.add(id(schema))
