"""The reconciler: observe, decide, and carry out every mechanical action, idempotently.

One pass: retire workers that have finished, route workers blocked on a question (to the
controller's Oracle, or straight to a human when no controller can take it), run the decision
table over every issue and execute what it suggests (latest phases first, within the WIP limit,
unless dispatch is paused), sync the judgment queue, and sweep the workspaces of Done issues.

Every state-changing step runs under one guard (`guard.PassGuard.guarded`): a `LegionError` is
recorded as a failed outcome and leaves the issue for the next pass; every step is safe to
repeat, so a pass cut short is finished by the next one, and a lock keeps two passes from
overlapping. What a pass cannot observe (tmux, the tracker) is unknown, and a pass that does
not know does nothing. Every outcome is a typed value, appended to the action log.

Each job in its own module: `passes` (the pass's phases in order, and the `Reconciler` that runs
passes under its lock), `context` (what every phase is handed), `guard` (the guard, the backoff
and the outcomes of a pass), `cleanup` (retiring finished workers, sweeping Done workspaces),
`routing` (questions to the Oracle or a human, the judgment queue), `transitions` (one handler
per action of the table), `starts` (admission: pause, WIP, token budget; the pass's starts),
`labels` (the workflow labels a worker's start and an answer write: their one writer),
`answers` (what a human answered, and Legion's own questions) and `outcomes`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from legion.reconcile.answers import BUDGET_HEADING, budget_allowed, human_answer, legion_asked
    from legion.reconcile.labels import answer_worker, resume_worker, start_worker, worker_active
    from legion.reconcile.outcomes import Outcome
    from legion.reconcile.passes import Reconciler
    from legion.reconcile.starts import START_FAILURES

# Where each public name lives, imported on first use: a command that reads one module of the
# reconciler (`legion issue list` renders with `reconcile.observe`) does not load the whole
# of it, and the workers and sessions it stands on, at every start.
_HOMES = {
    "BUDGET_HEADING": "answers",
    "budget_allowed": "answers",
    "human_answer": "answers",
    "legion_asked": "answers",
    "answer_worker": "labels",
    "resume_worker": "labels",
    "start_worker": "labels",
    "worker_active": "labels",
    "Outcome": "outcomes",
    "Reconciler": "passes",
    "START_FAILURES": "starts",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


__all__ = [
    "BUDGET_HEADING",
    "START_FAILURES",
    "Outcome",
    "Reconciler",
    "answer_worker",
    "budget_allowed",
    "human_answer",
    "legion_asked",
    "resume_worker",
    "start_worker",
    "worker_active",
]
