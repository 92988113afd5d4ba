"""Legion's review of a pull request on GitHub, written and read back. Pure.

Legion's workers share one token, and GitHub does not let a PR's author approve it, so a
worker's verdict is a label (`worker-approved`, `worker-changes-requested`) plus a marked
comment that carries the reviewer's words, its first line saying what it is. The label
decides; without one, a person's native review (APPROVED, CHANGES_REQUESTED) does."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from legion.core.marks import mark, unmark
from legion.forges.base import Review
from legion.github.repository import MEMBER_ASSOCIATIONS

APPROVED_LABEL = "worker-approved"
CHANGES_LABEL = "worker-changes-requested"
LABEL_STYLE = {  # color, description: used when Legion creates the label
    APPROVED_LABEL: ("0e8a16", "A Legion reviewer approved this pull request"),
    CHANGES_LABEL: ("d93f0b", "A Legion reviewer asked for changes"),
}
REVIEW_OUTCOMES = ("approved", "changes_requested", "commented")

# A Legion review comment's first line says what it is; the outcome is the label's.
_HEADINGS = {
    "approved": "Legion review: approved",
    "changes_requested": "Legion review: changes requested",
    "commented": "Legion review: comment",
}
_OUTCOME_BY_HEADING = {heading: outcome for outcome, heading in _HEADINGS.items()}
_HEADING = re.compile(r"^\*\*(Legion review: [a-z ]+)\*\*[ \t]*(?:\n+|$)")
_NATIVE_OUTCOMES = {
    "APPROVED": "approved",
    "CHANGES_REQUESTED": "changes_requested",
    "COMMENTED": "commented",
}


def review_comment(outcome: str, body: str, author: str) -> str:
    """The marked PR comment that carries a Legion review."""
    heading = f"**{_HEADINGS[outcome]}**"
    return mark(f"{heading}\n\n{body.strip()}" if body.strip() else heading, author)


def verdict_labels(outcome: str) -> tuple[str, str] | None:
    """(the label a verdict puts on, the one it takes off); None for a mere comment."""
    if outcome == "approved":
        return APPROVED_LABEL, CHANGES_LABEL
    if outcome == "changes_requested":
        return CHANGES_LABEL, APPROVED_LABEL
    return None


def reviews_of(node: Mapping[str, Any], labels: frozenset[str]) -> tuple[Review, ...]:
    """The PR's reviews, ordered so that `PullRequest.review` gives the outcome that decides:
    Legion's label first, else the native reviews (GitHub's `reviewDecision`, else the latest
    verdict). Legion's review comments are listed for their words; their verdict counts only
    while its label is on the PR."""
    if CHANGES_LABEL in labels:
        label_outcome: str | None = "changes_requested"
    elif APPROVED_LABEL in labels:
        label_outcome = "approved"
    else:
        label_outcome = None
    entries: list[Review] = []
    for review in (node.get("latestReviews") or {}).get("nodes") or []:
        outcome = _NATIVE_OUTCOMES.get(review.get("state") if review else "")
        if review and outcome is not None:
            when = review.get("submittedAt") or ""
            member = review.get("viewerDidAuthor") is True or (
                review.get("authorAssociation") in MEMBER_ASSOCIATIONS
            )
            login = _login(review.get("author"))
            entries.append(Review(outcome, login, review["body"], when, by_member=member))
    legion: list[Review] = []
    for comment in (node.get("comments") or {}).get("nodes") or []:
        if not comment or comment.get("viewerDidAuthor") is not True:
            continue  # Legion's reviews are written with its token: anyone else's is a comment
        text, author, _ = unmark(comment.get("body") or "")
        match = _HEADING.match(text)
        if author is None or match is None or match.group(1) not in _OUTCOME_BY_HEADING:
            continue
        said = _OUTCOME_BY_HEADING[match.group(1)]
        outcome = said if said == label_outcome else "commented"
        legion.append(Review(outcome, author, text[match.end() :], comment.get("createdAt") or ""))
    entries = sorted([*entries, *legion], key=lambda review: review.created_at)
    decision = node.get("reviewDecision")
    wanted = label_outcome or _NATIVE_OUTCOMES.get(decision or "") or _verdict(entries)
    if wanted in ("approved", "changes_requested") and _verdict(entries) != wanted:
        # The decisive outcome must read last: the label's (with its comment's words), or
        # GitHub's decision over several reviewers.
        source = next((r for r in reversed(legion) if r.outcome == wanted), None)
        if source is not None:
            entries.remove(source)
            entries.append(source)
        elif label_outcome is not None:
            label = CHANGES_LABEL if wanted == "changes_requested" else APPROVED_LABEL
            entries.append(Review(wanted, label, "", node.get("updatedAt") or ""))
        else:
            entries.append(Review(wanted, "github", "", node.get("updatedAt") or ""))
    return tuple(entries)


def _login(actor: Any) -> str:
    return (actor or {}).get("login") or "ghost"  # GitHub's name for a deleted account


def _verdict(reviews: Iterable[Review]) -> str | None:
    """What `PullRequest.review` makes of `reviews`: the latest verdict, comments aside."""
    for review in reversed(list(reviews)):
        if review.outcome in ("approved", "changes_requested"):
            return review.outcome
    return None
