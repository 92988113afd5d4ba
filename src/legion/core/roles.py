"""What each session may do: the roles, one table per kind of write. Pure.

A worker's capability already keeps it to its issue (`legion.relay.server`); within it, the
mode decides. Of its pull request: the implementer opens it, only a review session records a
review, only a finish session marks it ready and merges it. Of its issue: only the finisher
moves it (to Done, or back to Needs Review), every other phase's next status is Legion's to set
(`legion.core.decide`); a worker says it finished (`worker-done`) or asks a human
(`user-input-needed`), and never says a human answered. Issues: the architect files its
issue's children, the retro its follow-ups in Triage, a handful each, with none of Legion's
workflow labels. So a worker steered by what it read cannot approve or merge its own work, skip
a phase, speak for a person or spread work. The controller (a project's capability) routes
issues (Triage, Icebox, Backlog, Todo, In Progress), never closes one nor moves one into a
worker's phase, takes `user-input-needed` off only once a person answered, and may open a pull
request and mark it ready, but neither reviews nor merges: a worker's @-mention asking it to
is text, not a review. A person acts through their own commands, outside any session.
"""

from __future__ import annotations

from dataclasses import dataclass

from legion.core.model import Label, Mode, Status

# The forge's write operations, each with the modes that may make it on their issue's PR.
PR_ROLES: dict[str, frozenset[Mode]] = {
    "create_pr": frozenset({Mode.IMPLEMENT}),
    "set_draft": frozenset({Mode.FINISH}),
    "add_review": frozenset({Mode.REVIEW}),
    "merge": frozenset({Mode.FINISH}),
}
# What each operation is, for a refusal's one line.
_DOING = {
    "create_pr": "open a pull request",
    "set_draft": "mark a pull request draft or ready",
    "add_review": "record a review",
    "merge": "merge a pull request",
}


# What the controller may do to a pull request (a person does the rest).
CONTROLLER_PR_CALLS = frozenset({"create_pr", "set_draft"})


def refusal(mode: str, operation: str) -> str | None:
    """Why a worker in `mode` may not make `operation` (None: it may). An unknown mode may
    make none of them."""
    allowed = PR_ROLES.get(operation)
    if allowed is None:
        return None
    if any(mode == role.value for role in allowed):
        return None
    who = " or ".join(_a(role.value) for role in sorted(allowed, key=lambda m: m.value))
    return f"{_a(mode or 'worker')} session may not {_DOING[operation]}: only {who} session may"


def _a(word: str) -> str:
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def controller_refusal(operation: str) -> str | None:
    """Why the controller may not make `operation` (None: it may)."""
    if operation not in PR_ROLES or operation in CONTROLLER_PR_CALLS:
        return None
    return (
        f"the controller may not {_DOING[operation]}: a review session reviews and a finish "
        "session merges (or a person, with their own `legion`)"
    )


# Who a project's capability is, in the tables below: the controller's session; or Legion's own
# pass (`legion reconcile`, a start: the decision table's moves, which the controller may ask
# for, run by the daemon, but not steer), whose writes the tables do not bound.
CONTROLLER = "controller"
LEGION = "legion"
_WORKERS = tuple(mode.value for mode in Mode)

# The statuses each may set: a worker on its own issue, the controller on any.
STATUS_ROLES: dict[str, frozenset[Status]] = {
    Mode.FINISH.value: frozenset({Status.DONE, Status.NEEDS_REVIEW}),
    CONTROLLER: frozenset(
        {Status.TRIAGE, Status.ICEBOX, Status.BACKLOG, Status.TODO, Status.IN_PROGRESS}
    ),
}

# The workflow labels each may put on (a worker: on its own issue) and take off. Any other
# label (the project's own) is anyone's.
_WORKER_LABELS = (
    frozenset({Label.WORKER_DONE, Label.USER_INPUT_NEEDED}),
    frozenset({Label.WORKER_ACTIVE, Label.WORKER_DONE}),
)
LABEL_ROLES: dict[str, tuple[frozenset[Label], frozenset[Label]]] = {
    **{worker: _WORKER_LABELS for worker in _WORKERS},
    CONTROLLER: (
        frozenset({Label.USER_INPUT_NEEDED}),
        frozenset(
            {
                Label.WORKER_ACTIVE,
                Label.WORKER_DONE,
                Label.USER_INPUT_NEEDED,
                Label.USER_FEEDBACK_GIVEN,
            }
        ),
    ),
}


@dataclass(frozen=True)
class Creation:
    """What issues one may create: under which parent (`own`: its own issue; `none`; `any`),
    in which statuses, how many in a session, and whether with labels (never a workflow one)."""

    parent: str
    statuses: frozenset[Status]
    at_most: int
    labels: bool = False


CREATION_ROLES: dict[str, Creation] = {
    Mode.ARCHITECT.value: Creation("own", frozenset({Status.BACKLOG, Status.TODO}), 20),
    Mode.RETRO.value: Creation("none", frozenset({Status.TRIAGE}), 5),
    CONTROLLER: Creation(
        "any", frozenset({Status.TRIAGE, Status.ICEBOX, Status.BACKLOG, Status.TODO}), 50, True
    ),
}


def _who(who: str) -> str:
    return "the controller" if who == CONTROLLER else f"{_a(who or 'worker')} session"


def status_refusal(who: str, status: Status, current: Status | None = None) -> str | None:
    """Why `who` (a worker mode, on its own issue; or `CONTROLLER`) may not set `status` on an
    issue now in `current` (None: not read). A Done issue was merged and finished: taking it up
    again (and spending on it) is a person's call, never one an issue's text steers."""
    if who == LEGION:
        return None
    if current is Status.DONE and status is not Status.DONE:
        return (
            f"{_who(who)} may not reopen a Done issue: a person does (`legion issue reopen`), "
            "or files a new one"
        )
    allowed = STATUS_ROLES.get(who, frozenset())
    if status in allowed:
        return None
    if not allowed:
        return (
            f"{_who(who)} may not move an issue: Legion moves it on when it sees "
            "`worker-done` (or ask a human)"
        )
    shown = ", ".join(sorted(s.value for s in allowed))
    return f"{_who(who)} may not move an issue to {status.value} (only to: {shown})"


# Where a person's answer is the controller's to act on (no worker waits there): only there does
# it take `user-feedback-given` off. Elsewhere Legion relays the answer to the worker, and a
# controller that took the label off first could answer in the person's place.
CONTROLLER_ANSWERS = frozenset({Status.TRIAGE, Status.ICEBOX, Status.DONE})


def label_refusal(
    who: str,
    add: frozenset[str],
    remove: frozenset[str],
    current: frozenset[str],
    status: Status | None = None,
) -> str | None:
    """Why `who` may not put `add` on and take `remove` off an issue that carries `current`,
    in `status` (None: not known, as for a worker, whose own issue it is)."""
    if who == LEGION:
        return None
    adds, removes = LABEL_ROLES.get(who, (frozenset(), frozenset()))
    for names, allowed, doing in ((add, adds, "add"), (remove, removes, "remove")):
        for name in sorted(names):
            label = Label.from_name(name)
            if label is not None and label not in allowed:
                return f"{_who(who)} may not {doing} `{label.value}`{_LABEL_WHY.get(label, '')}"
    waiting = Label.USER_INPUT_NEEDED.value
    answered = Label.USER_FEEDBACK_GIVEN.value
    taken_off = {Label.from_name(name) for name in remove}
    if who == CONTROLLER and Label.USER_INPUT_NEEDED in taken_off and answered not in current:
        return f"the controller may not take `{waiting}` off before a person answered"
    if (
        who == CONTROLLER
        and Label.USER_FEEDBACK_GIVEN in taken_off
        and status not in CONTROLLER_ANSWERS
    ):
        return (
            f"the controller may not take `{answered}` off an issue "
            f"{'of unknown status' if status is None else 'in ' + status.value}: Legion relays "
            "that answer to its worker (only on Triage, Icebox and Done issues is it yours)"
        )
    return None


_LABEL_WHY = {
    Label.USER_FEEDBACK_GIVEN: ": only a person says they answered",
    Label.WORKER_ACTIVE: ": Legion puts it on when it starts a worker",
}


def creation_refusal(
    who: str,
    *,
    parent: str | None,
    own: str | None,
    status: Status,
    labels: frozenset[str],
    created: int,
) -> str | None:
    """Why `who` (whose own issue is `own`) may not create an issue in `status` under
    `parent` with `labels`, having created `created` already in this session."""
    if who == LEGION:
        return None
    rule = CREATION_ROLES.get(who)
    if rule is None:
        return (
            f"{_who(who)} may not create issues: the architect files its issue's children, "
            "the retro its follow-ups in Triage"
        )
    if rule.parent == "own" and (parent is None or own is None or parent.upper() != own.upper()):
        return f"{_who(who)} may create only children of {own} (--parent {own})"
    if rule.parent == "none" and parent is not None:
        return f"{_who(who)} may create only issues of their own, in Triage (no --parent)"
    if status not in rule.statuses:
        shown = ", ".join(sorted(s.value for s in rule.statuses))
        return f"{_who(who)} may create issues only in {shown}"
    workflow = sorted(name for name in labels if Label.from_name(name) is not None)
    if workflow:
        return f"no session may create an issue with `{workflow[0]}`: Legion's to set"
    if labels and not rule.labels:
        return f"{_who(who)} may not label the issues it creates"
    if created >= rule.at_most:
        return f"{_who(who)} created {created} issues already: at most {rule.at_most} a session"
    return None


# The workers the controller may start on an issue in each status: the ones its phase runs (what
# the decision table would start there: the retro's finisher in Retro, the implementer again in
# Needs Review for the changes asked), never a later phase's. A person starts any.
DISPATCH_ROLES: dict[Status, frozenset[Mode]] = {
    Status.BACKLOG: frozenset({Mode.ARCHITECT}),
    Status.TODO: frozenset({Mode.PLAN}),
    Status.IN_PROGRESS: frozenset({Mode.IMPLEMENT}),
    Status.NEEDS_REVIEW: frozenset({Mode.REVIEW, Mode.IMPLEMENT}),
    Status.RETRO: frozenset({Mode.RETRO, Mode.FINISH}),
}


def dispatch_refusal(who: str, status: Status, mode: Mode, *, force: bool) -> str | None:
    """Why `who` may not start `mode`'s worker on an issue in `status` (`force`: though the
    issue waits for another). Only the controller is bounded: a person starts what they like."""
    if who != CONTROLLER:
        return None
    if force:
        return "the controller may not start a worker with --force: a person decides that"
    allowed = DISPATCH_ROLES.get(status, frozenset())
    if mode in allowed:
        return None
    if not allowed:
        return f"the controller may not start a worker on an issue in {status.value}"
    shown = " or ".join(sorted(m.value for m in allowed))
    return (
        f"the controller may not start {_a(mode.value)} worker on an issue in {status.value} "
        f"(only {shown})"
    )


def answer_refusal(who: str, labels: frozenset[str]) -> str | None:
    """Why `who` may not answer a worker's question on an issue carrying `labels`: once the
    question went to a person (`user-input-needed`) or a person answered
    (`user-feedback-given`), the answer is theirs, not the controller's (its Oracle's)."""
    if who != CONTROLLER:
        return None
    owned = sorted(
        name
        for name in labels
        if Label.from_name(name) in (Label.USER_INPUT_NEEDED, Label.USER_FEEDBACK_GIVEN)
    )
    if not owned:
        return None
    return (
        f"the controller may not answer a question a person owns (`{owned[0]}`): the person "
        "answers it on the issue or with their own `legion answer`"
    )
