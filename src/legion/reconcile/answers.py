"""What a human answered on an issue, and the questions Legion asks itself (its token budget, a
worker that keeps dying): read from the issue's comments, pure but for `human_answer`."""

from __future__ import annotations

import re
from collections.abc import Sequence

from legion.trackers.base import Comment, Tracker

BUDGET_HEADING = "## Token budget spent"


# How the question Legion asks about a worker that keeps dying begins (see `legion_asked`).
RESTARTS_QUESTION = "Legion restarted this issue's worker"


def budget_question(issue: str, used: int, allowed: int, budget: int) -> str:
    return (
        f"{BUDGET_HEADING}\n\n{issue}'s workers have used {used:,} tokens (input, output and "
        f"cached), past the {allowed:,} allowed (`token_budget` = {budget:,} per issue). Legion "
        "starts no more workers on it until a human answers.\n\n"
        f'Answer with `legion feedback {issue} "go on"` to allow {budget:,} more; or move the '
        "issue out of the way, or raise `token_budget` in `.legion/config.toml`."
    )


_BUDGET_USED = re.compile(r"have used ([\d,]+) tokens")


def budget_allowed(comments: Sequence[Comment], budget: int) -> int:
    """The tokens an issue may use: its budget, or, once a human answered a budget question,
    what was used when it was asked plus one budget more (the tracker keeps the count)."""
    allowed = budget
    asked: int | None = None
    for comment in comments:
        if comment.by_legion:
            found = _BUDGET_USED.search(comment.body)
            if comment.body.lstrip().startswith(BUDGET_HEADING) and found:
                asked = int(found.group(1).replace(",", ""))
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
    body = asked[-1].body.lstrip()
    return body.startswith((BUDGET_HEADING, RESTARTS_QUESTION))


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
