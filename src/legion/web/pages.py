"""The web view's pages, rendered on the server with Jinja2, every value escaped (titles,
questions and bodies are written by strangers and by models: `<script>` shows as text).
The boards as columns by phase, each card toned by what a person must notice: a review or
check that said no (never shown as ready), a worker blocked on a question, one at work.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from legion.core.decide import Action
from legion.core.decision_log import inputs_words
from legion.core.model import Status
from legion.core.web_access import Role, may_write
from legion.services.issue_view import IssuePage
from legion.services.spend import Spend
from legion.store.actionlog import Entry, OutcomeKind
from legion.tui.sources import (
    PHASES,
    ActionLogView,
    Board,
    BoardIssue,
    Unavailable,
)
from legion.web.reads import Channels, Inbox

if TYPE_CHECKING:
    from legion.fleet.hosts import Host

# The columns a board always shows, empty or not: where work goes once it is picked up.
ALWAYS_SHOWN = (Status.TODO, Status.IN_PROGRESS, Status.NEEDS_REVIEW, Status.RETRO, Status.DONE)
# Words of a card's review or worker that a person must act on or wait for.
SAID_NO = ("changes requested", "failing", "failed", "closed", "unknown")
WAITING = ("blocked", "cannot reach the model", "dead")


@cache
def _templates() -> Environment:
    return Environment(
        loader=PackageLoader("legion.web", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )


@dataclass(frozen=True, slots=True)
class Card:
    identifier: str
    title: str
    worker: str
    review: str
    next: str  # what the decision table would do now ("" when nothing)
    tone: str  # "bad", "wait", "busy", "good" or ""
    checks: str  # its PR's CI checks: passing, failing, pending ("" with none)
    waits: str  # why it waits: blocked by, checks pending, a person's answer ("" when not)
    spent: str  # tokens (and cost) so far ("" when none)


@dataclass(frozen=True, slots=True)
class Column:
    phase: str
    cards: tuple[Card, ...]


@dataclass(frozen=True, slots=True)
class ShownBoard:
    name: str
    hosts: str
    warnings: tuple[str, ...]
    columns: tuple[Column, ...]
    unavailable: str = ""


def tone(issue: BoardIssue) -> str:
    if any(word in issue.review for word in SAID_NO) or issue.checks == "failing":
        return "bad"
    if any(word in issue.worker for word in WAITING) or issue.asks_human:
        return "wait"
    if issue.live:
        return "busy"
    if "approved" in issue.review or "merged" in issue.review:
        return "good"
    return ""


def card(issue: BoardIssue) -> Card:
    shown_next = "" if issue.action is Action.SKIP else issue.action.value.replace("_", " ")
    waits = [issue.note] if issue.note else []
    if issue.asks_human:
        waits.append("a person's answer (the inbox)")
    spent = f"{issue.tokens:,} tokens" if issue.tokens else ""
    if spent and issue.cost is not None:
        spent += f", {issue.cost:,.2f}"
    return Card(
        issue.identifier,
        issue.title,
        issue.worker,
        issue.review,
        shown_next,
        tone(issue),
        issue.checks,
        "; ".join(waits),
        spent,
    )


def shown_board(board: Board | Unavailable) -> ShownBoard:
    if isinstance(board, Unavailable):
        return ShownBoard("", "", (), (), unavailable=board.reason)
    phases = [p for p in PHASES if p in ALWAYS_SHOWN or any(i.phase is p for i in board.issues)]
    columns = tuple(
        Column(p.value, tuple(card(i) for i in board.issues if i.phase is p)) for p in phases
    )
    return ShownBoard(
        board.project, board.hosts or "", board.warnings, columns if board.issues else ()
    )


def board_part(boards: Sequence[Board | Unavailable], role: Role) -> str:
    del role  # every person sees the same board
    shown = [shown_board(board) for board in boards]
    return _templates().get_template("board.html").render(boards=shown)


def inbox_part(inbox: Inbox, role: Role, csrf: str = "") -> str:
    trackers = inbox.trackers
    troubles = list(trackers.troubles)
    asked = [] if isinstance(inbox.bus, str) else inbox.bus
    if isinstance(inbox.bus, str):
        troubles.append(inbox.bus)
    return (
        _templates()
        .get_template("inbox.html")
        .render(
            questions=trackers.questions,
            asked=asked,
            troubles=troubles,
            operator=may_write(role),
            csrf=csrf,
        )
    )


@dataclass(frozen=True, slots=True)
class TimelineItem:
    at: str
    who: str  # a comment's author; "legion" for an action, or the person who made it
    kind: str  # "comment", "message" (on the bus) or "action"
    text: str
    # For an action the decision table chose: the row and what the table was given.
    why: str = ""


def timeline(page: IssuePage) -> list[TimelineItem]:
    """What happened on the issue, oldest first: its latest comments, its channel's messages
    on the bus and Legion's actions, each with the reason the table gave it."""
    items = [TimelineItem(c.created_at, c.author, "comment", c.body) for c in page.view.comments]
    items += [TimelineItem(m.created_at, f"@{m.sender}", "message", m.body) for m in page.messages]
    items += [
        TimelineItem(
            e.at,
            e.author or "legion",
            "action",
            f"{e.action.replace('_', ' ')}: {e.outcome.value}"
            + (f" ({e.detail})" if e.detail else ""),
            _why(e),
        )
        for e in page.actions
    ]
    return sorted(items, key=lambda item: item.at)


def _why(entry: Entry) -> str:
    """The row that chose an action and what the table saw; a skip's row is its detail."""
    if entry.decided is None:
        return ""
    given = f"given {inputs_words(entry.decided.observation)}"
    if entry.outcome is OutcomeKind.SKIPPED:
        return given
    return f"why: {entry.decided.why}; {given}"


def issue_part(page: IssuePage | Unavailable, role: Role) -> str:
    del role  # every person sees the same issue
    template = _templates().get_template("issue.html")
    if isinstance(page, Unavailable):
        return template.render(unavailable=page.reason)
    pr = page.view.pr
    pr_tone = ""
    if pr is not None:
        said_no = pr.review.value == "changes_requested" or pr.checks.value == "failing"
        pr_tone = "bad" if said_no else ""
    tokens = {phase: usage.total for phase, usage in page.view.usage.items()}
    return template.render(page=page, timeline=timeline(page), tokens=tokens, pr_tone=pr_tone)


def page(
    page_name: str,
    title: str,
    live: str,
    *,
    who: str,
    role: Role,
    csrf: str,
    flash: str,
    stream: str = "",
) -> str:
    return (
        _templates()
        .get_template("base.html")
        .render(
            page=page_name,
            stream=stream or f"/events/{page_name}",
            version=version(live),
            title=title,
            live=Markup(live),  # rendered (and escaped) by `board_part` or `inbox_part`
            who=who,
            role=role.value,
            csrf=csrf,
            flash=flash,
        )
    )


def version(part: str) -> str:
    """A live part's digest: a page skips a push of what it shows already."""
    return hashlib.sha256(part.encode()).hexdigest()[:20]


def log_part(logs: Sequence[ActionLogView | Unavailable], issue: str) -> str:
    shown = [
        {"unavailable": log.reason}
        if isinstance(log, Unavailable)
        else {"project": log.project, "lines": log.lines}
        for log in logs
    ]
    return _templates().get_template("log.html").render(logs=shown, issue=issue)


CHART_WIDTH, CHART_HEIGHT = 700, 160  # the spend chart's drawing units


@dataclass(frozen=True, slots=True)
class Bar:
    day: str
    label: str  # MM-DD
    tokens: int
    x: float
    y: float
    w: float
    h: float


@dataclass(frozen=True, slots=True)
class Chart:
    """Tokens by day as bars, drawn by the server (SVG): no script, nothing fetched."""

    bars: tuple[Bar, ...]
    budget_y: float | None  # where the day's budget's line is; None: no budget
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT


def chart(days: Sequence[tuple[str, int]], budget: int | None) -> Chart:
    width, height = CHART_WIDTH, CHART_HEIGHT
    top = max([tokens for _, tokens in days] + [budget or 0, 1])
    step = width / max(1, len(days))
    bars = tuple(
        Bar(
            day,
            day[5:],
            tokens,
            x=round(n * step + step * 0.15, 1),
            y=round(height - height * tokens / top, 1),
            w=round(step * 0.7, 1),
            h=round(height * tokens / top, 1),
        )
        for n, (day, tokens) in enumerate(days)
    )
    budget_y = None if budget is None else round(height - height * budget / top, 1)
    return Chart(bars, budget_y)


def spend_part(projects: Sequence[tuple[str, Spend | Unavailable]]) -> str:
    shown = [
        {"name": name, "unavailable": spend.reason}
        if isinstance(spend, Unavailable)
        else {"name": name, "spend": spend, "chart": chart(spend.days, spend.daily_budget)}
        for name, spend in projects
    ]
    return _templates().get_template("spend.html").render(projects=shown)


def hosts_part(
    projects: Sequence[tuple[str, tuple[list[Host], float] | Unavailable]],
    role: Role,
    csrf: str = "",
) -> str:
    shown = [
        {"name": name, "unavailable": found.reason}
        if isinstance(found, Unavailable)
        else {"name": name, "hosts": found[0], "now": found[1]}
        for name, found in projects
    ]
    return (
        _templates()
        .get_template("hosts.html")
        .render(projects=shown, operator=may_write(role), csrf=csrf)
    )


def channels_part(found: Channels, role: Role, csrf: str = "") -> str:
    return (
        _templates()
        .get_template("channels.html")
        .render(
            channels=found.found,
            selected=found.selected,
            trouble=found.trouble,
            operator=may_write(role),
            csrf=csrf,
        )
    )


def login_form() -> str:
    return _templates().get_template("login.html").render()


def message(text: str) -> str:
    return _templates().get_template("message.html").render(message=text)
