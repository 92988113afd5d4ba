"""`legion say | messages | agents | task …`: the event bus, for agents and the human alike."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from legion.cli import common
from legion.core.text import for_display
from legion.errors import InputError

if TYPE_CHECKING:  # the bus is imported by its commands only: other commands start faster
    from legion.bus.model import Agent, Channel, Message, Task
    from legion.bus.sessions import Speaker
    from legion.bus.store import Bus

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
    from legion.bus.store import open_bus

    return open_bus(os.environ)


def _speaker(ctx: typer.Context, bus: Bus) -> Speaker:
    from legion.bus.sessions import identify

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
        "created_at": message.created_at,
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
        "created_at": agent.created_at,
        "updated_at": agent.updated_at,
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
        "completed_at": task.completed_at,
        "created_at": task.created_at,
    }


def _short(address: str, channel: Channel) -> str:
    """An address as written in `channel`: the name alone on the same branch, branch/name in
    the same project."""
    if address.startswith(f"{channel}/"):
        return address.removeprefix(f"{channel}/")
    return address.removeprefix(f"{channel.project}/")


def message_lines(message: Message) -> str:
    when = message.created_at[:19].replace("T", " ")
    sender = _short(message.sender, message.channel)
    first, *rest = for_display(message.body).split("\n")
    head = f"#{message.seq} {when} {message.channel} @{sender}: {first}"
    return "\n".join([head, *(f"    {line}" for line in rest)])


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
    from legion.bus.store import clean_message_body, clean_message_id

    body = clean_message_body(_read_text(text))
    wanted = _parse_channel(channel)
    chosen_id = clean_message_id(message_id) if message_id is not None else None
    bus = _open_bus()
    speaker = _speaker(ctx, bus)
    posted = bus.post(speaker.agent.id, wanted or speaker.channel(), body, message_id=chosen_id)
    message = posted.message
    wakes = [agent.address for agent in posted.recipients]
    if posted.created and posted.recipients:
        _wake_daemon(ctx)
    if as_json:
        common.print_json(
            {"message": message_json(message), "wakes": wakes, "created": posted.created}
        )
        return
    verb = "posted" if posted.created else "already posted"
    woken = ", ".join(f"@{_short(a, message.channel)}" for a in wakes) or "nobody"
    typer.echo(f"{verb} #{message.seq} in {message.channel} (id {message.id}); wakes {woken}")


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
            typer.echo(f"No {'unread ' if unread else ''}messages{_in(where)}.")
        return
    _follow(bus, fetch, shown[-1].seq if shown else 0, me, as_json)


def _in(channel: Channel | None) -> str:
    return "" if channel is None else f" in {channel}"


def _show(found: Iterable[Message], as_json: bool) -> None:
    for message in found:
        if as_json:
            line = json.dumps(message_json(message), ensure_ascii=False)
        else:
            line = message_lines(message)
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
    """Every agent on the bus (all projects on this machine): its address, role and status."""
    found = _open_bus().agents(include_archived=include_archived)
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
            f"@{agent.address}",
            agent.role.value,
            agent.status.value,
            str(agent.spawn_instance),
            agent.session_id or "-",
            agent.updated_at[:19].replace("T", " "),
        )
    common.console().print(table)


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
    where = wanted or _speaker(ctx, bus).channel()
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
    typer.echo(f"task {task.id} added in {where}{to}")


@task_app.command("list", epilog=common.example("legion task list", "legion task list --json"))
def task_list(
    ctx: typer.Context,
    channel: Annotated[str | None, ChannelOption] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """The channel's tasks as a tree: [x] done, [>] assigned, [ ] pending."""
    wanted = _parse_channel(channel)
    bus = _open_bus()
    where = wanted or _speaker(ctx, bus).channel()
    found = bus.tasks(where)
    addresses = _addresses(bus) if found else {}
    if as_json:
        common.print_json([task_json(task, addresses) for task in found])
        return
    if not found:
        typer.echo(f"No tasks in {where}.")
        return
    for depth, task in _tree(found):
        mark = {"done": "[x]", "assigned": "[>]", "pending": "[ ]"}[task.state.value]
        who = task.assigned_agent_id
        suffix = "" if who is None else f" (@{_short(addresses.get(who, '?'), where)})"
        typer.echo(f"{'    ' * depth}{mark} {task.id} {for_display(task.title)}{suffix}")


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
    typer.echo(f"task {task.id} done ({for_display(task.title)})")
