"""What a human answered on an issue, and the questions Legion asks itself (its token budget, a
worker that keeps dying, one that spends without progress): read from the issue's comments,
pure but for `human_answer`."""

from __future__ import annotations

from collections.abc import Sequence

from legion.core.marks import defanged, question_mark
from legion.core.untrusted import MEMBER, Authored
from legion.trackers.base import Comment, Tracker, since_legion_wrote

# The author of the comments Legion writes on an issue (its questions, its asking again).
BUDGET_HEADING = "## Token budget spent"
# The kinds of question Legion asks for itself (their invisible marker, `core.marks`).
BUDGET_ASKED = "budget"
RESTARTS_ASKED = "restarts"
IDLE_ASKED = "idle_spend"
IDLE_HEADING = "## Spending without progress"
CHECKS_ASKED = "checks"
CHECKS_HEADING = "## Checks still failing"


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


def checks_question(issue: str, fixes: int, failing: str, unblock_label: str) -> str:
    return (
        f"{CHECKS_HEADING}\n\n{issue}'s implementer was resumed {fixes} times to fix its "
        f"pull request's failing checks, and they still fail: {defanged(failing)}. Legion "
        "resumes it no "
        "more until a human answers.\n\n"
        f'Answer with `legion feedback {issue} "…"` (how to fix them, or "try again"), which '
        f"resumes it with your answer; or fix the checks yourself, then remove "
        f"`{unblock_label}`.\n\n" + question_mark(CHECKS_ASKED, fixes=fixes)
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


def _budget_asked_at(comment: Comment) -> int | None:
    """The tokens used when Legion asked about the budget in `comment` (read from the
    question's marker, which only Legion's own comments carry: `Comment.by_legion`), or None
    when `comment` is no budget question. The words around it are never read: anyone can
    write them."""
    if comment.by_legion and comment.asked is not None and comment.asked.kind == BUDGET_ASKED:
        return comment.asked.figure("used")
    return None


def answers_from_people(comment: Comment) -> bool:
    """Whether `comment` can answer a question: a person's who decides for the project
    (`Comment.by_member`), neither Legion's nor an integration's."""
    return comment.by_member and not comment.by_legion and not comment.by_bot


def budget_allowed(comments: Sequence[Comment], budget: int) -> int:
    """The tokens an issue may use: its budget, or, once a person who decides for the project
    answered a budget question, what was used when it was asked plus one budget more (the
    tracker keeps the count). A stranger's comment raises nothing."""
    allowed = budget
    asked: int | None = None
    for comment in comments:
        used = _budget_asked_at(comment)
        if used is not None:
            asked = used
        elif asked is not None and answers_from_people(comment):
            allowed = asked + budget
            asked = None
    return allowed


def legion_asked(comments: Sequence[Comment]) -> bool:
    """Whether the question being answered (the last comment Legion wrote) is one Legion asked
    itself, about its token budget or a worker that keeps dying, rather than a worker's."""
    asked = [comment for comment in comments if comment.speaks]
    if not asked or asked[-1].asked is None:
        return False
    return asked[-1].asked.kind in (BUDGET_ASKED, RESTARTS_ASKED, IDLE_ASKED, CHECKS_ASKED)


def human_answer(tracker: Tracker, issue: str) -> tuple[Authored, ...]:
    """The answer after the last comment Legion or a worker wrote: the comments of people who
    decide for the project (`answers_from_people`), oldest first, each with its author."""
    return answer_in(since_legion_wrote(tracker, issue))


def answer_in(comments: Sequence[Comment]) -> tuple[Authored, ...]:
    """`human_answer` over comments already read (empty: none yet)."""
    answer: list[Authored] = []
    for comment in comments:
        if comment.speaks:
            answer = []
        elif answers_from_people(comment) and comment.body.strip():
            answer.append(Authored(comment.body, comment.author, "comment", MEMBER))
    return tuple(answer)


def plain(answer: Sequence[Authored]) -> str:
    """An answer as one text, typed into a question a worker is still waiting on: its words
    alone (an option it offered must read as that option; only members' comments are in it)."""
    return "\n\n".join(part.text.strip() for part in answer)
