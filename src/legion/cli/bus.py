"""`legion say | messages | agents | task …`: the event bus, for agents and the human alike."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from legion import identity
from legion.cli import common
from legion.core.stamps import utc_stamp
from legion.core.text import for_display
from legion.errors import InputError

if TYPE_CHECKING:  # the bus is imported by its commands only: other commands start faster
    from legion.bus import Bus
    from legion.bus.model import Agent, Channel, Event, EventKind, Message, Posted, Task
    from legion.config import Project
    from legion.identity import Speaker
    from legion.trackers.base import Tracker

FOLLOW_POLL_S = 0.2  # how often `messages --follow` looks for new messages
DEFAULT_LAST = 50

ChannelOption = typer.Option(
    "--channel",
    "-c",
    help="PROJECT/BRANCH (default: yours: your session's, or the branch checked out here).",
)

task_app = typer.Typer(
    help="The channel's tasks: a tree, each pending, assigned or done.",
    no_args_is_help=True,
    epilog=common.example('legion task add "Write the parser"', "legion task list"),
)


def _open_bus() -> Bus:
    from legion.bus import open_bus

    return open_bus(os.environ)


def _speaker(ctx: typer.Context, bus: Bus) -> Speaker:
    from legion.identity import identify

    return identify(bus, os.environ, Path.cwd(), lambda: common.project(ctx))


def _wake_daemon(ctx: typer.Context) -> None:
    """Have this project's daemon deliver now rather than at its next tick. Only a help: outside
    a project (or with no daemon) the message waits for a tick."""
    from legion.errors import LegionError

    try:
        project = common.project(ctx)
    except LegionError:
        return
    common.changed(project)


def _parse_channel(given: str | None) -> Channel | None:
    from legion.bus.address import parse_channel

    return None if given is None else parse_channel(given)


def _known(ctx: typer.Context, bus: Bus, channel: Channel | None) -> Channel | None:
    """A channel given with --channel, if its project is one the bus knows: a name that is
    none would post where nobody reads, or read nothing as if all were quiet."""
    from legion.bus.sessions import project_channel_name
    from legion.errors import LegionError

    if channel is None:
        return None
    known = bus.projects()
    if channel.project not in known:
        with contextlib.suppress(LegionError):  # the project here, on the bus from now on
            known[project_channel_name(common.project(ctx), bus)] = Path()
    if channel.project not in known:
        names = ", ".join(sorted(known)) or "none yet"
        raise InputError(
            f"no project {channel.project!r} on the bus (its projects: {names}); "
            "write the channel as PROJECT/BRANCH with one of them"
        )
    return channel


def _read_text(text: str) -> str:
    if text != "-":
        return text
    try:
        return sys.stdin.read()
    except OSError as exc:
        raise InputError(f"cannot read standard input: {exc}") from None


# -- JSON shapes ----------------------------------------------------------------------------------


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


def agent_json(agent: Agent) -> dict[str, Any]:
    return {
        "id": agent.id,
        "address": agent.address,
        "project": agent.project,
        "branch": agent.branch,
        "name": agent.name,
        "role": agent.role.value,
        "runtime": agent.runtime,
        "session_id": agent.session_id,
        "status": agent.status.value,
        "spawn_instance": agent.spawn_instance,
        "created_at": utc_stamp(agent.created_at),
        "updated_at": utc_stamp(agent.updated_at),
    }


def task_json(task: Task, addresses: Mapping[int, str]) -> dict[str, Any]:
    assigned = task.assigned_agent_id
    return {
        "id": task.id,
        "channel": f"{task.project}/{task.branch}",
        "parent": task.parent_id,
        "title": task.title,
        "assigned": None if assigned is None else addresses.get(assigned),
        "state": task.state.value,
        "completed_at": utc_stamp(task.completed_at),
        "created_at": utc_stamp(task.created_at),
    }


def _short(address: str, channel: Channel) -> str:
    """An address as written in `channel`: the name alone on the same branch, branch/name in
    the same project."""
    if address.startswith(f"{channel}/"):
        return address.removeprefix(f"{channel}/")
    return address.removeprefix(f"{channel.project}/")


def message_lines(message: Message) -> str:
    when = utc_stamp(message.created_at)
    sender = _short(message.sender, message.channel)
    first, *rest = message.body.split("\n")
    head = f"#{message.seq} {when} {message.channel} @{sender}: {first}"
    return for_display("\n".join([head, *(f"    {line}" for line in rest)]))


# -- commands -------------------------------------------------------------------------------------


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

    body = clean_message_body(_read_text(text))
    wanted = _parse_channel(channel)
    chosen_id = clean_message_id(message_id) if message_id is not None else None
    from legion.bus import actions

    bus = _open_bus()
    wanted = _known(ctx, bus, wanted)
    speaker = _speaker(ctx, bus)
    posted = actions.say(
        bus, speaker.agent, wanted or speaker.channel(), body, message_id=chosen_id
    )
    _report_posted(ctx, bus, posted, as_json)


def _report_posted(
    ctx: typer.Context, bus: Bus, posted: Posted, as_json: bool, verb: str = "posted"
) -> None:
    message = posted.message
    wakes = [agent.address for agent in posted.recipients]
    delivery: dict[str, str] = {}
    if posted.created and posted.recipients:
        _wake_daemon(ctx)
        delivery = _deliver(bus, posted)
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
    verb = verb if posted.created else f"already {verb}"
    woken = ", ".join(f"@{_short(a, message.channel)}" for a in wakes) or "nobody"
    common.echo(f"{verb} #{message.seq} in {message.channel} (id {message.id}); wakes {woken}")
    for address, how in delivery.items():
        if how in _SAID:
            common.echo(_SAID[how].format(agent=f"@{_short(address, message.channel)}"))


# What `legion say` tells of a delivery, by its value in `--json`'s "delivery" ("daemon": the
# project's daemon delivers it, as always: nothing to say).
_SAID = {
    "delivered": "delivered to {agent}",
    "at_turn_end": "{agent} is busy: its session gets the message at the end of its turn",
    "waits_for_start": "{agent} is not running: the message waits for `legion start`",
    "pending": (
        "{agent} has not taken the message yet: it waits for `legion start` "
        "(or an open `legion tui`)"
    ),
}


def _deliver(bus: Bus, posted: Posted) -> dict[str, str]:
    """Whoever watches delivers: with no daemon for an addressee's project, hand the message
    over now, as the daemon would (`legion.watch.deliver_now`). What became of it, by address
    of each addressee with a session."""
    from legion.bus.delivery import Handed
    from legion.bus.sessions import project_channel_name
    from legion.errors import LegionError
    from legion.watch import deliver_now, load

    words = {
        Handed.DELIVERED: "delivered",
        Handed.AT_TURN_END: "at_turn_end",
        Handed.NOT_RUNNING: "waits_for_start",
    }
    by_project: dict[str, list[Agent]] = {}
    for agent in posted.recipients:
        if agent.session_id:
            by_project.setdefault(agent.project, []).append(agent)
    found: dict[str, str] = {}
    roots = bus.projects() if by_project else {}
    for name, agents in by_project.items():
        root = roots.get(name)
        project = None if root is None else load(root, os.environ)
        handed = None
        if project is not None and project_channel_name(project, bus) == name:
            try:
                handed = deliver_now(project, bus, os.environ, [a.id for a in agents])
            except LegionError:
                handed = {}  # could not be had now (tmux did not answer): it stays pending
        for agent in agents:
            if handed is None:
                found[agent.address] = "daemon" if project is not None else "waits_for_start"
            else:
                how = handed.get(agent.id, Handed.DELIVERED)  # nothing pending: delivered
                found[agent.address] = words.get(how, "pending")
    return found


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

    body = clean_message_body(_read_text(text))
    chosen_id = clean_message_id(message_id) if message_id is not None else None
    about_id = clean_message_id(about) if about is not None else None
    bus = _open_bus()
    speaker = _speaker(ctx, bus)
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
    body = clean_message_body(_read_text(text))
    chosen_id = clean_message_id(message_id) if message_id is not None else None
    bus = _open_bus()
    speaker = _speaker(ctx, bus)
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
    from legion.completion import complete as complete_mode
    from legion.identity import current

    text = None if summary is None else _read_text(summary)
    bus = _open_bus()
    speaker = _speaker(ctx, bus)
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
    common.echo(f"@{speaker.agent.address} complete (#{done.posted.message.seq}){on_issue}")


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
    wanted = _parse_channel(channel)
    bus = _open_bus()
    wanted = _known(ctx, bus, wanted)
    speaker = _speaker(ctx, bus)
    me = speaker.agent.id
    where = wanted if unread else wanted or speaker.channel()

    def fetch(since: int, newest: int | None) -> list[Message]:
        return bus.messages(
            channel=where, since=since, unread_for=me if unread else None, last=newest
        )

    shown = fetch(0, None if unread else last)
    if as_json and not follow:
        common.print_json([message_json(m) for m in shown])
    else:
        _show(shown, as_json)
    bus.mark_read(me, (m.id for m in shown))
    if not follow:
        if not shown and not as_json:
            common.echo(f"No {'unread ' if unread else ''}messages{_in(where)}.")
        return
    _follow(bus, fetch, shown[-1].seq if shown else 0, me, as_json)


def _in(channel: Channel | None) -> str:
    return "" if channel is None else f" in {channel}"


def _show(found: Iterable[Message], as_json: bool) -> None:
    for message in found:
        line = common.json_text(message_json(message)) if as_json else message_lines(message)
        sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _follow(
    bus: Bus,
    fetch: Callable[[int, int | None], list[Message]],
    cursor: int,
    me: int,
    as_json: bool,
) -> None:
    try:
        while True:
            time.sleep(FOLLOW_POLL_S)
            found = fetch(cursor, None)
            if found:
                _show(found, as_json)
                bus.mark_read(me, (m.id for m in found))
                cursor = found[-1].seq
    except KeyboardInterrupt:
        return  # Ctrl-C is how one stops following: not an error


def agents(
    include_archived: Annotated[
        bool, typer.Option("--all", "-a", help="Archived agents too.")
    ] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Every agent on the bus (all projects on this machine): its address, role and status.

    A project's daemon keeps its agents' statuses true; for a project no daemon runs for, the
    sessions are looked at now (tmux and the transcripts)."""
    from legion.watch import observe_all

    bus = _open_bus()
    observe_all(bus, os.environ)
    found = bus.agents(include_archived=include_archived)
    if as_json:
        common.print_json([agent_json(agent) for agent in found])
        return
    if not found:
        typer.echo("No agents.")
        return
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("Agent", "Role", "Status", "Spawn", "Session", "Updated"):
        table.add_column(column, overflow="fold")
    for agent in found:
        table.add_row(
            for_display(f"@{agent.address}"),
            agent.role.value,
            agent.status.value,
            str(agent.spawn_instance),
            for_display(agent.session_id or "-"),
            for_display(agent.updated_at[:19].replace("T", " ")),
        )
    common.print_table(table)


# -- events ---------------------------------------------------------------------------------------


def event_json(event: Event, addresses: Mapping[int, str]) -> dict[str, Any]:
    agent = None if event.agent_id is None else addresses.get(event.agent_id)
    return {
        "id": event.id,
        "kind": event.kind.value,
        "agent": agent,
        "message_id": event.message_id,
        "detail": event.detail,
        "created_at": event.created_at,
    }


def event_line(event: Event, addresses: Mapping[int, str]) -> str:
    when = event.created_at[:19].replace("T", " ")
    who = "-" if event.agent_id is None else f"@{addresses.get(event.agent_id, '?')}"
    line = f"#{event.id} {when} {event.kind.value} {for_display(who)}"
    if event.detail:
        line += f": {for_display(event.detail)}"
    if event.message_id is not None:
        line += f" (message {for_display(event.message_id)})"
    return line


def _event_kinds(given: list[str]) -> set[EventKind]:
    """The kinds asked for by name (`agent_blocked`, or `blocked`); none given: every kind
    but `message_posted` (the messages themselves are `legion messages`')."""
    from legion.bus.model import EventKind

    known = {kind.value: kind for kind in EventKind}
    short = {kind.short_name: kind for kind in EventKind}
    if not given:
        return set(EventKind) - {EventKind.MESSAGE_POSTED}
    kinds = set()
    for name in given:
        kind = known.get(name.strip().lower()) or short.get(name.strip().lower())
        if kind is None:
            raise InputError(f"unknown event kind {name!r} (known: {', '.join(sorted(known))})")
        kinds.add(kind)
    return kinds


def events(
    ctx: typer.Context,
    agent: Annotated[
        str | None,
        typer.Option("--agent", help="Only this agent's events (an address, as in a mention)."),
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            "-k",
            help="Only events of this kind (repeatable): registered, blocked, completed, failed, "
            "archived, compaction, message. Default: all but message.",
        ),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Keep printing new events until Ctrl-C."),
    ] = False,
    last: Annotated[
        int,
        typer.Option("--last", "-n", min=1, max=100_000, help="How many recent events."),
    ] = DEFAULT_LAST,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """The bus's event log, oldest first (with --follow, then each new one as it comes): agents
    registered (a session started), blocked, completed, failed, archived, and compactions, for
    every agent on the bus (all projects on this machine).

    With --follow --json, one JSON object per line."""
    kinds = _event_kinds(kind or [])
    bus = _open_bus()
    agent_id = None
    if agent is not None:
        agent_id = _target(bus, _speaker(ctx, bus), agent).id
    addresses = _addresses(bus)

    def fetch(since: int, newest: int | None) -> list[Event]:
        found = bus.event_log(since=since, agent_id=agent_id, kinds=kinds, last=newest)
        if any(e.agent_id is not None and e.agent_id not in addresses for e in found):
            addresses.update(_addresses(bus))  # an agent registered since
        return found

    shown = fetch(0, last)
    if as_json and not follow:
        common.print_json([event_json(e, addresses) for e in shown])
        return
    _show_events(shown, addresses, as_json)
    if not follow:
        if not shown and not as_json:
            typer.echo("No events.")
        return
    # Nothing shown: no event matches yet, so each that comes is newer than 0.
    cursor = shown[-1].id if shown else 0
    try:
        while True:
            time.sleep(FOLLOW_POLL_S)
            found = fetch(cursor, None)
            if found:
                _show_events(found, addresses, as_json)
                cursor = found[-1].id
    except KeyboardInterrupt:
        return  # Ctrl-C is how one stops following: not an error


def _show_events(found: Iterable[Event], addresses: Mapping[int, str], as_json: bool) -> None:
    for event in found:
        if as_json:
            line = common.json_text(event_json(event, addresses))
        else:
            line = event_line(event, addresses)
        sys.stdout.write(line + "\n")
    sys.stdout.flush()


# -- tasks ----------------------------------------------------------------------------------------


def _task_id(text: str) -> int:
    digits = text.strip().removeprefix("#")
    if not digits.isdigit() or not 0 < int(digits) < 2**63:
        raise InputError(f"invalid task id {text!r}: a number, e.g. 3")
    return int(digits)


def _addresses(bus: Bus) -> dict[int, str]:
    return {agent.id: agent.address for agent in bus.agents(include_archived=True)}


@task_app.command(
    "add",
    epilog=common.example(
        'legion task add "Add the login endpoint" --assign backend',
        'legion task add "Hash passwords" --parent 3 --json',
    ),
)
def task_add(
    ctx: typer.Context,
    title: Annotated[str, typer.Argument(help="What is to be done (one line).")],
    parent: Annotated[
        str | None, typer.Option("--parent", "-p", help="The parent task's id.")
    ] = None,
    assign: Annotated[
        str | None,
        typer.Option("--assign", help="The agent it is for: an address, as in a mention."),
    ] = None,
    channel: Annotated[str | None, ChannelOption] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Add a task to the channel."""
    from legion.core.text import clean_title

    clean_title(title)
    parent_id = _task_id(parent) if parent is not None else None
    wanted = _parse_channel(channel)
    bus = _open_bus()
    where = _known(ctx, bus, wanted) or _speaker(ctx, bus).channel()
    assignee = bus.resolve_agent(assign, where) if assign is not None else None
    task = bus.add_task(
        where,
        title,
        parent_id=parent_id,
        assigned_agent_id=None if assignee is None else assignee.id,
    )
    addresses = {} if assignee is None else {assignee.id: assignee.address}
    if as_json:
        common.print_json(task_json(task, addresses))
        return
    to = "" if assignee is None else f", assigned to @{_short(assignee.address, where)}"
    common.echo(f"task {task.id} added in {where}{to}")


@task_app.command("list", epilog=common.example("legion task list", "legion task list --json"))
def task_list(
    ctx: typer.Context,
    channel: Annotated[str | None, ChannelOption] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """The channel's tasks as a tree: [x] done, [>] assigned, [ ] pending."""
    wanted = _parse_channel(channel)
    bus = _open_bus()
    where = _known(ctx, bus, wanted) or _speaker(ctx, bus).channel()
    found = bus.tasks(where)
    addresses = _addresses(bus) if found else {}
    if as_json:
        common.print_json([task_json(task, addresses) for task in found])
        return
    if not found:
        common.echo(f"No tasks in {where}.")
        return
    for depth, task in _tree(found):
        mark = {"done": "[x]", "assigned": "[>]", "pending": "[ ]"}[task.state.value]
        who = task.assigned_agent_id
        suffix = "" if who is None else f" (@{_short(addresses.get(who, '?'), where)})"
        common.echo(f"{'    ' * depth}{mark} {task.id} {task.title}{suffix}")


def _tree(tasks: list[Task]) -> list[tuple[int, Task]]:
    """Depth-first, children under their parent; a task whose parent is in another channel
    is a root here."""
    ids = {task.id for task in tasks}
    children: dict[int | None, list[Task]] = {}
    for task in tasks:
        parent = task.parent_id if task.parent_id in ids else None
        children.setdefault(parent, []).append(task)
    ordered: list[tuple[int, Task]] = []
    stack = [(0, task) for task in reversed(children.get(None, []))]
    while stack:
        depth, task = stack.pop()
        ordered.append((depth, task))
        stack += [(depth + 1, child) for child in reversed(children.get(task.id, []))]
    return ordered


@task_app.command("done", epilog=common.example("legion task done 3"))
def task_done(
    task_id: Annotated[str, typer.Argument(metavar="ID", help="The task's id.")],
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Mark a task done (again is harmless: it keeps when it was first done)."""
    number = _task_id(task_id)
    bus = _open_bus()
    task = bus.complete_task(number)
    if as_json:
        common.print_json(task_json(task, _addresses(bus)))
        return
    common.echo(f"task {task.id} done ({task.title})")


# -- kill and archive -----------------------------------------------------------------------------


def _target(bus: Bus, speaker: Speaker, address: str) -> Agent:
    from legion.bus.address import normalize_address

    return bus.resolve_agent(normalize_address(address), speaker.channel())


def kill(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="The agent, as in a mention.")],
    force: Annotated[
        bool,
        typer.Option(
            "--force", "-f", help="Kill it even in the middle of a turn, with SIGKILL at once."
        ),
    ] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """End an agent's session (@legion and the human only). The swarm may start the issue's
    worker again: the tracker decides; move the issue to stop its work for good."""
    from legion.bus import actions
    from legion.watch import observe_all

    bus = _open_bus()
    speaker = _speaker(ctx, bus)
    target = _target(bus, speaker, agent)
    # "Busy" must be true now, not what was last seen: with no daemon, look at the session.
    observe_all(bus, os.environ, [target.project])

    def stop(found: Agent) -> bool:
        if found.session_id is None:
            return False
        return bool(_workers_of(bus, found).supervisor.stop_session(found.session_id, force=force))

    killed = actions.kill(bus, speaker.agent, target, force=force, stop=stop)
    if as_json:
        common.print_json(agent_json(killed))
        return
    common.echo(f"@{killed.address}: {killed.status.value}")


def attach(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="The agent, as in a mention.")],
) -> None:
    """Open the agent's live session in this terminal: its tmux window, read-write (what you
    type goes to the agent). Detach with tmux's prefix key then d (C-b d by default); the
    session runs on. Inside tmux on the same server, switches this client to it instead."""
    bus = _open_bus()
    target = _target(bus, _speaker(ctx, bus), agent)
    if target.session_id is None:
        raise InputError(f"@{for_display(target.address)} has no session to attach to")
    workers = _workers_of(bus, target)
    bus.close()
    window = workers.windows.live_window(target.session_id)
    if window is None:
        from legion.errors import LegionError

        raise LegionError(
            f"@{for_display(target.address)} is not running (status {target.status.value}): "
            "no live session to attach to"
        )
    attach_with = workers.windows.attach_command(window.id, os.environ)
    argv = attach_with.argv
    sys.stdout.flush()
    try:
        os.execvpe(argv[0], argv, attach_with.env)
    except OSError as exc:
        from legion.errors import LegionError

        raise LegionError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None


def _workers_of(bus: Bus, agent: Agent) -> Any:
    """The worker manager of the agent's project, found where the bus says it lives."""
    from legion.backends import open_backends, open_workers
    from legion.bus.sessions import project_channel_name
    from legion.config import load_project

    root = bus.projects().get(agent.project)
    if root is None:
        raise InputError(f"the bus does not know where project {agent.project!r} lives")
    project = load_project(root)
    there = project_channel_name(project, bus)
    if there != agent.project:  # another project took its folder: its sessions are not ours
        raise InputError(
            f"project {agent.project!r} no longer lives at {root} (project {there!r} does)"
        )
    return open_workers(project, open_backends(project))


def archive(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="The agent, as in a mention.")],
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Hide an agent from `legion agents` and the TUI (its messages stay). It comes back by
    itself when it is started or prompted again."""
    from legion.bus import actions

    bus = _open_bus()
    speaker = _speaker(ctx, bus)
    archived = actions.archive(bus, speaker.agent, _target(bus, speaker, agent))
    if as_json:
        common.print_json(agent_json(archived))
        return
    common.echo(f"@{archived.address}: archived")
