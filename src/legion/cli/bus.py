"""`legion say | ask | reply | complete | messages`: talking on the bus, for agents and the human
alike."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from legion.cli import bus_common, common
from legion.cli.bus_common import DEFAULT_LAST, FOLLOW_POLL_S, ChannelOption
from legion.core.stamps import utc_stamp
from legion.core.text import for_display
from legion.sessions import identity

if TYPE_CHECKING:  # the bus is imported by its commands only: other commands start faster
    from legion.bus import Bus
    from legion.bus.model import Channel, Message, Posted
    from legion.config import Project
    from legion.services.messaging import Reading
    from legion.services.mode_completion import Completion
    from legion.services.session_ops import RelayedReading
    from legion.trackers.base import Tracker


def message_json(message: Message) -> dict[str, Any]:
    return {
        "id": message.id,
        "seq": message.seq,
        "channel": str(message.channel),
        "sender": message.sender,
        "kind": message.kind.value,
        "body": message.body,
        "mentions": list(message.mentions),
        "created_at": utc_stamp(message.created_at),
    }


def message_lines(message: Message) -> str:
    when = utc_stamp(message.created_at)
    sender = bus_common.short(message.sender, message.channel)
    first, *rest = message.body.split("\n")
    head = f"#{message.seq} {when} {message.channel} @{sender}: {first}"
    return for_display("\n".join([head, *(f"    {line}" for line in rest)]))


def say(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="The message (- reads standard input).")],
    channel: Annotated[str | None, ChannelOption] = None,
    message_id: Annotated[
        str | None,
        typer.Option(
            "--id",
            help="The message's id, chosen by you: saying it again with the same id posts "
            "nothing new (safe to retry). Default: a new UUID.",
        ),
    ] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Post a message in your channel; each @mention wakes the agent it names.

    @agent is on your branch, @branch/agent in your project, @project/branch/agent anywhere;
    @legion is your project's orchestrator, and @human the human (agents ask @legion, which
    decides whether to). Mentions in `backticks` are code, not mentions."""
    from legion.bus.validate import clean_message_body, clean_message_id

    body = clean_message_body(bus_common.read_text(text))
    wanted = bus_common.parse_channel(channel)
    chosen_id = clean_message_id(message_id) if message_id is not None else None
    client = bus_common.session_client()
    if client is not None:
        from legion.services import session_ops

        relayed = session_ops.say(client, body, channel=wanted, message_id=chosen_id)
        _report(relayed.posted, relayed.delivery, as_json)
        return
    from legion.bus import actions

    bus = bus_common.open_bus()
    wanted = bus_common.known(ctx, bus, wanted)
    speaker = bus_common.speaker_of(ctx, bus)
    posted = actions.say(
        bus, speaker.agent, wanted or speaker.channel(), body, message_id=chosen_id
    )
    _report_posted(ctx, bus, posted, as_json)


def _report_posted(
    ctx: typer.Context, bus: Bus, posted: Posted, as_json: bool, verb: str = "posted"
) -> None:
    from legion.services.messaging import hand_over

    delivery = hand_over(bus, posted, os.environ, lambda: common.project(ctx))
    _report(posted, {address: how.value for address, how in delivery.items()}, as_json, verb)


def _report(posted: Posted, delivery: dict[str, str], as_json: bool, verb: str = "posted") -> None:
    """What a post did, and what became of it for each addressee with a session (by the
    values of `legion.services.messaging.HandOver`)."""
    message = posted.message
    wakes = [agent.address for agent in posted.recipients]
    if as_json:
        common.print_json(
            {
                "message": message_json(message),
                "wakes": wakes,
                "created": posted.created,
                "delivery": delivery,
            }
        )
        return
    from legion.services.messaging import hand_over_said, wakes_said

    verb = verb if posted.created else f"already {verb}"
    where = f"#{message.seq} in {message.channel} (id {message.id})"
    common.echo(f"{verb} {where}; {wakes_said(posted)}")
    for line in hand_over_said(posted, delivery):
        common.echo(line)


MessageIdOption = typer.Option(
    "--id",
    help="The message's id, chosen by you: the same command again with the same id posts "
    "nothing new (safe to retry). Default: a new UUID.",
)


def ask(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="The question (- reads standard input).")],
    about: Annotated[
        str | None,
        typer.Option(
            "--about",
            help="@legion only: the id of an agent's question to pass on to the human, whose "
            "answer then goes back to that agent.",
        ),
    ] = None,
    message_id: Annotated[str | None, MessageIdOption] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Ask @legion a question and wait: you are blocked until the answer comes, as your next
    prompt, in this same session. End your turn after asking.

    @legion answers, asks the Oracle, or passes the question on to the human (`--about`)."""
    from legion.bus import actions
    from legion.bus.validate import clean_message_body, clean_message_id

    body = clean_message_body(bus_common.read_text(text))
    chosen_id = clean_message_id(message_id) if message_id is not None else None
    about_id = clean_message_id(about) if about is not None else None
    client = bus_common.session_client()
    if client is not None:
        from legion.services import session_ops

        relayed = session_ops.ask(client, body, about=about_id, message_id=chosen_id)
        _report(relayed.posted, relayed.delivery, as_json, "asked")
        return
    bus = bus_common.open_bus()
    speaker = bus_common.speaker_of(ctx, bus)
    posted = actions.ask(
        bus,
        speaker.agent,
        body,
        about=about_id,
        message_id=chosen_id,
        spawn_instance=identity.current().spawn_instance,
    )
    _report_posted(ctx, bus, posted, as_json, "asked")


def reply(
    ctx: typer.Context,
    message: Annotated[str, typer.Argument(metavar="MESSAGE_ID", help="The message's id.")],
    text: Annotated[str, typer.Argument(help="The reply (- reads standard input).")],
    message_id: Annotated[str | None, MessageIdOption] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Reply to a message, in its channel, waking whoever wrote it. The reply to a question
    is its answer: it goes back to the agent that asked (through every hand that passed the
    question on), in its same session."""
    from legion.bus import actions
    from legion.bus.validate import clean_message_body, clean_message_id

    original = clean_message_id(message)
    body = clean_message_body(bus_common.read_text(text))
    chosen_id = clean_message_id(message_id) if message_id is not None else None
    client = bus_common.session_client()
    if client is not None:
        from legion.services import session_ops

        relayed = session_ops.reply(client, original, body, message_id=chosen_id)
        _report(relayed.posted, relayed.delivery, as_json, "replied")
        return
    bus = bus_common.open_bus()
    speaker = bus_common.speaker_of(ctx, bus)
    posted = actions.reply(bus, speaker.agent, original, body, reply_id=chosen_id)
    _report_posted(ctx, bus, posted, as_json, "replied")


def complete(
    ctx: typer.Context,
    summary: Annotated[
        str | None, typer.Argument(help="One line: what was done (- reads standard input).")
    ] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Say your mode is done: a worker's issue gets `worker-done` (and loses `worker-active`),
    so Legion moves it on; the completion is posted in your channel. Your last command."""
    from legion.services.mode_completion import complete as complete_mode
    from legion.sessions.identity import current

    common.refuse_unshipped()
    text = None if summary is None else bus_common.read_text(summary)
    client = bus_common.session_client()
    if client is not None:
        from legion.services import session_ops

        done: Completion | session_ops.Completed = session_ops.complete(client, text)
    else:
        bus = bus_common.open_bus()
        speaker = bus_common.speaker_of(ctx, bus)
        opened: list[Project] = []

        def tracker() -> Tracker:
            project, backends = common.backends(ctx)
            opened.append(project)
            return backends.tracker

        done = complete_mode(bus, speaker.agent, current(), text, tracker)
        for project in opened:
            common.changed(project)
    if as_json:
        common.print_json(
            {
                "message": message_json(done.posted.message),
                "issue": done.issue,
                "labels": {"added": done.added, "removed": done.removed},
            }
        )
        return
    change = ", ".join(
        [*(f"+{name}" for name in done.added), *(f"-{name}" for name in done.removed)]
    )
    on_issue = f"; {done.issue}: {change}" if done.issue and change else ""
    sender = done.posted.message.sender
    common.echo(f"@{sender} complete (#{done.posted.message.seq}){on_issue}")


def messages(
    ctx: typer.Context,
    channel: Annotated[str | None, ChannelOption] = None,
    unread: Annotated[
        bool,
        typer.Option(
            "--unread",
            help="Only messages addressed to you that you have not read, in every channel "
            "(or --channel's).",
        ),
    ] = False,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Keep printing new messages until Ctrl-C."),
    ] = False,
    last: Annotated[
        int,
        typer.Option("--last", "-n", min=1, max=100_000, help="How many recent messages."),
    ] = DEFAULT_LAST,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """A channel's messages, oldest first (with --follow, then each new one as it comes).

    What is shown that was addressed to you counts as read. With --follow --json, one JSON
    object per line."""
    from legion.services.messaging import reading

    wanted = bus_common.parse_channel(channel)
    client = bus_common.session_client()
    feed: Reading | RelayedReading
    if client is not None:
        from legion.services.session_ops import RelayedReading

        feed = RelayedReading(client, wanted, unread)  # the daemon reads it, as this session
    else:
        bus = bus_common.open_bus()
        wanted = bus_common.known(ctx, bus, wanted)
        feed = reading(bus, bus_common.speaker_of(ctx, bus), wanted, unread=unread)
    shown = feed.messages(last=None if unread else last)
    if as_json and not follow:
        common.print_json([message_json(m) for m in shown])
    else:
        _show(shown, as_json)
    feed.shown(shown)
    if not follow:
        if not shown and not as_json:
            common.echo(f"No {'unread ' if unread else ''}messages{_in(feed.channel)}.")
        return
    _follow(feed, shown[-1].seq if shown else 0, as_json)


def _in(channel: Channel | str | None) -> str:
    return "" if channel is None else f" in {channel}"


def _show(found: Iterable[Message], as_json: bool) -> None:
    for message in found:
        line = common.json_text(message_json(message)) if as_json else message_lines(message)
        sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _follow(feed: Reading | RelayedReading, cursor: int, as_json: bool) -> None:
    try:
        while True:
            time.sleep(FOLLOW_POLL_S)
            found = feed.messages(since=cursor)
            if found:
                _show(found, as_json)
                feed.shown(found)
                cursor = found[-1].seq
    except KeyboardInterrupt:
        return  # Ctrl-C is how one stops following: not an error
