"""What Legion gives a session at its boundaries, whatever its CLI: one API that Claude Code's
hooks (`legion.runtime.claude.hook_entry`) and Codex's turn loop (`legion.runtime.codex.session`)
both call, each translating from and to its own CLI.

- `turn_ended`: the messages queued in the session's inbox, handed over (the turn goes on with
  them); a CLI's own limit may hold them (`gate`).
- `prompt_submitted`: the same, given along with a prompt the session was typed.
- `compacting`: the conversation is about to be compacted: recorded on the bus, and the
  wake-up context kept in the session's context file (for when the bus cannot be read).
- `session_started`: what a resumed (`resume`) or compacted (`compact`) session is given
  back: its wake-up context, assembled fresh from the bus, else the one kept.

A session given the relay gets its wake-up context from the daemon, which assembles it with this
same code (`legion.services.session_ops`): a confined session sees no bus.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from legion.bus.inbox import Gate, hand_over, update_inbox
from legion.bus.model import Agent
from legion.core.task_list import TaskList

# The starts after which a session is given its wake-up context (a new or cleared one has
# nothing to be given back).
SESSION_START_SOURCES = ("resume", "compact")


def _no_task_list(agent: Agent) -> TaskList | None:
    return None


@dataclass(frozen=True)
class HookedSession:
    """A session as its boundaries see it: Legion's id of it, its inbox and context files,
    where it works, the environment Legion started it with (`LEGION_MODE`, `LEGION_ISSUE_ID`,
    where the bus is), and its CLI's own task list, read by its runtime (none for Codex)."""

    session_id: str | None
    inbox: Path | None
    context: Path | None
    env: Mapping[str, str]
    workspace: Path | None = None
    task_list: Callable[[Agent], TaskList | None] = _no_task_list
    # Where its wake-up context comes from when it does not read the bus itself: the daemon,
    # for a session given the relay (`legion.relay.wake_up_fetcher`), which may be confined.
    remote_context: Callable[[str, str | None], str | None] | None = None


def turn_ended(
    session: HookedSession, *, via: str, gate: Gate | None = None, now: float | None = None
) -> str | None:
    """The messages queued for the session, taken out of its inbox and recorded as handed over
    `via` (how: a hook's event, the turn loop): what the turn goes on with. None when none is
    queued, or `gate` (the CLI's own limit) holds them."""
    inbox = session.inbox
    if inbox is None or not inbox.exists():
        return None  # nothing was ever queued: no lock, no file
    when = time.time() if now is None else now
    return update_inbox(
        inbox,
        lambda current: hand_over(
            current, via=via, session_id=session.session_id, now=when, gate=gate
        ),
    )


def prompt_submitted(session: HookedSession, *, via: str) -> str | None:
    """The messages queued for the session, handed over with the prompt it was just given."""
    return turn_ended(session, via=via)


def compacting(session: HookedSession, *, trigger: str) -> None:
    """The session is about to compact: `compaction_start` on the bus, and the wake-up context
    as it is now kept in its context file for `session_started` (used if the bus cannot be
    read then)."""
    text = current_context(session, why="compact", compaction=trigger)
    if text is not None and session.context is not None:
        from legion.files.private import write_private

        write_private(session.context, text)


def session_started(session: HookedSession, source: str) -> str | None:
    """What the session is given as it starts from `source`: for a resume or a compaction its
    wake-up context (fresh from the bus, else the one kept); None otherwise or when empty."""
    if source not in SESSION_START_SOURCES:
        return None
    text = current_context(session, why=source) or _kept_context(session.context)
    return text if text and text.strip() else None


def current_context(
    session: HookedSession, *, why: str, compaction: str | None = None
) -> str | None:
    """The session's wake-up context, assembled now from the bus (None: the session is not an
    agent on the bus). `compaction`: record that the session is about to compact (its
    trigger)."""
    if session.remote_context is not None:
        return session.remote_context(why, compaction)
    if not session.session_id:
        return None
    from legion.bus import open_bus
    from legion.bus.context import gather
    from legion.bus.model import EventKind

    bus = open_bus(session.env)
    try:
        agent = bus.agent_by_session(session.session_id)
        if agent is None:
            return None
        if compaction is not None:
            bus.record_event(EventKind.COMPACTION_START, agent_id=agent.id, detail=compaction)
        mode = session.env.get("LEGION_MODE") or None
        return gather(
            bus,
            agent,
            workspace=session.workspace,
            mode=None if mode == "controller" else mode,
            issue=session.env.get("LEGION_ISSUE_ID") or None,
            why=why,
            cli_tasks=session.task_list(agent),
        )
    finally:
        bus.close()


def _kept_context(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
