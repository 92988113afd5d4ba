"""What each worker mode may do to its own issue's pull request: the roles. Pure.

A worker's capability already keeps it to its issue (`legion.relay.server`); within it, the
mode decides: the implementer opens the pull request, only a review session records a review,
only a finish session marks it ready and merges it. So a worker steered by what it read cannot
approve its own work or merge it unreviewed. The controller (a project's capability) may open a
pull request and mark it ready, but neither reviews nor merges: a worker's @-mention asking it
to is text, not a review. A person acts through their own commands, outside any session.
"""

from __future__ import annotations

from legion.core.model import Mode

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
