"""What the TUI's board shows, computed from its issues (`legion.tui.sources.BoardIssue`):
the issues by phase in aligned columns, and what `d` on the highlighted one would start. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from rich.text import Text

from legion.core.decide import Action, Decision
from legion.core.model import Mode, Status
from legion.core.text import for_display


class BoardLine(Protocol):
    """An issue on the board (`legion.tui.sources.BoardIssue`)."""

    @property
    def phase(self) -> Status: ...
    @property
    def identifier(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def worker(self) -> str: ...
    @property
    def review(self) -> str: ...
    @property
    def action(self) -> Action: ...
    @property
    def mode(self) -> Mode | None: ...
    @property
    def live(self) -> bool: ...


CURSOR_STYLE = "reverse"  # the board's highlighted issue (also marked with ">")


def board_text(issues: Sequence[BoardLine], cursor: int | None = None) -> Text:
    """The issues under a heading per phase (in the order given), in aligned columns: the
    issue, its worker, its pull request's review, and its title last, where a narrow
    screen cuts it. `cursor`: the index of the highlighted issue (a `>` before it, in
    reverse video)."""
    if not issues:
        return Text('No issues yet: `legion issue create "Title"` adds one.')
    shown_ids = [for_display(i.identifier) for i in issues]
    widths = [max(len(i) for i in shown_ids), max(len(i.worker) for i in issues)]
    review_width = max(len(for_display(i.review)) for i in issues)
    lines: list[Text] = []
    previous: Status | None = None
    for index, issue in enumerate(issues):
        if issue.phase != previous:
            count = sum(1 for other in issues if other.phase == issue.phase)
            lines.append(Text(f"{issue.phase.value} ({count})", style="bold"))
            previous = issue.phase
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append("> " if index == cursor else "  ", style="bold")
        line.append(f"{shown_ids[index]:<{widths[0]}}  ", style="bold")
        line.append(f"{issue.worker:<{widths[1]}}  ", style="dim" if issue.worker == "-" else "")
        line.append(f"{for_display(issue.review):<{review_width}}  ")
        line.append(for_display(issue.title))
        if index == cursor:
            line.stylize(CURSOR_STYLE)
        lines.append(line)
    return Text("\n", no_wrap=True, overflow="ellipsis").join(lines)


def board_line_issues(issues: Sequence[BoardLine]) -> list[int | None]:
    """For each line `board_text` shows, the index of its issue (None: a phase's heading)."""
    found: list[int | None] = []
    previous: Status | None = None
    for index, issue in enumerate(issues):
        if issue.phase != previous:
            found.append(None)
            previous = issue.phase
        found.append(index)
    return found


# The suggestions the daemon carries out as a plain start of the suggested mode's worker
# (`legion.reconcile`'s `dispatch`), which is what `legion dispatch ISSUE MODE` does. The
# others do more than start a worker (clear labels, move the issue, resume a session with a
# prompt of their own), so they are left to the daemon.
DISPATCHABLE: frozenset[Action] = frozenset(
    {
        Action.DISPATCH_ARCHITECT,
        Action.DISPATCH_PLANNER,
        Action.DISPATCH_IMPLEMENTER,
        Action.DISPATCH_REVIEWER,
        Action.RESUME_IMPLEMENTER_FOR_RETRO,
    }
)


@dataclass(frozen=True, slots=True)
class DispatchChoice:
    """What `d` on the board starts: `legion dispatch IDENTIFIER MODE`."""

    identifier: str
    mode: Mode


def dispatch_choice(issue: BoardLine) -> DispatchChoice | str:
    """The worker `d` starts for `issue`: the mode the decision table suggests, when the
    suggestion is to start one and the issue has no live worker; else why not, in a line."""
    name = issue.identifier
    if issue.live:
        return f"{name} has a live worker ({issue.worker}): nothing to dispatch"
    if issue.worker == "unknown":
        return f"{name}: tmux did not answer, so whether it has a worker is unknown"
    if issue.action is Action.SKIP:
        return f"nothing to dispatch for {name} in {issue.phase.value} now (the table says skip)"
    if issue.action not in DISPATCHABLE or issue.mode is None:
        return f"{name}: the next step is {next_step(issue)}, not a dispatch (the daemon's)"
    return DispatchChoice(name, issue.mode)


def next_step(issue: BoardLine) -> str:
    """What the decision table suggests for `issue`, in words (`Decision.words`, as
    `legion state` says it), never the action's internal name."""
    return Decision(issue.action, issue.mode).words


def dispatch_hint(issue: BoardLine) -> str:
    """The board's line about its highlighted issue: what `d` would do."""
    choice = dispatch_choice(issue)
    if isinstance(choice, str):
        return choice
    hint = f"{choice.identifier}: d dispatches {choice.mode.value}"
    words = next_step(issue)
    return hint if words == f"dispatch {choice.mode.value}" else f"{hint} ({words})"
