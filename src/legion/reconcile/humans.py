"""Asking a human through the tracker, and their answer: the one way a question is handed to a
human (a comment, then `user-input-needed`: `legion escalate`, the reconciler's questions) and
the one way the answer is written (`legion feedback`, the TUI's inbox: `answer_from_person`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from legion.core.marks import defanged
from legion.core.model import Label
from legion.errors import ConflictError
from legion.trackers.base import Comment, Issue, Tracker, since_legion_wrote

if TYPE_CHECKING:
    from legion.config import Project

# How a question for a human begins, whoever asks it (a worker's own comment, per its skill, or
# Legion's escalation): the inbox and `waiting_for_human` find the question by it.
QUESTION_HEADING = "## Question"


@dataclass(frozen=True)
class TrackerQuestion:
    """An issue waiting for a human, and what it asks (its latest question comment)."""

    issue: Issue
    question: str
    asked_at: str


def ask_human(tracker: Tracker, issue: str, body: str, *, author: str) -> tuple[Comment, Issue]:
    """Hand `issue` to a human: `body` as Legion's comment (marked as Legion's, so the answer
    is what follows it), then `user-input-needed`, which the decision table waits on. The
    comment comes first: a label without its question would ask nothing."""
    comment = tracker.add_comment(issue, body, author=author, by_legion=True)
    updated = tracker.update_labels(issue, add=[Label.USER_INPUT_NEEDED.value])
    return comment, updated


def escalation_comment(
    issue: str, asker: str, items: Sequence[tuple[str, Sequence[str]]], note: str = ""
) -> str:
    """The comment that hands a question to a human: the question (each part with its options),
    an optional note (why it comes to a human), and how to answer."""
    lines = [f"{QUESTION_HEADING} from {asker}", ""]
    # The question's words are a session's (or a stranger's it read): no marker of Legion's
    # may hide in them.
    for question, options in items:
        lines.append(f"> {defanged(question)}")
        if options:
            lines.append(f"> Options: {defanged(', '.join(options))}")
    if note:
        lines += ["", defanged(note)]
    lines += [
        "",
        f'Answer with `legion feedback {issue} "your answer"` (or a comment here and the label '
        f"`{Label.USER_FEEDBACK_GIVEN.value}`); Legion types it into the waiting session. Or "
        f'answer it yourself: `legion answer {issue} "your answer"`.',
    ]
    return "\n".join(lines)


def give_feedback(tracker: Tracker, issue: str, text: str, *, author: str) -> tuple[Issue, Comment]:
    """Comment the answer and add `user-feedback-given`: Legion relays it to the worker.
    Refused unless the issue is waiting for an answer."""
    asked = tracker.get_issue(issue)
    if Label.USER_INPUT_NEEDED.value not in asked.labels:
        raise ConflictError(
            f"{asked.identifier} is not waiting for an answer (it has no "
            f"{Label.USER_INPUT_NEEDED.value} label); to add a note, use "
            f"`legion issue comment {asked.identifier} --body TEXT`"
        )
    comment = tracker.add_comment(asked.identifier, text, author=author)
    updated = tracker.update_labels(asked.identifier, add=[Label.USER_FEEDBACK_GIVEN.value])
    return updated, comment


def answer_from_person(
    project: Project, tracker: Tracker, issue: str, text: str, *, author: str | None = None
) -> tuple[Issue, Comment]:
    """A person's answer (`legion feedback`, the TUI's and the web view's inbox): the text
    checked, written as `give_feedback` writes it, from `author` (the web view's person) or
    else whoever runs this, and the daemon woken to relay it."""
    from legion.core.text import clean_comment
    from legion.daemon_link import notify
    from legion.sessions.identity import default_author

    clean_comment(text)
    updated, comment = give_feedback(tracker, issue, text, author=author or default_author())
    notify(project)
    return updated, comment


def waiting_for_human(tracker: Tracker) -> list[TrackerQuestion]:
    """Every issue waiting for a human's answer, oldest question first: labelled
    `user-input-needed`, not yet `user-feedback-given`."""
    found = []
    for issue in tracker.list_issues(label=Label.USER_INPUT_NEEDED.value):
        if Label.USER_FEEDBACK_GIVEN.value in issue.labels:
            continue
        # Legion's (or a worker's) words, or those of a person who decides for the project: a
        # stranger's comment headed like a question must not stand in for the question a
        # person answers (their answer would go where the stranger reads it).
        comments = [
            c for c in since_legion_wrote(tracker, issue.identifier) if c.speaks or c.by_member
        ]
        asked = [c for c in comments if c.body.lstrip().startswith(QUESTION_HEADING)] or [
            c for c in comments if c.speaks
        ]
        last = asked[-1] if asked else None
        question = last.body.strip() if last is not None else issue.title
        found.append(TrackerQuestion(issue, question, last.created_at if last else ""))
    return sorted(found, key=lambda q: q.asked_at)
