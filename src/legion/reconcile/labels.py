"""The workflow labels a worker's start and an answer write, with one writer: the reconciler's.

The session layer writes no labels: whoever starts, resumes or answers a worker (a pass,
`legion dispatch`/`resume`/`answer`, the TUI, a watcher resuming a session with its messages)
goes through these, so `worker-active` and the answer's labels have one writer.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial

from legion.core import roles
from legion.core.model import Label, Mode
from legion.diagnostics.faults import fault_point
from legion.errors import NotPermittedError
from legion.sessions.roster import WorkerView
from legion.sessions.workers import WorkerManager
from legion.trackers.base import Tracker


@contextmanager
def worker_active(tracker: Tracker, issue: str) -> Iterator[None]:
    """`worker-active` goes on before the session starts (a fast worker may clear it in its
    first turn), and comes off again if the start fails."""
    tracker.update_labels(issue, add=[Label.WORKER_ACTIVE.value])
    fault_point("after_worker_active")
    try:
        yield
    except BaseException:
        tracker.update_labels(issue, remove=[Label.WORKER_ACTIVE.value])
        raise


def start_worker(
    workers: WorkerManager,
    tracker: Tracker,
    issue: str,
    mode: Mode,
    *,
    wait: bool = True,
    asked: bool = False,
) -> WorkerView:
    """Start `mode`'s worker on `issue` (`WorkerManager.dispatch`), marked `worker-active`.
    `asked`: a person asked (a failed workspace setup is tried again at once)."""
    return workers.dispatch(
        issue, mode, wait=wait, marked=partial(worker_active, tracker), asked=asked
    )


def resume_worker(
    workers: WorkerManager,
    tracker: Tracker,
    issue: str,
    mode: Mode,
    prompt: str,
    *,
    wait: bool = True,
    who: str = roles.LEGION,
) -> WorkerView:
    """Give `mode`'s session on `issue` a prompt (`WorkerManager.resume`, which starts it
    again when it does not run), marked `worker-active`. `who` asks (`legion.core.roles`): the
    controller only the worker its issue's phase runs, and none whose question a person owns
    (its prompt would answer it), refused before anything starts or is typed."""
    if who != roles.LEGION:
        found = tracker.get_issue(issue)
        refusal = roles.dispatch_refusal(who, found.status, mode, force=False) or (
            roles.answer_refusal(who, frozenset(found.labels))
        )
        if refusal is not None:
            raise NotPermittedError(refusal)
    return workers.resume(issue, mode, prompt, wait=wait, marked=partial(worker_active, tracker))


def answer_worker(
    workers: WorkerManager,
    tracker: Tracker,
    issue: str,
    answers: Sequence[str],
    *,
    who: str = roles.LEGION,
) -> WorkerView:
    """Answer a blocked worker's question (`WorkerManager.answer`); once it has taken the
    answer, the issue no longer waits for a human. `who` answers (`legion.core.roles`): the
    controller may not answer what a person owns, and is refused before anything is typed."""
    if who != roles.LEGION:  # (Legion's own pass relays a person's answer: no read more)
        refusal = roles.answer_refusal(who, frozenset(tracker.get_issue(issue).labels))
        if refusal is not None:
            raise NotPermittedError(refusal)
    view = workers.answer(issue, answers)
    # Only the labels on it come off: the controller may not take a person's off (the relay
    # refuses it, `roles.label_refusal`), so asking to take off what is not there made its
    # Oracle's `legion answer` fail after the answer was typed, and a chain of answers stop.
    waiting = {Label.USER_INPUT_NEEDED.value, Label.USER_FEEDBACK_GIVEN.value}
    on_it = sorted(waiting & set(tracker.get_issue(view.record.issue).labels))
    if on_it:
        tracker.update_labels(view.record.issue, remove=on_it)
    return view
