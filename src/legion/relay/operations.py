"""The relay's operations, and the scope rules each request is checked against (`Call`).

Every request carries a capability (`legion.relay.capabilities`). A `project` capability (the
controller, its Oracle) may make any call. An `issue` capability for issue X (a worker) may:

- read X, its parent and its children (`get_issue`, `list_comments`), and their pull requests
  (`get_pr`, `prs_by_issue`; the PRs it says are linked to one count only where the tracker
  links them);
- write X: `set_status`, `update_labels`, `add_comment`;
- create an issue with `parent=X` (an architect's sub-issues), or one with no parent in Triage
  (the retro's "new issue for triage", which a human sorts before anything works on it);
- set what blocks X or one of X's children (`set_blocked_by`, and `create_issue`'s
  `blocked_by`), with blockers it may read (X, its parent, its children): an architect orders
  its sub-issues and makes X wait for them;
- read the CI checks and a check's log of X's own pull request only (`pr_checks`);
- open X's pull request (`create_pr(issue=X)`), and `set_draft`, `add_review` and `merge` only a
  pull request whose issue is X, each only in its role (`legion.core.roles`: the implementer
  opens it, only a review session reviews, only a finish session marks it ready and merges);
  an approval records the head it saw (`legion.forges.reviewed.ReviewedHeads`), and a merge
  lands only that head's work (`legion.core.reviewed_head`: but for notes under
  `docs/solutions/` and a clean merge of the base);
- nothing else: listing every issue or pull request, or any call on another issue, is refused
  with one line (`NotPermittedError`, exit 2) naming what it may act on and what it asked for.

A refusal (and an unknown capability) is written to the action log, without the token.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from legion.core import marks, roles
from legion.core.ids import branch_for
from legion.core.merge_gate import merge_refusal
from legion.core.model import ReviewOutcome, Status, normalize_identifier
from legion.core.reviewed_head import no_reviewed_head
from legion.errors import (
    ConflictError,
    InputError,
    LegionError,
    NotFoundError,
    NotPermittedError,
    ProtocolError,
)
from legion.forges.base import Forge, PrState, PullRequest
from legion.forges.reviewed import ReviewedHeads
from legion.relay.capabilities import Scope
from legion.relay.protocol import (
    error_answer,
    result_answer,
)
from legion.store import Store
from legion.trackers.base import Issue, Tracker

logger = logging.getLogger(__name__)


class Backends(Protocol):
    """What the relay answers with: the project's tracker and forge (the real ones, which hold
    the credentials) and its database (the capabilities, the action log). `legion.backends`
    opens them; the relay takes whatever it is handed."""

    @property
    def tracker(self) -> Tracker: ...
    @property
    def forge(self) -> Forge: ...
    @property
    def db(self) -> Store: ...


def _same(a: str, b: str) -> bool:
    return _key(a) == _key(b)


def _key(identifier: str) -> str:
    try:
        return normalize_identifier(identifier)
    except InputError:
        return identifier.strip().upper()


def _looks_like_issue(ref: str) -> bool:
    try:
        normalize_identifier(ref)
    except InputError:
        return False
    return True


class Call:
    """One request being checked and run: its arguments, its scope, the backends."""

    def __init__(
        self,
        backends: Backends,
        scope: Scope,
        op: str,
        args: dict[str, Any],
        capability: str = "",
        created: dict[str, int] | None = None,
    ):
        self.backends = backends
        self.capability = capability  # the token the request came with (the session's own)
        # Issues each capability created (`legion.core.roles.CREATION_ROLES`' bound).
        self.created = {} if created is None else created
        self.tracker = backends.tracker
        self.forge = backends.forge
        self.scope = scope
        self.op = op
        self.args = args

    # -- arguments ---------------------------------------------------------------------------

    def text(self, name: str) -> str:
        value = self.args.get(name)
        if not isinstance(value, str):
            raise ProtocolError(f"{self.op}: argument {name!r} must be text")
        return value

    def optional_text(self, name: str) -> str | None:
        return None if self.args.get(name) is None else self.text(name)

    def written(self, name: str) -> str:
        """A body the session wrote, as it goes on the tracker or forge: with no marker of
        Legion's in it (`legion.core.marks.defanged`), whoever's capability it is."""
        return marks.defanged(self.text(name))

    def texts(self, name: str) -> list[str]:
        value = self.args.get(name, [])
        items = list(value) if isinstance(value, list | tuple | frozenset) else None
        if items is None or not all(isinstance(item, str) for item in items):
            raise ProtocolError(f"{self.op}: argument {name!r} must be a list of text")
        return items

    def text_lists(self, name: str) -> dict[str, list[str]]:
        """A mapping of text to lists of text; empty when the argument is absent."""
        value = self.args.get(name, {})
        if not isinstance(value, dict) or not all(
            isinstance(key, str)
            and isinstance(items, list | tuple)
            and all(isinstance(item, str) for item in items)
            for key, items in value.items()
        ):
            raise ProtocolError(f"{self.op}: argument {name!r} must map text to lists of text")
        return {key: list(items) for key, items in value.items()}

    def optional_int(self, name: str) -> int | None:
        value = self.args.get(name)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise ProtocolError(f"{self.op}: argument {name!r} must be a whole number")
        return value

    def flag(self, name: str) -> bool:
        value = self.args.get(name, False)
        if not isinstance(value, bool):
            raise ProtocolError(f"{self.op}: argument {name!r} must be true or false")
        return value

    def status(self, name: str) -> Status:
        value = self.args.get(name)
        if not isinstance(value, Status):
            raise ProtocolError(f"{self.op}: argument {name!r} must be a status")
        return value

    def optional_status(self, name: str) -> Status | None:
        return None if self.args.get(name) is None else self.status(name)

    def author(self) -> str:
        """Who a comment or review is from: a session is its mode (`legion-review`,
        `legion-controller`), whatever it names (never `legion`, whose comments only Legion's
        own passes write); a command the daemon runs for the controller as Legion's pass
        names whoever it runs as."""
        if self.scope.mode and self.scope.mode != roles.LEGION:
            return f"legion-{self.scope.mode}"
        return self.text("author")

    # -- scope -------------------------------------------------------------------------------

    def refuse(self, asked: str, *, reading: bool = False) -> NotPermittedError:
        assert self.scope.issue is not None
        mine = self.scope.issue
        if reading:
            return NotPermittedError(
                f"this worker may read only {mine}, its parent and its children (asked: {asked})"
            )
        return NotPermittedError(f"this worker may act only on {mine} (asked: {asked})")

    def who(self) -> str:
        """Who is asking, in the roles' tables (`legion.core.roles`): the worker's mode; for a
        project's capability the controller, or Legion's own pass run for it."""
        if self.scope.issue is not None:
            return self.scope.mode
        return roles.LEGION if self.scope.mode == roles.LEGION else roles.CONTROLLER

    def allowed(self, refusal: str | None) -> None:
        """Refuse with `refusal` (the roles' one line), unless it is None."""
        if refusal is not None:
            raise NotPermittedError(refusal)

    def in_role(self, operation: str) -> None:
        """Unless the worker's mode (or, for a project's capability, the controller) may make
        `operation` (`legion.core.roles`), refuse."""
        if self.scope.issue is None:
            why = roles.controller_refusal(operation)
        else:
            why = roles.refusal(self.scope.mode, operation)
        if why is not None:
            raise NotPermittedError(why)

    def own(self, identifier: str) -> None:
        """Unless the scope covers writing `identifier`, refuse."""
        if self.scope.issue is not None and not _same(identifier, self.scope.issue):
            raise self.refuse(identifier)

    def whole_project(self, asked: str) -> None:
        if self.scope.issue is not None:
            raise self.refuse(asked, reading=True)

    def related(self, issue: Issue) -> bool:
        """Whether `issue` is the scope's issue, its parent or one of its children."""
        mine = self.scope.issue
        if mine is None or _same(issue.identifier, mine):
            return True
        child = issue.parent is not None and _same(issue.parent, mine)
        parent = any(_same(child_id, mine) for child_id in issue.children)
        return child or parent

    def readable(self, identifier: str) -> None:
        """Unless the scope covers reading `identifier`, refuse."""
        mine = self.scope.issue
        if mine is None or _same(identifier, mine):
            return
        if not self.related(self.tracker.get_issue(identifier)):
            raise self.refuse(identifier, reading=True)

    def own_or_child(self, identifier: str) -> None:
        """Unless the scope covers writing `identifier` or one of its children (whose order
        the scope's issue sets), refuse."""
        mine = self.scope.issue
        if mine is None or _same(identifier, mine):
            return
        issue = self.tracker.get_issue(identifier)
        if issue.parent is None or not _same(issue.parent, mine):
            raise NotPermittedError(
                f"this worker may set what blocks only {mine} and its children "
                f"(asked: {identifier})"
            )

    def blockers(self, names: list[str], blocked: str) -> None:
        """Unless the scope may read every one of `names` (as blockers of `blocked`), refuse;
        one that does not exist is bad input."""
        for name in names:
            try:
                self.readable(name)
            except NotFoundError:
                raise InputError(
                    f"no issue {name} to block {blocked} (see `legion issue list`)"
                ) from None

    def own_pr(self, ref: str) -> None:
        """Unless the scope covers the pull request `ref` as its own issue's (a worker reads
        the CI checks and logs of its own PR only), refuse."""
        mine = self.scope.issue
        if mine is None:
            return
        if _looks_like_issue(ref):
            issue, asked = ref, ref
        else:
            issue = self.forge.get_pr(ref).issue  # which issue a number is for: the forge says
            asked = f"PR {ref} of {issue or 'no issue'}"
        if not _same(issue, mine):
            raise NotPermittedError(
                f"this worker may read the checks of only {mine}'s pull request (asked: {asked})"
            )

    def pr(self, ref: str, *, writing: bool) -> PullRequest | None:
        """Unless the scope covers the pull request `ref`, refuse. Returns it when it had to be
        fetched to tell (a number: which issue it is for is on the forge)."""
        mine = self.scope.issue
        if mine is None or (_looks_like_issue(ref) and _same(ref, mine)):
            return None
        if _looks_like_issue(ref):
            if writing:
                raise self.refuse(ref)
            self.readable(ref)
            return None
        pr = self.forge.get_pr(ref)
        if writing:
            self.own(pr.issue)
            # Its own pull request only: a fork's, or one on another branch whose body says
            # "Fixes" this issue, is someone else's work to review or merge.
            if pr.from_fork or pr.branch != branch_for(mine):
                where = "a fork" if pr.from_fork else pr.branch
                raise NotPermittedError(
                    f"this worker may write only its own pull request, from {branch_for(mine)} "
                    f"of this repository (PR {ref} is from {where})"
                )
        else:
            try:
                self.readable(pr.issue)
            except NotPermittedError:
                raise self.refuse(f"PR {ref} of {pr.issue}", reading=True) from None
        return pr


# -- the operations --------------------------------------------------------------------------------


def _list_issues(call: Call) -> Any:
    call.whole_project("every issue")
    return call.tracker.list_issues(
        status=call.optional_status("status"), label=call.optional_text("label")
    )


def _get_issue(call: Call) -> Any:
    identifier = call.text("identifier")
    issue = call.tracker.get_issue(identifier)
    if not call.related(issue):
        raise call.refuse(identifier, reading=True)
    return issue


def _create_issue(call: Call) -> Any:
    parent = call.optional_text("parent")
    status = call.status("status")
    labels = call.texts("labels")
    if parent is not None and call.scope.issue is not None:
        call.own(parent)
    call.allowed(
        roles.creation_refusal(
            call.who(),
            parent=parent,
            own=call.scope.issue,
            status=status,
            labels=frozenset(labels),
            created=call.created.get(call.capability, 0),
        )
    )
    blocked_by = call.texts("blocked_by")
    call.blockers(blocked_by, "the new issue")
    created = call.tracker.create_issue(
        call.text("title"),
        body=call.written("body"),
        status=status,
        labels=labels,
        parent=parent,
        blocked_by=blocked_by,
    )
    call.created[call.capability] = call.created.get(call.capability, 0) + 1
    return created


def _set_status(call: Call) -> Any:
    identifier = call.text("identifier")
    call.own(identifier)
    status = call.status("status")
    found = call.tracker.get_issue(identifier) if call.scope.issue is None else None
    call.allowed(
        roles.status_refusal(call.who(), status, found.status if found is not None else None)
    )
    return call.tracker.set_status(identifier, status)


def _update_labels(call: Call) -> Any:
    identifier = call.text("identifier")
    call.own(identifier)
    add, remove = call.texts("add"), call.texts("remove")
    found = call.tracker.get_issue(identifier) if call.scope.issue is None else None
    call.allowed(
        roles.label_refusal(
            call.who(),
            frozenset(add),
            frozenset(remove),
            frozenset(found.labels if found is not None else ()),
            found.status if found is not None else None,
        )
    )
    return call.tracker.update_labels(identifier, add=add, remove=remove)


def _set_blocked_by(call: Call) -> Any:
    identifier = call.text("identifier")
    add, remove = call.texts("add"), call.texts("remove")
    call.own_or_child(identifier)
    call.blockers(add + remove, identifier)
    return call.tracker.set_blocked_by(identifier, add=add, remove=remove)


def _add_comment(call: Call) -> Any:
    identifier = call.text("identifier")
    call.own(identifier)
    # Every caller is a session Legion started: what it writes is Legion's, whatever it says,
    # so a worker's comment is never read as a person's answer.
    return call.tracker.add_comment(
        identifier, call.written("body"), author=call.author(), by_legion=True
    )


# The most comments of one issue a session reads in one call: the latest this many. Every
# comment of an issue holding thousands would cost the daemon's token one request a hundred.
SESSION_COMMENTS = 500


def _list_comments(call: Call) -> Any:
    identifier = call.text("identifier")
    call.readable(identifier)
    newest = call.optional_int("newest")
    newest = SESSION_COMMENTS if newest is None else max(0, min(newest, SESSION_COMMENTS))
    return call.tracker.list_comments(identifier, newest=newest)


def _create_pr(call: Call) -> Any:
    issue = call.text("issue")
    call.own(issue)
    call.in_role("create_pr")
    branch = call.text("branch")
    if branch != branch_for(issue):  # another issue's work, or the base, as this one's
        raise NotPermittedError(
            f"a session opens {issue}'s pull request only from {branch_for(issue)} "
            f"(asked: {branch})"
        )
    title = call.optional_text("title")
    others = marks.foreign_references(title or "", issue)
    if others:  # a tracker links a pull request to every issue its title names
        raise NotPermittedError(
            f"a pull request's title names only its own issue, {issue} (it names {others[0]})"
        )
    return call.forge.create_pr(
        issue,
        branch,
        title=title,
        body=marks.inert_closing(call.written("body"), issue),
        draft=call.flag("draft"),
    )


def _get_pr(call: Call) -> Any:
    ref = call.text("ref")
    fetched = call.pr(ref, writing=False)
    return fetched if fetched is not None else call.forge.get_pr(ref)


def _list_prs(call: Call) -> Any:
    call.whole_project("every pull request")
    return call.forge.list_prs()


def _prs_by_issue(call: Call) -> Any:
    issues = call.texts("issues")
    for issue in issues:
        call.readable(issue)
    links = {issue: urls for issue, urls in call.text_lists("links").items() if issue in issues}
    if call.scope.issue is not None:
        # A worker's links count only where its tracker has them: a URL it names itself could
        # be any issue's pull request.
        links = {
            issue: [url for url in urls if url in call.tracker.get_issue(issue).links]
            for issue, urls in links.items()
        }
    kept = {issue: urls for issue, urls in links.items() if urls}
    return call.forge.prs_by_issue(issues, links=kept or None)


def _set_draft(call: Call) -> Any:
    ref = call.text("ref")
    call.pr(ref, writing=True)
    call.in_role("set_draft")
    return call.forge.set_draft(ref, call.flag("draft"))


def _branch_head(call: Call) -> Any:
    ref = call.text("ref")
    call.pr(ref, writing=False)
    return call.forge.branch_head(ref)


def _pr_checks(call: Call) -> Any:
    ref = call.text("ref")
    call.own_pr(ref)
    return call.forge.pr_checks(ref, log=call.optional_text("log"))


def _add_review(call: Call) -> Any:
    ref = call.text("ref")
    call.pr(ref, writing=True)
    call.in_role("add_review")
    outcome = call.text("outcome")
    # The head this approval is for, read before the review is recorded: a commit pushed
    # meanwhile is not taken as reviewed.
    head = call.forge.branch_head(ref) if outcome == "approved" else None
    pr = call.forge.add_review(ref, outcome, body=call.written("body"), author=call.author())
    heads = ReviewedHeads(call.backends.db)
    if outcome == "approved" and head is not None:
        heads.record(pr.number, pr.branch, head)
    elif outcome != "commented":
        heads.forget(pr.number)  # changes asked for (or no branch to pin): no approved head
    return pr


def _merge(call: Call) -> Any:
    ref = call.text("ref")
    call.pr(ref, writing=True)
    call.in_role("merge")
    pr = call.forge.get_pr(ref)
    if pr.state is not PrState.OPEN:
        return call.forge.merge(ref)  # merged already (done), or closed (refused there)
    if pr.review is not ReviewOutcome.APPROVED:
        # Whatever moved the issue along (its status is the worker's to write), only approved
        # work is merged by a session.
        raise NotPermittedError(
            f"PR #{pr.number} has no approving review: a review session approves it first"
        )
    # And only the work the approval saw (`legion.core.reviewed_head`): the head a review
    # session approved, from Legion's own records.
    reviewed = ReviewedHeads(call.backends.db).head(pr.number, pr.branch)
    if reviewed is None:
        raise NotPermittedError(no_reviewed_head(pr.number))
    # And never red work, whatever the session's skill says (`legion.core.merge_gate`).
    red = merge_refusal(
        pr.number,
        [c.name for c in pr.failing_checks],
        [c.name for c in pr.pending_checks],
        person=False,
    )
    if red is not None:
        raise ConflictError(red)
    return call.forge.merge(str(pr.number), reviewed=reviewed)


Operation = Callable[[Call], Any]


class Deferred:
    """What an operation returns to be finished outside the executor thread: `work` runs in
    the request's own connection thread (a command that takes seconds must not hold up every
    other session's requests), after the operation checked the scope in the executor's."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self.work = work

    def answer(self, op: str) -> dict[str, Any]:
        """The answer of `work`; never raises."""
        try:
            return result_answer(self.work())
        except LegionError as exc:
            return error_answer(exc)
        except Exception as exc:
            return internal_error(op, exc)


OPS: dict[str, Operation] = {
    "tracker.list_issues": _list_issues,
    "tracker.get_issue": _get_issue,
    "tracker.create_issue": _create_issue,
    "tracker.set_status": _set_status,
    "tracker.update_labels": _update_labels,
    "tracker.set_blocked_by": _set_blocked_by,
    "tracker.add_comment": _add_comment,
    "tracker.list_comments": _list_comments,
    "forge.create_pr": _create_pr,
    "forge.get_pr": _get_pr,
    "forge.list_prs": _list_prs,
    "forge.prs_by_issue": _prs_by_issue,
    "forge.set_draft": _set_draft,
    "forge.branch_head": _branch_head,
    "forge.add_review": _add_review,
    "forge.merge": _merge,
    "forge.pr_checks": _pr_checks,
}


def internal_error(op: str, exc: Exception) -> dict[str, Any]:
    # A bug, or a backend's error it did not map: one line in the daemon's log, and the same
    # for the client, which reports an internal error.
    logger.error("relay: internal error in %s: %s: %s", op, type(exc).__name__, exc)
    return error_answer(exc)
