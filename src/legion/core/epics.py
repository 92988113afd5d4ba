"""Epics: whose children make one, and the comment that sums them up when the last is Done.
Pure.

An epic is a Backlog issue its architect split into children: the issues Legion created with
`--parent` at its architect's or a person's asking (`trackers.splits` keeps the record, so a
`Parent: #N` line a stranger wrote on GitHub, or a child the controller filed, makes no epic;
and the record is whole where a tracker lists only a page of children). Its children do its
work, each through plan, implement, review, retro and finish; the epic itself is never planned
or implemented (`core.decide`, rows 6 and 7). When every child is Done it closes, Done, with
one comment that says what each child became."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from legion.core.marks import LEGION_AUTHOR, quoted_span

# The first line of the summary: how a pass that closes the epic again (cut after the comment,
# before the move) finds the one it already wrote, among Legion's own comments.
SUMMARY_HEADING = "## Epic done"

# Whose children make an epic: a person's, or the epic's own architect's (a session's capability
# keeps it to children of its own issue). Not the controller's: it files and routes issues, but
# a child it filed under an issue must not close that issue unworked.
_SPLITTER_MODES = ("architect",)


def splits_an_epic(author: str) -> bool:
    """Whether a child created by `author` (`ada`, `legion-architect`, `legion-controller`,
    as the action log names them) counts towards its parent's epic."""
    if author == LEGION_AUTHOR:
        return False  # Legion's own passes file no children
    if not author.startswith("legion-"):
        return True  # a person, with their own commands
    return author.removeprefix("legion-") in _SPLITTER_MODES


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
        pr = f", PR {child.pr}" if child.pr else ""
        title = f" {quoted_span(child.title, _TITLE_CHARS)}" if child.title else ""
        lines.append(f"- {child.identifier}{title}: {child.status}{pr}")
    lines += ["", "Nothing is left for the epic itself: it is closed without a plan of its own."]
    return "\n".join(lines)


def already_summed_up(legion_bodies: Iterable[str]) -> bool:
    """Whether one of Legion's own comments (their bodies, marker removed) is the summary."""
    return any(body.startswith(SUMMARY_HEADING) for body in legion_bodies)
