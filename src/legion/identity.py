"""Who runs this command: a person, a worker in some mode, or the controller, as the session's
`LEGION_*` variables say (Legion sets them in every session it starts). The CLI and the TUI
both ask here, so a rule about who may do what is written once."""

from __future__ import annotations

import getpass
import os

from legion.errors import NotPermittedError

CONTROLLER_MODE = "controller"  # LEGION_MODE of the orchestrator's session


def default_author() -> str:
    """Who a comment or review is from: a worker says its issue and mode, a person their name."""
    explicit = os.environ.get("LEGION_AUTHOR")
    if explicit:
        return explicit
    mode = os.environ.get("LEGION_MODE")
    if mode:
        return f"legion-{mode}"
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "user"


def require_spawner(what: str) -> None:
    """Only the orchestrator (and the human) starts sessions: a worker asks `@legion` instead
    (the seed's one privilege). A worker's session has its mode in `LEGION_MODE`."""
    mode = os.environ.get("LEGION_MODE", "").strip()
    if mode and mode != CONTROLLER_MODE:
        raise NotPermittedError(
            f"only @legion and the human {what}; a worker asks with `legion say @legion …`"
        )


def written_by_legion() -> bool:
    """Whether this command runs inside a Legion session (a worker, the controller, the
    Oracle), so what it writes is Legion's, not a person's."""
    return bool(os.environ.get("LEGION_MODE"))
