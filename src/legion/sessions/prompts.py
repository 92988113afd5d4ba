"""Every prompt Legion types into a session, in one place: the controller's wake-up, and the
follow-ups a worker is resumed with (requested changes, failing checks, a human's answer, a
session that stopped early, the finisher's failing checks). Each starts from the worker's own
first prompt (`AgentRuntime.worker_prompt`: how its CLI invokes the skill), so the worker is
always back in its skill and mode. Pure: the reconciler and the daemon compose, this words.

Text that comes from outside (a review's body, a check's name, a human's answer) is kept as it
is, except where a terminal would act on it: names and links from the forge are escaped."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from legion.core.model import Mode
from legion.core.text import for_display
from legion.core.untrusted import MEMBER, Authored, fence_rule, fenced, token_for
from legion.forges.base import PullRequest
from legion.runtime.base import AgentRuntime


def controller_prompt(mode: str, reason: str, runtime: AgentRuntime | None = None) -> str:
    """The controller's prompt: its skill, with why it is woken (`runtime`: its CLI, which says
    how a skill is invoked; default Claude Code's slash command)."""
    args = reason
    if mode != "llm":
        args += (
            " (auto mode: the daemon carries out the mechanical actions; handle only what "
            "needs judgment)"
        )
    if runtime is None:
        return f"/legion-controller {args}"
    return runtime.skill_prompt("legion-controller", args)


def failing_checks_text(pr: PullRequest) -> str:
    """The failing CI checks of `pr` for a worker's prompt: one line each, with its log link.
    Names and links are the forge's text, escaped (`for_display`) like all of it."""
    lines = [f"CI checks fail on PR #{pr.number}:"]
    for check in pr.failing_checks:
        where = f": {check.url}" if check.url else " (no log link; see the PR's checks)"
        lines.append(f"- {for_display(check.name)}{for_display(where)}")
    return "\n".join(lines)


def _log_command(pr: PullRequest) -> str:
    """The command that prints the end of a check's log (`legion pr checks`): the forge's
    token stays with the daemon, which fetches it."""
    return f"`legion pr checks {for_display(pr.issue or str(pr.number))} --log NAME`"


def requested_changes(first: str, pr: PullRequest | None) -> str:
    """The implementer resumed with the reviewer's request (and any failing checks)."""
    reviews = pr.reviews if pr else ()
    # Only a review by someone who decides for the project (a stranger's words are theirs).
    asked = [r for r in reviews if r.outcome == "changes_requested" and r.by_member]
    review = asked[-1] if asked else None
    checks = f"{failing_checks_text(pr)}\n\n" if pr and pr.failing_checks else ""
    said = (
        _quoted([Authored(review.body, review.author, "review", MEMBER)])
        if review is not None and review.body.strip()
        else "(see the PR reviews)"
    )
    return (
        f"{first}\n\n"
        f"The reviewer requested changes on PR #{pr.number if pr else '?'}:\n\n"
        f"{said}\n\n"
        f"{checks}"
        "Address every point in this workspace and commit. Then remove worker-active and "
        "stop, without adding worker-done: Legion sends the work back to review."
    )


def fix_failing_checks(first: str, pr: PullRequest) -> str:
    """The implementer resumed because CI fails on an approved pull request."""
    return (
        f"{first}\n\n"
        f"{failing_checks_text(pr)}\n\n"
        f"Read each log ({_log_command(pr)}), fix the cause on {pr.branch} in this "
        "workspace, run the tests, "
        "commit and push. Then remove worker-active and stop, without adding worker-done: "
        "Legion sends the work back to review. If a failure is not this work's to fix "
        "(a broken runner, a check of another change), ask a human instead."
    )


def carry_on(first: str) -> str:
    """A worker restarted after its session stopped before it finished."""
    return (
        f"{first}\n\n"
        "Your previous session stopped before it finished. Check where the work stands "
        "(issue comments, the workspace, the PR) and carry on."
    )


def _quoted(parts: Sequence[Authored]) -> str:
    """`parts` fenced for this one prompt, and what the fences mean."""
    token = token_for([part.text for part in parts], lambda: secrets.token_hex(6))
    return f"{fenced(parts, token)}\n\n{fence_rule(token)}"


def human_answered(first: str, answer: Sequence[Authored], mode: Mode) -> str:
    """A worker that asked and stopped, resumed with the answer of people who decide for the
    project (`reconcile.answers.answer_in`), each part fenced with its author."""
    return (
        f"{first}\n\n"
        f"A human answered your question:\n\n{_quoted(answer)}\n\n"
        f"Continue the {mode.value} work with this answer."
    )


def answer_to_legions_question(answer: Sequence[Authored]) -> str:
    """What the worker that is due is told of a human's answer to a question Legion asked
    itself (its token budget, a worker that keeps dying)."""
    return f"A human answered Legion's question on this issue:\n\n{_quoted(answer)}"


def with_note(first: str, note: str) -> str:
    return f"{first}\n\n{note}"
