"""What a human answered on an issue, and the questions Legion asks itself (its token budget, a
worker that keeps dying, one that spends without progress): read from the issue's comments,
pure but for `human_answer`."""

from __future__ import annotations

import re
from collections.abc import Sequence

from legion.core.marks import question_mark
from legion.trackers.base import Comment, Tracker

# The author of the comments Legion writes on an issue (its questions, its asking again).
BUDGET_HEADING = "## Token budget spent"
# The kinds of question Legion asks for itself (their invisible marker, `core.marks`).
BUDGET_ASKED = "budget"
RESTARTS_ASKED = "restarts"
IDLE_ASKED = "idle_spend"
IDLE_HEADING = "## Spending without progress"


# How the question Legion asks about a worker that keeps dying begins (see `legion_asked`).
RESTARTS_QUESTION = "Legion restarted this issue's worker"


def budget_question(issue: str, used: int, allowed: int, budget: int) -> str:
    return (
        f"{BUDGET_HEADING}\n\n{issue}'s workers have used {used:,} tokens (input, output and "
        f"cached), past the {allowed:,} allowed (`token_budget` = {budget:,} per issue). Legion "
        "starts no more workers on it until a human answers.\n\n"
        f'Answer with `legion feedback {issue} "go on"` to allow {budget:,} more; or move the '
        "issue out of the way, or raise `token_budget` in `.legion/config.toml`.\n\n"
        + question_mark(BUDGET_ASKED, used=used)
    )


def idle_question(issue: str, mode: str, used: int, since: str, limit: int) -> str:
    return (
        f"{IDLE_HEADING}\n\n{issue}'s {mode} worker used {used:,} tokens (input, output and "
        f"cached) since {since} with no commit, no change in its workspace and no comment or "
        f"message: past `idle_spend_limit` ({limit:,}). Legion stopped it; its workspace and "
        "session are kept.\n\n"
        f'Answer with `legion feedback {issue} "go on"` (or what it should do instead) to resume '
        "it in the same session; or move the issue out of the way, or raise `idle_spend_limit` "
        "in `.legion/config.toml`.\n\n" + question_mark(IDLE_ASKED, used=used)
    )


def restarts_question(issue: str, limit: int, minutes: int, unblock_label: str) -> str:
    return (
        f"{RESTARTS_QUESTION} {limit} times in {minutes} minutes and it keeps stopping. "
        f"See `legion peek {issue}`; fix the cause, then remove `{unblock_label}`.\n\n"
        + question_mark(RESTARTS_ASKED)
    )


# How a budget question said what was used before it carried a marker (questions asked by an
# earlier Legion still count).
_BUDGET_USED_BEFORE_MARKERS = re.compile(r"have used ([\d,]+) tokens")


def _budget_asked_at(comment: Comment) -> int | None:
    """The tokens used when Legion asked about the budget in `comment`, or None when
    `comment` is no budget question."""
    if comment.asked is not None:
        return comment.asked.figure("used") if comment.asked.kind == BUDGET_ASKED else None
    found = _BUDGET_USED_BEFORE_MARKERS.search(comment.body)
    if comment.body.lstrip().startswith(BUDGET_HEADING) and found:
        return int(found.group(1).replace(",", ""))
    return None


def budget_allowed(comments: Sequence[Comment], budget: int) -> int:
    """The tokens an issue may use: its budget, or, once a human answered a budget question,
    what was used when it was asked plus one budget more (the tracker keeps the count)."""
    allowed = budget
    asked: int | None = None
    for comment in comments:
        if comment.by_legion:
            used = _budget_asked_at(comment)
            if used is not None:
                asked = used
        elif asked is not None and not comment.by_bot:
            allowed = asked + budget
            asked = None
    return allowed


def legion_asked(comments: Sequence[Comment]) -> bool:
    """Whether the question being answered (the last comment Legion wrote) is one Legion asked
    itself, about its token budget or a worker that keeps dying, rather than a worker's."""
    asked = [comment for comment in comments if comment.by_legion]
    if not asked:
        return False
    if asked[-1].asked is not None:
        return asked[-1].asked.kind in (BUDGET_ASKED, RESTARTS_ASKED, IDLE_ASKED)
    # Asked by an earlier Legion, before questions carried a marker.
    return asked[-1].body.lstrip().startswith((BUDGET_HEADING, RESTARTS_QUESTION))


def human_answer(tracker: Tracker, issue: str) -> str | None:
    """The human's words after the last comment Legion or a worker wrote, oldest first (a
    bot's comments are nobody's answer)."""
    return answer_in(tracker.list_comments(issue))


def answer_in(comments: Sequence[Comment]) -> str | None:
    """`human_answer` over comments already read."""
    answer: list[str] = []
    for comment in comments:
        if comment.by_legion:
            answer = []
        elif not comment.by_bot:
            answer.append(comment.body.strip())
    text = "\n\n".join(part for part in answer if part)
    return text or None
