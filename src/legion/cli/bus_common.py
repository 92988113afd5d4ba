"""What the bus's commands share (`legion say`, `messages`, `events`, `agents`, `task` …): the
machine's bus opened, who runs the command, a `--channel` parsed and checked, an agent named
as in a mention, and how an address is written in a channel."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from legion.cli import common
from legion.errors import InputError, NotPermittedError

if TYPE_CHECKING:  # the bus is imported by its commands only: other commands start faster
    from legion.bus import Bus
    from legion.bus.model import Agent, Channel
    from legion.relay.client import RelayClient
    from legion.sessions.identity import Speaker

FOLLOW_POLL_S = common.FOLLOW_POLL_S  # how often `--follow` looks for new messages or events
DEFAULT_LAST = 50

ChannelOption = typer.Option(
    "--channel",
    "-c",
    help="PROJECT/BRANCH (default: yours: your session's, or the branch checked out here).",
)


def open_bus() -> Bus:
    """The machine's bus. A session with the relay that cannot see it (confined: only `say`,
    `ask`, `reply`, `complete` and `messages` reach the bus, through the daemon) is told so,
    rather than given a new, empty bus of its own."""
    from legion.bus import bus_path, open_bus
    from legion.relay import session_has_relay

    if session_has_relay(os.environ) and not bus_path(os.environ).exists():
        raise NotPermittedError(
            "this session runs confined and cannot see Legion's bus: it talks on it through "
            "the daemon, with `legion say`, `ask`, `reply`, `complete` and `messages`"
        )
    return open_bus(os.environ)


def session_client() -> RelayClient | None:
    """The relay client of the session this command runs in, if Legion gave it one: then it
    talks on the bus through the daemon, as the session its capability says (a confined
    session sees no bus)."""
    from legion.relay.client import session_client

    return session_client(os.environ)


def speaker_of(ctx: typer.Context, bus: Bus) -> Speaker:
    """Who runs this command on the bus (`legion.sessions.identity.identify`)."""
    from legion.sessions.identity import identify

    return identify(bus, os.environ, Path.cwd(), lambda: common.project(ctx))


def parse_channel(given: str | None) -> Channel | None:
    """A `--channel` as given (PROJECT/BRANCH); None when none was."""
    from legion.bus.address import parse_channel

    return None if given is None else parse_channel(given)


def known(ctx: typer.Context, bus: Bus, channel: Channel | None) -> Channel | None:
    """`channel`, refused when the bus knows no such project (`messaging.known_channel`)."""
    from legion.services.messaging import known_channel

    return known_channel(bus, channel, lambda: common.project(ctx))


def read_text(text: str) -> str:
    """`text`, or standard input when it is `-`."""
    if text != "-":
        return text
    try:
        return sys.stdin.read()
    except OSError as exc:
        raise InputError(f"cannot read standard input: {exc}") from None


def short(address: str, channel: Channel) -> str:
    """An address as written in `channel`: the name alone on the same branch, branch/name in
    the same project."""
    if address.startswith(f"{channel}/"):
        return address.removeprefix(f"{channel}/")
    return address.removeprefix(f"{channel.project}/")


def target(bus: Bus, speaker: Speaker, address: str) -> Agent:
    """The agent `address` names, written as in a mention where `speaker` speaks."""
    from legion.bus.address import normalize_address

    return bus.resolve_agent(normalize_address(address), speaker.channel())


def addresses(bus: Bus) -> dict[int, str]:
    """Every agent's address by id, the archived included (an event's or a task's agent)."""
    return {agent.id: agent.address for agent in bus.agents(include_archived=True)}
