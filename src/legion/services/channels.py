"""The bus as a person reads it in a browser: its channels with their agents, one channel's
last messages. What they do there (post, answer, archive, kill) is `legion say`'s, `legion
reply`'s, `legion archive`'s and `legion kill`'s own calls (`legion.bus.actions`,
`legion.services.agent_control`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from legion.bus.model import AgentRole, Channel

if TYPE_CHECKING:
    from legion.bus import Bus
    from legion.bus.model import Agent, Message

SHOWN = 100  # a channel's last messages shown


@dataclass(frozen=True, slots=True)
class ChannelView:
    channel: Channel
    agents: list[Agent]  # its agents (archived ones too, when asked), by name
    messages: list[Message]  # its last SHOWN, oldest first ([] when not the selected one)


def channels(bus: Bus, *, archived: bool = False) -> list[ChannelView]:
    """Every channel with an agent or a message, by project and branch."""
    agents = [a for a in bus.agents(include_archived=archived) if a.role is not AgentRole.HUMAN]
    found: dict[Channel, list[Agent]] = {}
    for agent in agents:
        found.setdefault(agent.channel, []).append(agent)
    for channel in bus.channels():
        found.setdefault(channel, [])
    return [
        ChannelView(channel, sorted(found[channel], key=lambda a: a.name), [])
        for channel in sorted(found, key=lambda c: (c.project, c.branch))
    ]


def parse_channel(text: str) -> Channel | None:
    """`project/branch` (a branch may hold slashes: `app/legion/LEG-7`); None: not one."""
    project, _, branch = text.partition("/")
    return Channel(project, branch) if project and branch else None


def read_channel(bus: Bus, channel: Channel) -> list[Message]:
    return bus.messages(channel=channel, last=SHOWN)
