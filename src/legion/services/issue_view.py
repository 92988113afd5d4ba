"""One issue as a person looks at it: its latest comments, blockers, pull request, the tokens
its workers spent (`legion issue show`'s), and for the web view's issue page its actions,
workers and the last lines of its worker's screen. Read once, typed; the CLI and the web
view render it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from legion.errors import LegionError, NotFoundError
from legion.trackers.base import RECENT_COMMENTS

if TYPE_CHECKING:
    from legion.backends import Backends
    from legion.bus.model import Message
    from legion.config import Project
    from legion.core.model import Status
    from legion.core.usage import Usage
    from legion.forges.base import PullRequest
    from legion.sessions.roster import WorkerView
    from legion.store.actionlog import Entry
    from legion.trackers.base import Comment, Issue, Tracker


@dataclass(frozen=True, slots=True)
class IssueView:
    issue: Issue
    comments: list[Comment]  # the latest RECENT_COMMENTS, oldest first
    earlier_comments: bool  # there are older ones
    pr: PullRequest | None
    usage: Mapping[str, Usage]  # tokens by phase
    blockers: list[tuple[str, Status | None]]  # each blocker, None: its status unreadable


def read_issue(project: Project, backends: Backends, identifier: str) -> IssueView:
    """`identifier`'s view; a `NotFoundError` when the tracker has no such issue."""
    issue = backends.tracker.get_issue(identifier)
    # One more than shown: whether there are earlier ones, in the same read.
    comments = backends.tracker.list_comments(issue.identifier, newest=RECENT_COMMENTS + 1)
    try:
        pr = backends.forge.get_pr(issue.identifier)
    except NotFoundError:
        pr = None
    return IssueView(
        issue,
        comments[-RECENT_COMMENTS:],
        len(comments) > RECENT_COMMENTS,
        pr,
        _usage(project, backends, issue.identifier),
        _blocker_statuses(backends.tracker, issue),
    )


def _blocker_statuses(tracker: Tracker, issue: Issue) -> list[tuple[str, Status | None]]:
    """Each blocker with its status; None when it cannot be read (gone, not Legion's, or out
    of a worker's reach)."""
    found: list[tuple[str, Status | None]] = []
    for name in issue.blocked_by:
        try:
            found.append((name, tracker.get_issue(name).status))
        except LegionError:
            found.append((name, None))
    return found


def _usage(project: Project, backends: Backends, identifier: str) -> Mapping[str, Usage]:
    """The issue's tokens by phase (none: nothing ran yet). A session with the relay asks the
    daemon, which holds the records."""
    from legion.backends import open_workers

    if backends.relay is not None:
        from legion.services.session_ops import usage

        return usage(backends.relay, identifier)
    return open_workers(project, backends).roster.usage(identifier).get(identifier, {})


@dataclass(frozen=True, slots=True)
class IssuePage:
    """The web view's issue page: the issue's view, what Legion did on it, its workers and
    the last lines of its worker's screen ("" when none shows)."""

    project: str
    view: IssueView
    actions: list[Entry]
    workers: list[WorkerView]
    tail_of: str  # whose screen `tail` is: "implement (running)"; "" for none
    tail: str
    workers_unknown: str = ""  # why the workers could not be read (tmux did not answer)
    messages: tuple[Message, ...] = ()  # the last on the bus in the issue's channel


ACTIONS_SHOWN = 50
TAIL_LINES = 30


def read_issue_page(
    project: Project,
    backends: Backends,
    name: str,
    identifier: str,
    env: Mapping[str, str],
    view: IssueView | None = None,
) -> IssuePage:
    """The page of `identifier`; `view`: its tracker's and forge's part as read lately (what
    is on this machine, its actions, workers, screen and messages, is read now)."""
    from legion.backends import open_workers
    from legion.store.actionlog import ActionLog

    if view is None:
        view = read_issue(project, backends, identifier)
    issue = view.issue.identifier
    actions = ActionLog(backends.db).tail(ACTIONS_SHOWN, issue=issue)
    workers: list[WorkerView] = []
    tail_of, tail, unknown = "", "", ""
    try:
        roster = open_workers(project, backends, env).roster
        workers = roster.views_of(issue)
        if workers:
            try:
                shown, tail = roster.peek(issue, TAIL_LINES)
                tail_of = f"{shown.record.mode.value} ({shown.state.value})"
            except NotFoundError as exc:
                tail_of = str(exc)
    except LegionError as exc:
        unknown = str(exc)
    return IssuePage(
        name, view, actions, workers, tail_of, tail.rstrip(), unknown, _said(env, name, issue)
    )


MESSAGES_SHOWN = 50


def _said(env: Mapping[str, str], project: str, issue: str) -> tuple[Message, ...]:
    """The issue's channel's last messages on the bus (none when the bus cannot be read)."""
    from legion.bus import open_bus
    from legion.bus.model import Channel
    from legion.core.ids import branch_for

    try:
        bus = open_bus(env)
        try:
            channel = Channel(project, branch_for(issue))
            return tuple(bus.messages(channel=channel, last=MESSAGES_SHOWN))
        finally:
            bus.close()
    except LegionError:
        return ()
