"""Talking on the bus from outside a daemon (`legion say`, `ask`, `reply`, `messages`,
`events`, `task`): which channel a command may name, a new message handed over at once when no
daemon will, what a reader was shown counting as read, and which events are asked for.

The CLI parses and renders around these, so the rules live here once: a channel of a project
the bus does not know is refused rather than posted to where nobody reads; whoever posts
delivers when no daemon runs for an addressee's project (`legion.services.agent_watch.deliver_now`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from legion.bus import Bus
from legion.bus.delivery import Handed
from legion.bus.model import Agent, Channel, EventKind, Message, Posted
from legion.bus.sessions import project_channel_name
from legion.config import Project
from legion.daemon_link import notify
from legion.errors import InputError, LegionError
from legion.sessions.identity import Speaker


def known_channel(bus: Bus, channel: Channel | None, here: Callable[[], Project]) -> Channel | None:
    """`channel` (named by the caller; None: none named), if its project is one the bus knows
    or the project `here` (which the bus learns now): a name that is none would post where
    nobody reads, or read nothing as if all were quiet."""
    if channel is None:
        return None
    known = bus.projects()
    if channel.project not in known:
        with contextlib.suppress(LegionError):  # the project here, on the bus from now on
            known[project_channel_name(here(), bus)] = Path()
    if channel.project not in known:
        names = ", ".join(sorted(known)) or "none yet"
        raise InputError(
            f"no project {channel.project!r} on the bus (its projects: {names}); "
            "write the channel as PROJECT/BRANCH with one of them"
        )
    return channel


class HandOver(StrEnum):
    """What became of a new message for one addressee with a session, right after posting."""

    DAEMON = "daemon"  # the project's daemon delivers it, as always
    DELIVERED = "delivered"
    AT_TURN_END = "at_turn_end"  # busy: its session gets it at the end of its turn
    WAITS_FOR_START = "waits_for_start"  # not running: it waits for `legion start`
    PENDING = "pending"  # not taken yet (another watcher has it, or tmux did not answer)


# What `legion say` (and the TUI, after a post) tells of a hand-over, by its `HandOver` value
# ("daemon": the project's daemon delivers it, as always: nothing to say).
_SAID = {
    HandOver.DELIVERED.value: "delivered to {agent}",
    HandOver.AT_TURN_END.value: (
        "{agent} is busy: its session gets the message at the end of its turn"
    ),
    HandOver.WAITS_FOR_START.value: "{agent} is not running: the message waits for `legion start`",
    HandOver.PENDING.value: (
        "{agent} has not taken the message yet: it waits for `legion start` "
        "(or an open `legion tui`)"
    ),
}


def _short(address: str, channel: Channel) -> str:
    """An address as written in `channel`: the name alone on the same branch, branch/name in
    the same project."""
    if address.startswith(f"{channel}/"):
        return address.removeprefix(f"{channel}/")
    return address.removeprefix(f"{channel.project}/")


def wakes_said(posted: Posted) -> str:
    """Whom a post wakes, as `legion say` says it: `wakes @implement, @review` (`wakes
    nobody`: a message with no mention wakes no agent)."""
    channel = posted.message.channel
    woken = ", ".join(f"@{_short(agent.address, channel)}" for agent in posted.recipients)
    return f"wakes {woken or 'nobody'}"


def hand_over_said(posted: Posted, delivery: Mapping[str, str]) -> list[str]:
    """What became of a post for each addressee (`delivery`: by address, `HandOver` values,
    as `hand_over` returns them or a session's relay reports them), a line each, as `legion
    say` prints them and the TUI shows them; nothing where the daemon delivers as always."""
    channel = posted.message.channel
    return [
        _SAID[how].format(agent=f"@{_short(address, channel)}")
        for address, how in delivery.items()
        if how in _SAID
    ]


_HANDED = {
    Handed.DELIVERED: HandOver.DELIVERED,
    Handed.AT_TURN_END: HandOver.AT_TURN_END,
    Handed.NOT_RUNNING: HandOver.WAITS_FOR_START,
}


def hand_over(
    bus: Bus, posted: Posted, env: Mapping[str, str], here: Callable[[], Project]
) -> dict[str, HandOver]:
    """After a post: the daemon of the project `here` is told to deliver now, and whoever
    watches delivers, as the daemon would (`legion.services.agent_watch.deliver_now`), to each
    addressee with a session whose project no daemon runs for. What became of it, by address of each
    addressee with a session; nothing for a message to nobody or one posted before (a retry:
    it was handed over then)."""
    if not (posted.created and posted.recipients):
        return {}
    try:
        project = here()
    except LegionError:
        project = None  # outside a project: the message waits for its daemon's tick
    if project is not None:
        notify(project)
    return _deliver(bus, posted, env)


def _deliver(bus: Bus, posted: Posted, env: Mapping[str, str]) -> dict[str, HandOver]:
    from legion.services.agent_watch import deliver_now, load

    by_project: dict[str, list[Agent]] = {}
    for agent in posted.recipients:
        if agent.session_id:
            by_project.setdefault(agent.project, []).append(agent)
    found: dict[str, HandOver] = {}
    roots = bus.projects() if by_project else {}
    for name, agents in by_project.items():
        root = roots.get(name)
        project = None if root is None else load(root, env)
        handed = None
        if project is not None and project_channel_name(project, bus) == name:
            try:
                handed = deliver_now(project, bus, env, [a.id for a in agents])
            except LegionError:
                handed = {}  # could not be had now (tmux did not answer): it stays pending
        for agent in agents:
            if handed is None:
                found[agent.address] = (
                    HandOver.DAEMON if project is not None else HandOver.WAITS_FOR_START
                )
            else:
                how = handed.get(agent.id, Handed.DELIVERED)  # nothing pending: delivered
                found[agent.address] = _HANDED.get(how, HandOver.PENDING)
    return found


@dataclass(frozen=True)
class Reading:
    """What one reader reads of the bus's messages: `channel`'s (None: every channel's), or
    with `unread` only those addressed to it that it has not read. What it was shown counts
    as read (`shown`)."""

    bus: Bus
    reader_id: int
    channel: Channel | None
    unread: bool

    def messages(self, *, since: int = 0, last: int | None = None) -> list[Message]:
        """The messages after `since` (a `seq`), oldest first; only the `last` few."""
        return self.bus.messages(
            channel=self.channel,
            since=since,
            unread_for=self.reader_id if self.unread else None,
            last=last,
        )

    def shown(self, messages: Iterable[Message]) -> None:
        self.bus.mark_read(self.reader_id, (message.id for message in messages))


def reading(bus: Bus, reader: Speaker, channel: Channel | None, *, unread: bool) -> Reading:
    """What `reader` reads: `channel`, else its own channel; its unread messages in every
    channel unless a channel is named."""
    where = channel if unread else channel or reader.channel()
    return Reading(bus, reader.agent.id, where, unread)


def events_asked_for(names: Collection[str]) -> set[EventKind]:
    """The kinds named (`agent_blocked`, or `blocked`, any case); none named: every kind but
    `message_posted` (the messages themselves are read as messages)."""
    known = {kind.value: kind for kind in EventKind}
    short = {kind.short_name: kind for kind in EventKind}
    if not names:
        return set(EventKind) - {EventKind.MESSAGE_POSTED}
    kinds = set()
    for name in names:
        kind = known.get(name.strip().lower()) or short.get(name.strip().lower())
        if kind is None:
            from legion.core.suggest import did_you_mean

            hint = did_you_mean(name.strip().lower(), [*short, *known])
            raise InputError(
                f"unknown event kind {name!r} (known: {', '.join(sorted(known))}){hint}"
            )
        kinds.add(kind)
    return kinds
