"""How an epic closes: the comment that sums up its children when the last is Done. Pure.

An epic is a Backlog issue its architect split into children (the tracker's parent/child
relation). Its children do its work, each through plan, implement, review, retro and finish;
the epic itself is never planned or implemented (`core.decide`, rows 6 and 7). When every child
is Done it closes, Done, with one comment that says what each child became."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from legion.core.marks import defanged

# The first line of the summary: how a pass that closes the epic again (cut after the comment,
# before the move) finds the one it already wrote, among Legion's own comments.
SUMMARY_HEADING = "## Epic done"

# A title is a stranger's words: each is cut to this many characters on its one line.
_TITLE_CHARS = 120


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    """What one child became: its identifier, title, status and pull request (`#3 merged`,
    or "" without one)."""

    identifier: str
    title: str
    status: str
    pr: str = ""


def summary(children: Sequence[ChildOutcome]) -> str:
    """The epic's closing comment: one line per child, in the children's order."""
    lines = [SUMMARY_HEADING, "", f"Its {len(children)} children did its work:", ""]
    for child in children:
        title = " ".join(child.title.split())
        if len(title) > _TITLE_CHARS:
            title = title[: _TITLE_CHARS - 1] + "…"
        pr = f", PR {child.pr}" if child.pr else ""
        # Quoted as code: a title cannot start a heading, a list or a link in Legion's comment.
        quoted = defanged(title).replace("`", "'")
        lines.append(f"- {child.identifier} `{quoted}`: {child.status}{pr}")
    lines += ["", "Nothing is left for the epic itself: it is closed without a plan of its own."]
    return "\n".join(lines)


def already_summed_up(legion_bodies: Iterable[str]) -> bool:
    """Whether one of Legion's own comments (their bodies, marker removed) is the summary."""
    return any(body.startswith(SUMMARY_HEADING) for body in legion_bodies)
