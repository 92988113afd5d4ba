"""`legion task add | list | done`: a channel's tasks, a tree, each pending, assigned or done."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

from legion.cli import bus_common, common
from legion.cli.bus_common import ChannelOption
from legion.core.stamps import utc_stamp
from legion.errors import InputError

if TYPE_CHECKING:  # the bus is imported by its commands only: other commands start faster
    from legion.bus.model import Task

task_app = typer.Typer(
    help="The channel's tasks: a tree, each pending, assigned or done.",
    no_args_is_help=True,
    epilog=common.example('legion task add "Write the parser"', "legion task list"),
)


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


def _task_id(text: str) -> int:
    digits = text.strip().removeprefix("#")
    if not digits.isdigit() or not 0 < int(digits) < 2**63:
        raise InputError(f"invalid task id {text!r}: a number, e.g. 3")
    return int(digits)


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
    wanted = bus_common.parse_channel(channel)
    bus = bus_common.open_bus()
    where = bus_common.known(ctx, bus, wanted) or bus_common.speaker_of(ctx, bus).channel()
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
    to = "" if assignee is None else f", assigned to @{bus_common.short(assignee.address, where)}"
    common.echo(f"task {task.id} added in {where}{to}")


@task_app.command("list", epilog=common.example("legion task list", "legion task list --json"))
def task_list(
    ctx: typer.Context,
    channel: Annotated[str | None, ChannelOption] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """The channel's tasks as a tree: [x] done, [>] assigned, [ ] pending."""
    wanted = bus_common.parse_channel(channel)
    bus = bus_common.open_bus()
    where = bus_common.known(ctx, bus, wanted) or bus_common.speaker_of(ctx, bus).channel()
    found = bus.tasks(where)
    addresses = bus_common.addresses(bus) if found else {}
    if as_json:
        common.print_json([task_json(task, addresses) for task in found])
        return
    if not found:
        common.echo(f"No tasks in {where}.")
        return
    for depth, task in _tree(found):
        mark = {"done": "[x]", "assigned": "[>]", "pending": "[ ]"}[task.state.value]
        who = task.assigned_agent_id
        suffix = "" if who is None else f" (@{bus_common.short(addresses.get(who, '?'), where)})"
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
    bus = bus_common.open_bus()
    task = bus.complete_task(number)
    if as_json:
        common.print_json(task_json(task, bus_common.addresses(bus)))
        return
    common.echo(f"task {task.id} done ({task.title})")
