"""Which issues Legion works on: every active status, and Backlog only when a person opted the
issue in with a label (`backlog_opt_in_labels`). Pure; `decide` applies the rule per issue, and
`legion init` / `legion doctor` say in one line what it means for a tracker's issues."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from legion.core.decide import PHASE_MODE, is_picked_up
from legion.core.model import Status

# A label a person adds to a Backlog issue for Legion's architect to take it.
DEFAULT_BACKLOG_OPT_IN: tuple[str, ...] = ("legion", "epic")
# In `backlog_opt_in_labels`: every Backlog issue is opted in (a tracker only Legion uses).
EVERY_ISSUE = "*"


def opted_in(labels: Iterable[str], opt_in: Iterable[str]) -> bool:
    """Whether the issue carries one of the opt-in labels (case-insensitive, as trackers match)."""
    wanted = {name.strip().lower() for name in opt_in}
    if EVERY_ISSUE in wanted:
        return True
    return any(label.strip().lower() in wanted for label in labels)


def _count(n: int, what: str) -> str:
    return f"{n} {what} issue{'' if n == 1 else 's'}"


def _either(names: Sequence[str]) -> str:
    quoted = [f"`{name}`" for name in names]
    if len(quoted) <= 1:
        return "".join(quoted)
    return f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def pickup_summary(issues: Iterable[tuple[Status, frozenset[str]]], opt_in: Sequence[str]) -> str:
    """One line: what Legion will work on among these (status, labels) issues, and what it
    leaves alone, e.g. "Legion will work on: 1 Backlog issue labelled `legion`, 3 Todo issues;
    left alone: 41 Backlog issues without `legion` or `epic`, 2 Icebox issues"."""
    work: Counter[Status] = Counter()
    unlabelled = 0
    left: Counter[Status] = Counter()
    for status, labels in issues:
        chosen = opted_in(labels, opt_in)
        if is_picked_up(status, chosen):
            work[status] += 1
        elif status is Status.BACKLOG:
            unlabelled += 1
        elif status is not Status.DONE:
            left[status] += 1
    parts = []
    for status in Status:
        if work[status]:
            labelled = status is Status.BACKLOG and EVERY_ISSUE not in opt_in
            suffix = f" labelled {_either(opt_in)}" if labelled else ""
            parts.append(_count(work[status], status.value) + suffix)
    line = f"Legion will work on: {', '.join(parts) if parts else 'nothing yet'}"
    alone = []
    if unlabelled:
        label = f"without {_either(opt_in)}" if opt_in else "(no opt-in label is set)"
        alone.append(f"{_count(unlabelled, 'Backlog')} {label}")
    alone += [_count(left[status], status.value) for status in (Status.ICEBOX,) if left[status]]
    if alone:
        line += f"; left alone: {', '.join(alone)}"
    if left[Status.TRIAGE]:
        line += f"; for the controller to triage: {_count(left[Status.TRIAGE], 'Triage')}"
    return line


def issue_pickup(
    identifier: str,
    status: Status,
    labels: Iterable[str],
    opt_in: Sequence[str],
    daemon_mode: str | None,
    waits_for: Sequence[str] = (),
) -> str:
    """One line: when Legion picks up this one issue (`legion issue create` says it).
    `daemon_mode`: the running daemon's controller mode, None when none runs; `waits_for`: the
    issue's blockers that are not Done."""
    where = f"{identifier} is in {status.value}"
    if status is Status.BACKLOG and not opted_in(labels, opt_in):
        if opt_in:
            return f"{where}: Legion leaves it alone until it is labelled {_either(opt_in)}"
        return f"{where}: Legion leaves it alone until it moves to Todo"
    if status is Status.TRIAGE:
        return f"{where}: left for the controller to triage; no worker starts on it"
    if not is_picked_up(status, opted_in(labels, opt_in)):
        return f"{where}: Legion leaves it alone"
    after = ""
    if waits_for:
        after = f" once {', '.join(waits_for)} {'is' if len(waits_for) == 1 else 'are'} Done"
    if daemon_mode is None:
        return f"{where}: no daemon runs; `legion start` works on it{after}"
    if daemon_mode == "manual":
        mode = PHASE_MODE[status].value
        return (
            f"{where}: the daemon runs in manual mode; "
            f"`legion dispatch {identifier} {mode}` starts its worker{after}"
        )
    return f"{where}: the running daemon picks it up{after or ' at its next tick'}"
