"""Deterministic identifiers: any session (and any issue's branch) can be found again from what
the tracker knows."""

from __future__ import annotations

import functools
import uuid

from legion.core.model import Mode, normalize_identifier
from legion.errors import ConfigError, InputError


def project_namespace(project_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(project_id)
    except ValueError:
        raise ConfigError(f"project id {project_id!r} is not a UUID") from None


@functools.lru_cache(maxsize=8192)  # a board of 1,000 issues asks for 8,000 at every read
def session_id(project_id: str, issue: str, mode: Mode) -> str:
    """The Claude Code session id of `issue` in `mode`: uuid5(project, "ISSUE:mode")."""
    name = f"{normalize_identifier(issue)}:{mode.value}"
    return str(uuid.uuid5(project_namespace(project_id), name))


def controller_session_id(project_id: str) -> str:
    return str(uuid.uuid5(project_namespace(project_id), "controller"))


BRANCH_PREFIX = "legion/"


def branch_for(issue: str) -> str:
    """The branch an issue's work is on (`legion/leg-12`): its workspace's, its pull
    request's, whatever the workspace kind and the forge."""
    return f"{BRANCH_PREFIX}{normalize_identifier(issue).lower()}"


def issue_for_branch(branch: str) -> str | None:
    """The issue a `legion/<issue>` branch is for, or None for any other branch."""
    if not branch.startswith(BRANCH_PREFIX):
        return None
    try:
        return normalize_identifier(branch.removeprefix(BRANCH_PREFIX))
    except InputError:
        return None


def short_id(project_id: str) -> str:
    """Eight hex digits of the project id, for tmux session names."""
    return project_namespace(project_id).hex[:8]
