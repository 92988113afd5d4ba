"""The decision table: one issue's observed state in, exactly one action out.

Pure and total. `docs/state-machine.md` shows the same table for people, and a test keeps the two
in agreement. Rules are tried in order; the first that matches decides:

1. Triage, Icebox and Done are left to the controller's judgment, and a Backlog issue nobody
   opted in (`backlog_opt_in_labels`) is left alone: skip. A tracker's Backlog can hold hundreds
   of someday-ideas; each would otherwise cost an architect session.
2. A human answered (`user-feedback-given`): relay the answer into the waiting session.
3. Still waiting for a human (`user-input-needed`): skip.
4. Blocked by an issue that is not Done (`open_blockers`): skip. Nothing starts and nothing
   moves, not even on `worker-done` (a parent whose architect finished waits for its children);
   a live worker is never stopped, it finishes its turn.
5. `worker-done` set by a worker of another mode than the phase's (the issue's latest worker, from
   the registry): not this phase's; clear it and start the phase's worker.
6. A worker finished (`worker-done`): the status-specific transition. In Needs Review an
   approved pull request moves on only once its CI checks pass (failing: the implementer is
   resumed to fix them; pending: wait), and in Retro the finisher, which merges, starts only
   once no check is pending.
7. A live worker: let it work.
8. `worker-active` but no live worker: the worker died; clear the label and dispatch again.
9. Otherwise: dispatch the worker this status calls for.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from legion.core.model import ChecksState, Label, Mode, ReviewOutcome, Status


class Action(Enum):
    SKIP = "skip"
    DISPATCH_ARCHITECT = "dispatch_architect"
    DISPATCH_PLANNER = "dispatch_planner"
    DISPATCH_IMPLEMENTER = "dispatch_implementer"
    DISPATCH_REVIEWER = "dispatch_reviewer"
    DISPATCH_FINISHER = "dispatch_finisher"
    RESUME_IMPLEMENTER_FOR_CHANGES = "resume_implementer_for_changes"
    RESUME_IMPLEMENTER_FOR_CHECKS = "resume_implementer_for_checks"
    RESUME_IMPLEMENTER_FOR_RETRO = "resume_implementer_for_retro"
    RELAY_USER_FEEDBACK = "relay_user_feedback"
    REMOVE_WORKER_ACTIVE_AND_REDISPATCH = "remove_worker_active_and_redispatch"
    REMOVE_STALE_WORKER_DONE = "remove_stale_worker_done"
    INVESTIGATE_NO_PR = "investigate_no_pr"
    TRANSITION_TO_TODO = "transition_to_todo"
    TRANSITION_TO_IN_PROGRESS = "transition_to_in_progress"
    TRANSITION_TO_NEEDS_REVIEW = "transition_to_needs_review"
    TRANSITION_TO_RETRO = "transition_to_retro"

    @property
    def target_status(self) -> Status | None:
        """The status a transition moves the issue to; None for other actions."""
        return _TRANSITION_TARGET.get(self)

    @property
    def is_mechanical(self) -> bool:
        """True when code can carry it out; False when it needs the controller's judgment."""
        return self not in (Action.SKIP, Action.INVESTIGATE_NO_PR)


_TRANSITION_TARGET: dict[Action, Status] = {
    Action.TRANSITION_TO_TODO: Status.TODO,
    Action.TRANSITION_TO_IN_PROGRESS: Status.IN_PROGRESS,
    Action.TRANSITION_TO_NEEDS_REVIEW: Status.NEEDS_REVIEW,
    Action.TRANSITION_TO_RETRO: Status.RETRO,
}

# The worker each phase runs. Retro runs in the implementer's session (it compounds what the
# implementer learned), which `session_mode` below accounts for.
PHASE_MODE: dict[Status, Mode] = {
    Status.BACKLOG: Mode.ARCHITECT,
    Status.TODO: Mode.PLAN,
    Status.IN_PROGRESS: Mode.IMPLEMENT,
    Status.NEEDS_REVIEW: Mode.REVIEW,
    Status.RETRO: Mode.RETRO,
}

# Actions whose worker does not depend on the status they were decided in.
_FIXED_MODE: dict[Action, Mode] = {
    Action.DISPATCH_ARCHITECT: Mode.ARCHITECT,
    Action.DISPATCH_PLANNER: Mode.PLAN,
    Action.DISPATCH_IMPLEMENTER: Mode.IMPLEMENT,
    Action.DISPATCH_REVIEWER: Mode.REVIEW,
    Action.DISPATCH_FINISHER: Mode.FINISH,
    Action.RESUME_IMPLEMENTER_FOR_CHANGES: Mode.IMPLEMENT,
    Action.RESUME_IMPLEMENTER_FOR_CHECKS: Mode.IMPLEMENT,
    Action.RESUME_IMPLEMENTER_FOR_RETRO: Mode.RETRO,
    Action.TRANSITION_TO_TODO: Mode.PLAN,
    Action.TRANSITION_TO_IN_PROGRESS: Mode.IMPLEMENT,
    Action.TRANSITION_TO_NEEDS_REVIEW: Mode.REVIEW,
    Action.TRANSITION_TO_RETRO: Mode.RETRO,
}


def session_mode(mode: Mode) -> Mode:
    """Whose session a mode runs in: retro resumes the implementer."""
    return Mode.IMPLEMENT if mode is Mode.RETRO else mode


def completion_labels(mode: Mode, status: Status) -> tuple[tuple[Label, ...], tuple[Label, ...]]:
    """The labels a worker's `legion complete` adds and removes (the skill's completion
    protocol, kept in one place). `worker-done` is what the table acts on, except where acting
    would be wrong: finish mode moved the issue to Done itself, and an implementer resumed for
    requested changes or failing checks (the issue in Needs Review) hands the PR back by
    stopping alone, since `worker-done` there would re-read the old verdict."""
    changes = session_mode(mode) is Mode.IMPLEMENT and status is Status.NEEDS_REVIEW
    if mode is Mode.FINISH or changes:
        return (), (Label.WORKER_ACTIVE,)
    return (Label.WORKER_DONE,), (Label.WORKER_ACTIVE,)


@dataclass(frozen=True, slots=True)
class Observation:
    """Everything the table looks at for one issue."""

    status: Status
    labels: frozenset[Label] = frozenset()
    has_live_worker: bool = False
    has_pr: bool = False
    pr_review: ReviewOutcome = ReviewOutcome.NONE
    # The mode of the most recently started worker (the registry's, retired or not);
    # None when Legion started none. It says whose `worker-done` the label can be.
    latest_mode: Mode | None = None
    # A person opted the issue in to Legion's Backlog work (one of `backlog_opt_in_labels`);
    # read only in Backlog.
    opted_in: bool = False
    # The issues blocking this one that are not Done (identifiers, in the tracker's order).
    open_blockers: tuple[str, ...] = ()
    # The CI checks on the pull request's head commit (`unknown` when the forge could not be
    # asked); read in Needs Review after an approval and in Retro before the finisher.
    checks: ChecksState = ChecksState.NONE


@dataclass(frozen=True, slots=True)
class Decision:
    """One action, with the worker it starts or resumes (None when it starts none)."""

    action: Action
    mode: Mode | None = None

    @property
    def session_mode(self) -> Mode | None:
        return None if self.mode is None else session_mode(self.mode)

    @property
    def words(self) -> str:
        """The decision for people (`legion state`, the TUI's board), never the action's
        internal name: `re-dispatch implement (worker gone)`, `move to Retro, start retro`."""
        mode = "a worker" if self.mode is None else self.mode.value
        return _WORDS[self.action].format(mode=mode)


# Each action in words (`Decision.words`); `{mode}` is the worker it starts or resumes.
_WORDS: dict[Action, str] = {
    Action.SKIP: "skip",
    Action.DISPATCH_ARCHITECT: "dispatch {mode}",
    Action.DISPATCH_PLANNER: "dispatch {mode}",
    Action.DISPATCH_IMPLEMENTER: "dispatch {mode}",
    Action.DISPATCH_REVIEWER: "dispatch {mode}",
    Action.DISPATCH_FINISHER: "dispatch {mode} (merges the PR)",
    Action.RESUME_IMPLEMENTER_FOR_CHANGES: "resume {mode} (changes requested)",
    Action.RESUME_IMPLEMENTER_FOR_CHECKS: "resume {mode} (checks failing)",
    Action.RESUME_IMPLEMENTER_FOR_RETRO: "resume the implementer for {mode}",
    Action.RELAY_USER_FEEDBACK: "relay the human's answer to {mode}",
    Action.REMOVE_WORKER_ACTIVE_AND_REDISPATCH: "re-dispatch {mode} (worker gone)",
    Action.REMOVE_STALE_WORKER_DONE: "re-dispatch {mode} (stale worker-done cleared)",
    Action.INVESTIGATE_NO_PR: "investigate (review done, no PR found)",
    Action.TRANSITION_TO_TODO: "move to Todo, start {mode}",
    Action.TRANSITION_TO_IN_PROGRESS: "move to In Progress, start {mode}",
    Action.TRANSITION_TO_NEEDS_REVIEW: "move to Needs Review, start {mode}",
    Action.TRANSITION_TO_RETRO: "move to Retro, start {mode}",
}


_SKIP = Decision(Action.SKIP)
_LEFT_TO_JUDGMENT = frozenset({Status.TRIAGE, Status.ICEBOX, Status.DONE})

# The phases in which an issue's pull request is looked up: it is opened in In Progress, its
# review decides Needs Review, and it is merged in Retro. Asking the forge about no other issue
# keeps an observe pass at one forge request per 50 open pull requests, however many issues.
PR_PHASES = frozenset({Status.IN_PROGRESS, Status.NEEDS_REVIEW, Status.RETRO})

_DISPATCH_FOR: dict[Status, Action] = {
    Status.BACKLOG: Action.DISPATCH_ARCHITECT,
    Status.TODO: Action.DISPATCH_PLANNER,
    Status.IN_PROGRESS: Action.DISPATCH_IMPLEMENTER,
    Status.NEEDS_REVIEW: Action.DISPATCH_REVIEWER,
    Status.RETRO: Action.RESUME_IMPLEMENTER_FOR_RETRO,
}

_DONE_TRANSITION: dict[Status, Action] = {
    Status.BACKLOG: Action.TRANSITION_TO_TODO,
    Status.TODO: Action.TRANSITION_TO_IN_PROGRESS,
    Status.IN_PROGRESS: Action.TRANSITION_TO_NEEDS_REVIEW,
    Status.RETRO: Action.DISPATCH_FINISHER,
}


def is_picked_up(status: Status, opted_in: bool) -> bool:
    """Whether Legion works on an issue in this status at all: every active status, Backlog
    only when a person opted the issue in (Triage, Icebox and Done are the controller's)."""
    if status in _LEFT_TO_JUDGMENT:
        return False
    return status is not Status.BACKLOG or opted_in


def _fixed(action: Action) -> Decision:
    return Decision(action, _FIXED_MODE.get(action))


# Checks the table waits on: still running, or not read (never act on a guess).
_CHECKS_TO_WAIT_FOR = frozenset({ChecksState.PENDING, ChecksState.UNKNOWN})


def why_waiting(obs: Observation, decision: Decision) -> str | None:
    """Why the table skips an issue whose worker finished, in a few words for `legion state`
    (`checks pending`), or None when it does not skip or a reason is shown elsewhere."""
    if decision.action is not Action.SKIP or Label.WORKER_DONE not in obs.labels:
        return None
    if not is_picked_up(obs.status, obs.opted_in) or obs.labels & _HUMAN_LABELS:
        return None
    if obs.open_blockers:
        return None  # `blocked by …` says it
    if obs.pr_review is ReviewOutcome.UNKNOWN or obs.checks is ChecksState.UNKNOWN:
        return "forge not read"
    if obs.status is Status.NEEDS_REVIEW and obs.pr_review is ReviewOutcome.NONE:
        return "no verdict on the PR yet"
    if obs.checks is ChecksState.PENDING:
        return "checks pending"
    return None


def _after_review(obs: Observation) -> Decision:
    """Needs Review + worker-done: the reviewer finished; its verdict is on the pull request."""
    if obs.pr_review is ReviewOutcome.UNKNOWN:
        return _SKIP  # the forge did not answer: wait rather than guess
    if not obs.has_pr:
        return _fixed(Action.INVESTIGATE_NO_PR)
    if obs.pr_review is ReviewOutcome.APPROVED:
        if obs.checks is ChecksState.FAILING:
            return _fixed(Action.RESUME_IMPLEMENTER_FOR_CHECKS)
        if obs.checks in _CHECKS_TO_WAIT_FOR:
            return _SKIP  # CI still running (or not read): Retro is for work that passes
        return _fixed(Action.TRANSITION_TO_RETRO)
    if obs.pr_review is ReviewOutcome.CHANGES_REQUESTED:
        return _fixed(Action.RESUME_IMPLEMENTER_FOR_CHANGES)
    return _SKIP  # the verdict may not have reached the forge yet


def decide(obs: Observation) -> Decision:
    """The one action for this observation. Total: every input has exactly one answer."""
    if obs.status in _LEFT_TO_JUDGMENT or not is_picked_up(obs.status, obs.opted_in):
        return _SKIP
    phase_mode = PHASE_MODE[obs.status]
    if Label.USER_FEEDBACK_GIVEN in obs.labels:
        return Decision(Action.RELAY_USER_FEEDBACK, phase_mode)
    if Label.USER_INPUT_NEEDED in obs.labels:
        return _SKIP
    if obs.open_blockers:
        # Waits for its blockers: no worker starts and the status does not move, whoever set
        # `worker-done` (a live worker goes on with its turn: skip stops nothing).
        return _SKIP
    if Label.WORKER_DONE in obs.labels:
        if obs.latest_mode is not None and obs.latest_mode is not phase_mode:
            # Set by a worker of another phase (a finished planner resumed in In Progress):
            # never this phase's completion, whatever it says.
            return Decision(Action.REMOVE_STALE_WORKER_DONE, phase_mode)
        if obs.status is Status.NEEDS_REVIEW:
            return _after_review(obs)
        if obs.status is Status.RETRO and obs.checks in _CHECKS_TO_WAIT_FOR:
            return _SKIP  # the finisher merges only after CI: it starts once checks finish
        return _fixed(_DONE_TRANSITION[obs.status])
    if obs.has_live_worker:
        return _SKIP
    if Label.WORKER_ACTIVE in obs.labels:
        return Decision(Action.REMOVE_WORKER_ACTIVE_AND_REDISPATCH, phase_mode)
    return _fixed(_DISPATCH_FOR[obs.status])


_HUMAN_LABELS = frozenset({Label.USER_INPUT_NEEDED, Label.USER_FEEDBACK_GIVEN})


def due_after_answer(obs: Observation) -> Decision:
    """What a human's answer to a question Legion asked itself (the token budget, a worker
    that keeps dying) lets happen: the decision the table makes once the question's labels are
    gone, so the answer goes to the worker that is due, never to one whose mode is over."""
    return decide(replace(obs, labels=obs.labels - _HUMAN_LABELS))
