"""The decision table: one issue's observed state in, exactly one action out.

Pure and total. `docs/state-machine.md` shows the same table for people, and a test keeps the two
in agreement. Rules are tried in order; the first that matches decides (`explain` says which
row of the documented table that is; the action log keeps it with the observation):

1. Triage, Icebox and Done are left to the controller's judgment, and a Backlog issue nobody
   opted in (`backlog_opt_in_labels`) is left alone: skip. A tracker's Backlog can hold hundreds
   of someday-ideas; each would otherwise cost an architect session.
2. A human answered (`user-feedback-given`): relay the answer into the waiting session.
3. Still waiting for a human (`user-input-needed`): skip.
4. Blocked by an issue that is not Done (`open_blockers`): skip. Nothing starts and nothing
   moves, not even on `worker-done`; a live worker is never stopped, it finishes its turn.
5. `worker-done` set by a worker of another mode than the phase's (the issue's latest worker, from
   the registry): not this phase's; clear it and start the phase's worker.
6. An epic: a Backlog issue whose architect finished (`worker-done`) and which has children.
   Its children do its work: it waits until every child is Done, then closes with a summary of
   them (never planned or implemented a second time).
7. A worker finished (`worker-done`): the status-specific transition. In Needs Review an
   approved pull request moves on only once its CI checks pass (failing: the implementer is
   resumed to fix them; pending: wait), and in Retro the finisher, which merges, starts only
   once the checks pass (pending: wait; failing: the issue goes back to Needs Review and the
   implementer is resumed to fix them).
8. A live worker: let it work.
9. `worker-active` but no live worker: the worker died; clear the label and dispatch again.
10. Otherwise: dispatch the worker this status calls for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

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
    CLOSE_EPIC = "close_epic"

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
    # The children (the tracker's parent/child relation: an architect's split) and
    # those of them not Done; read only in Backlog, where they make the issue an epic.
    children: tuple[str, ...] = ()
    open_children: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """What the action log keeps of it, to explain and replay the decision: at most
        `KEPT_IDENTIFIERS` of each list (the table reads only whether each is empty; a body
        may name thousands of blockers, and an entry too large would never be read back)."""
        kept = KEPT_IDENTIFIERS
        return {
            "status": self.status.value,
            "labels": sorted(label.value for label in self.labels),
            "live_worker": self.has_live_worker,
            "pr": self.has_pr,
            "review": self.pr_review.value,
            "checks": self.checks.value,
            "latest_mode": None if self.latest_mode is None else self.latest_mode.value,
            "opted_in": self.opted_in,
            "open_blockers": list(self.open_blockers[:kept]),
            "children": list(self.children[:kept]),
            "open_children": list(self.open_children[:kept]),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Observation:
        """An observation the action log kept; ValueError when it is not one (a value this
        version does not know, a field missing or of another type)."""
        try:
            latest = data["latest_mode"]
            flags = (data["live_worker"], data["pr"], data["opted_in"])
            if not all(isinstance(flag, bool) for flag in flags):
                raise ValueError("a flag that is not true or false")
            # Children were first kept a version later: an older entry has none.
            blockers, children, open_children = (
                _identifiers(data, "open_blockers", required=True),
                _identifiers(data, "children"),
                _identifiers(data, "open_children"),
            )
            return cls(
                status=Status(data["status"]),
                labels=frozenset(Label(name) for name in data["labels"]),
                has_live_worker=flags[0],
                has_pr=flags[1],
                pr_review=ReviewOutcome(data["review"]),
                latest_mode=None if latest is None else Mode(latest),
                opted_in=flags[2],
                open_blockers=blockers,
                checks=ChecksState(data["checks"]),
                children=children,
                open_children=open_children,
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not an observation: {exc}") from None


# How many of an observation's blockers and children a decision keeps (`Observation.to_json`).
KEPT_IDENTIFIERS = 20


def _identifiers(data: Mapping[str, Any], key: str, *, required: bool = False) -> tuple[str, ...]:
    """A kept list of issue identifiers; ValueError when it is something else."""
    if key not in data and not required:
        return ()
    found = data[key]
    if not isinstance(found, list) or not all(isinstance(item, str) for item in found):
        raise ValueError(f"{key} is not a list of identifiers")
    return tuple(found)


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
    Action.CLOSE_EPIC: "close the epic (its children are Done)",
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


@dataclass(frozen=True, slots=True)
class Verdict:
    """The table's answer with the row that gave it: the number of the row in
    `docs/state-machine.md`'s table (`tests/unit/test_state_machine_doc.py` holds the two
    together), which the action log keeps so a decision can be explained and replayed."""

    decision: Decision
    row: int

    @property
    def why(self) -> str:
        """The row in a person's words: `a live worker is working (row 21)`."""
        words = ROW_WORDS.get(self.row, "a row this version of the table does not have")
        return f"{words} (row {self.row})"


# Each row of the table in words (`Verdict.why`, `legion why`, the web view's timeline).
ROW_WORDS: dict[int, str] = {
    1: "Triage, Icebox, Done, or Backlog not opted in: not Legion's to work on",
    2: "a person answered (user-feedback-given): their answer goes to the worker",
    3: "waits for a person's answer (user-input-needed)",
    4: "waits for the issues blocking it",
    5: "worker-done was set by a worker of another mode: not this phase's",
    6: "an epic whose children are all Done: it closes with a summary of them",
    7: "an epic: its architect split it; it waits for its children to be Done",
    8: "the architect finished (worker-done): on to Todo",
    9: "the planner finished (worker-done): on to In Progress",
    10: "the implementer finished (worker-done): on to Needs Review",
    11: "the reviewer finished, but the forge could not be read",
    12: "the reviewer finished, but the issue has no pull request",
    13: "approved, but the checks fail: the implementer fixes them",
    14: "approved; the checks are pending or could not be read",
    15: "approved, and the checks pass (or there are none): on to Retro",
    16: "the reviewer requested changes: the implementer makes them",
    17: "the reviewer finished, but no verdict is on the pull request yet",
    18: "the retro is done; the finisher waits for pending checks",
    19: "the retro is done, but the checks fail: back to review once the implementer fixes them",
    20: "the retro is done and the checks pass (or there are none): the finisher merges",
    21: "a live worker is working",
    22: "worker-active, but no live worker: the worker died",
    23: "no worker has finished in Backlog: the architect starts",
    24: "no worker has finished in Todo: the planner starts",
    25: "no worker has finished in In Progress: the implementer starts",
    26: "no worker has finished in Needs Review: the reviewer starts",
    27: "no worker has finished in Retro: the implementer's retro starts",
}

# The rows that dispatch (23-27) and move on a finished worker (8-10, and 20 in Retro), by
# status.
_DISPATCH_ROW: dict[Status, int] = {
    Status.BACKLOG: 23,
    Status.TODO: 24,
    Status.IN_PROGRESS: 25,
    Status.NEEDS_REVIEW: 26,
    Status.RETRO: 27,
}
_DONE_ROW: dict[Status, int] = {
    Status.BACKLOG: 8,
    Status.TODO: 9,
    Status.IN_PROGRESS: 10,
    Status.RETRO: 20,
}


def _after_review(obs: Observation) -> Verdict:
    """Needs Review + worker-done: the reviewer finished; its verdict is on the pull request."""
    if obs.pr_review is ReviewOutcome.UNKNOWN:
        return Verdict(_SKIP, 11)  # the forge did not answer: wait rather than guess
    if not obs.has_pr:
        return Verdict(_fixed(Action.INVESTIGATE_NO_PR), 12)
    if obs.pr_review is ReviewOutcome.APPROVED:
        if obs.checks is ChecksState.FAILING:
            return Verdict(_fixed(Action.RESUME_IMPLEMENTER_FOR_CHECKS), 13)
        if obs.checks in _CHECKS_TO_WAIT_FOR:
            # CI still running (or not read): Retro is for work that passes
            return Verdict(_SKIP, 14)
        return Verdict(_fixed(Action.TRANSITION_TO_RETRO), 15)
    if obs.pr_review is ReviewOutcome.CHANGES_REQUESTED:
        return Verdict(_fixed(Action.RESUME_IMPLEMENTER_FOR_CHANGES), 16)
    return Verdict(_SKIP, 17)  # the verdict may not have reached the forge yet


def explain(obs: Observation) -> Verdict:
    """The one action for this observation, with the row that chose it. Total: every input
    has exactly one answer."""
    if obs.status in _LEFT_TO_JUDGMENT or not is_picked_up(obs.status, obs.opted_in):
        return Verdict(_SKIP, 1)
    phase_mode = PHASE_MODE[obs.status]
    if Label.USER_FEEDBACK_GIVEN in obs.labels:
        return Verdict(Decision(Action.RELAY_USER_FEEDBACK, phase_mode), 2)
    if Label.USER_INPUT_NEEDED in obs.labels:
        return Verdict(_SKIP, 3)
    if obs.open_blockers:
        # Waits for its blockers: no worker starts and the status does not move, whoever set
        # `worker-done` (a live worker goes on with its turn: skip stops nothing).
        return Verdict(_SKIP, 4)
    if Label.WORKER_DONE in obs.labels:
        if obs.latest_mode is not None and obs.latest_mode is not phase_mode:
            # Set by a worker of another phase (a finished planner resumed in In Progress):
            # never this phase's completion, whatever it says.
            return Verdict(Decision(Action.REMOVE_STALE_WORKER_DONE, phase_mode), 5)
        if obs.status is Status.BACKLOG and obs.children:
            # An epic: its architect split it, and its children do the work. It is never
            # planned or implemented itself; it closes once they are all Done.
            if obs.open_children:
                return Verdict(_SKIP, 7)
            return Verdict(_fixed(Action.CLOSE_EPIC), 6)
        if obs.status is Status.NEEDS_REVIEW:
            return _after_review(obs)
        if obs.status is Status.RETRO and obs.checks in _CHECKS_TO_WAIT_FOR:
            # the finisher merges only after CI: it starts once checks finish
            return Verdict(_SKIP, 18)
        if obs.status is Status.RETRO and obs.checks is ChecksState.FAILING:
            # A red change never reaches the finisher: the implementer fixes it, back in Needs
            # Review, where the fix is reviewed (the approval saw another head).
            return Verdict(_fixed(Action.RESUME_IMPLEMENTER_FOR_CHECKS), 19)
        return Verdict(_fixed(_DONE_TRANSITION[obs.status]), _DONE_ROW[obs.status])
    if obs.has_live_worker:
        return Verdict(_SKIP, 21)
    if Label.WORKER_ACTIVE in obs.labels:
        return Verdict(Decision(Action.REMOVE_WORKER_ACTIVE_AND_REDISPATCH, phase_mode), 22)
    return Verdict(_fixed(_DISPATCH_FOR[obs.status]), _DISPATCH_ROW[obs.status])


def decide(obs: Observation) -> Decision:
    """The one action for this observation (`explain` says which row chose it)."""
    return explain(obs).decision


_HUMAN_LABELS = frozenset({Label.USER_INPUT_NEEDED, Label.USER_FEEDBACK_GIVEN})


def due_after_answer(obs: Observation) -> Decision:
    """What a human's answer to a question Legion asked itself (the token budget, a worker
    that keeps dying) lets happen: the decision the table makes once the question's labels are
    gone, so the answer goes to the worker that is due, never to one whose mode is over."""
    return decide(replace(obs, labels=obs.labels - _HUMAN_LABELS))
