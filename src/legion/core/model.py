"""The domain vocabulary: statuses, labels, worker modes, review outcomes, checks, identifiers.

Pure: no I/O. Every backend maps its own names onto these.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import Enum

from legion.errors import InputError


class Status(Enum):
    """An issue's workflow status; the tracker's status *is* the phase."""

    TRIAGE = "Triage"
    ICEBOX = "Icebox"
    BACKLOG = "Backlog"
    TODO = "Todo"
    IN_PROGRESS = "In Progress"
    NEEDS_REVIEW = "Needs Review"
    RETRO = "Retro"
    DONE = "Done"

    @classmethod
    def parse(cls, text: str) -> Status:
        """Case-insensitive, tolerant of separators and common aliases."""
        key = fold_name(text)
        try:
            return _STATUS_BY_KEY[key]
        except KeyError:
            known = ", ".join(s.value for s in cls)
            raise InputError(f"unknown status {text!r} (known: {known})") from None


def fold_name(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", text.strip().lower())


_STATUS_ALIASES: dict[str, Status] = {
    "in review": Status.NEEDS_REVIEW,
    "review": Status.NEEDS_REVIEW,
    "needs-review": Status.NEEDS_REVIEW,
    "doing": Status.IN_PROGRESS,
    "started": Status.IN_PROGRESS,
    "to do": Status.TODO,
    "unstarted": Status.TODO,
    "completed": Status.DONE,
    "closed": Status.DONE,
    "merged": Status.DONE,
    "retrospective": Status.RETRO,
}

_STATUS_BY_KEY: dict[str, Status] = {fold_name(s.value): s for s in Status} | {
    fold_name(alias): status for alias, status in _STATUS_ALIASES.items()
}


class Label(Enum):
    """The workflow labels Legion reads and writes on the tracker."""

    WORKER_DONE = "worker-done"
    WORKER_ACTIVE = "worker-active"
    USER_INPUT_NEEDED = "user-input-needed"
    USER_FEEDBACK_GIVEN = "user-feedback-given"

    @classmethod
    def from_name(cls, name: str) -> Label | None:
        """The workflow label with this name, or None for any other label."""
        return _LABEL_BY_NAME.get(name.strip().lower())


_LABEL_BY_NAME: dict[str, Label] = {label.value: label for label in Label}

_LABEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/ -]{0,49}$")


def validate_label_name(name: str) -> str:
    """A label name as a tracker stores it: short, printable, no leading or trailing space."""
    cleaned = name.strip()
    if not _LABEL_NAME.fullmatch(cleaned):
        raise InputError(
            f"invalid label name {name!r}: use 1-50 letters, digits, spaces or ._:/- "
            "starting with a letter or digit"
        )
    return cleaned


class Mode(Enum):
    """What a worker session is asked to do."""

    ARCHITECT = "architect"
    PLAN = "plan"
    IMPLEMENT = "implement"
    REVIEW = "review"
    RETRO = "retro"
    FINISH = "finish"

    @classmethod
    def parse(cls, text: str) -> Mode:
        try:
            return cls(text.strip().lower())
        except ValueError:
            known = ", ".join(m.value for m in cls)
            raise InputError(f"unknown worker mode {text!r} (known: {known})") from None


# The mode of the controller's session (its LEGION_MODE), beside the workers' modes above: it
# is no worker mode, but sessions are named by it all the same.
CONTROLLER_MODE = "controller"


class ReviewOutcome(Enum):
    """The review state of an issue's pull request, as the decision table sees it."""

    APPROVED = "approved"
    CHANGES_REQUESTED = "changes_requested"
    NONE = "none"  # no review yet, or no pull request
    UNKNOWN = "unknown"  # the forge could not be asked: never act on a guess


class ChecksState(Enum):
    """The CI checks on a pull request's head commit, as the decision table sees them."""

    PASSING = "passing"  # every check finished, none failed
    FAILING = "failing"  # at least one check failed (whatever the others do)
    PENDING = "pending"  # none failed, and at least one is queued or running
    NONE = "none"  # no checks at all (no CI, or no pull request)
    UNKNOWN = "unknown"  # the forge could not be asked: never act on a guess


def combine_checks(states: Iterable[ChecksState]) -> ChecksState:
    """The state of a pull request's checks from each check's own state (PASSING, FAILING or
    PENDING): failing if any failed, else pending if any has not finished, else passing if
    there is any, else none."""
    seen = set(states)
    for state in (ChecksState.FAILING, ChecksState.PENDING, ChecksState.PASSING):
        if state in seen:
            return state
    return ChecksState.NONE


_IDENTIFIER = re.compile(r"^([A-Za-z][A-Za-z0-9]{0,9})-([1-9][0-9]{0,8})$")
_ISSUE_KEY = re.compile(r"^[A-Z][A-Z0-9]{0,9}$")


def parse_identifier(text: str) -> tuple[str, int]:
    """Split `LEG-12` (any case) into ("LEG", 12)."""
    match = _IDENTIFIER.fullmatch(text.strip())
    if match is None:
        raise InputError(f"invalid issue identifier {text!r} (expected KEY-NUMBER, e.g. LEG-12)")
    return match.group(1).upper(), int(match.group(2))


def normalize_identifier(text: str) -> str:
    key, number = parse_identifier(text)
    return f"{key}-{number}"


def validate_issue_key(key: str) -> str:
    if not _ISSUE_KEY.fullmatch(key):
        raise InputError(
            f"invalid issue key {key!r}: 1-10 upper-case letters or digits, starting with a letter"
        )
    return key
