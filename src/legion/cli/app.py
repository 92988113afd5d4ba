"""The command tree."""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from typer._click import Context, HelpFormatter
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command_name
from typer.models import CommandInfo

from legion import __version__
from legion.cli import (
    agents,
    bus,
    common,
    completion,
    config_commands,
    demo,
    doctor,
    events,
    fleet,
    init,
    issues,
    oracle,
    project,
    prs,
    render,
    start_stop,
    swarm,
    tasks,
    web,
    workers,
    workspaces,
)
from legion.errors import InputError

# `legion --help` lists the commands in these sections, in this order (as gh does); a test
# checks every command is in exactly one. A command added without a section is listed under
# "Other commands" rather than hidden.
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Getting started",
        ("init", "demo", "doctor", "config", "trust", "project", "skills", "help", "completion"),
    ),
    ("Issues and pull requests", ("issue", "pr", "state", "workspace")),
    (
        "The swarm",
        (
            "start",
            "stop",
            "status",
            "reconcile",
            "log",
            "why",
            "usage",
            "workers",
            "peek",
            "dispatch",
            "resume",
            "answer",
            "feedback",
        ),
    ),
    (
        "Agents and the bus",
        ("tui", "web", "say", "messages", "agents", "events", "attach", "kill", "archive"),
    ),
    ("The fleet", ("hosts", "host")),
    (
        "Commands the agents run (in their sessions; rarely by hand)",
        ("ask", "reply", "complete", "escalate", "task"),
    ),
)
OTHER_SECTION = "Other commands"


class SectionedGroup(TyperGroup):
    """The root group: its help lists the commands by section (`SECTIONS`), one column."""

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        shown = {}
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                shown[name] = command
        if not shown:
            return
        placed = {name for _, names in SECTIONS for name in names}
        sections = [(title, [n for n in names if n in shown]) for title, names in SECTIONS]
        sections.append((OTHER_SECTION, [n for n in shown if n not in placed]))
        width = max(len(name) for name in shown)
        limit = formatter.width - 6 - width
        for title, names in sections:
            if names:
                rows = [(n.ljust(width), shown[n].get_short_help_str(limit)) for n in names]
                with formatter.section(title):
                    formatter.write_dl(rows)


app = typer.Typer(
    name="legion",
    cls=SectionedGroup,
    help="Runs a swarm of coding agents through your issue tracker.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=common.example(
        "legion init",
        'legion issue create "Add a --verbose flag" --body "Print each step."',
        "legion state",
    ),
)

# Each command's help ends with an example (a test checks every command has one).
EXAMPLES: dict[str, tuple[str, ...]] = {
    "demo": ("legion demo --issues 1 --dir /tmp/legion-demo",),
    "start": ("legion start --dry-run", "legion start --mode auto --tick 30"),
    "stop": ("legion stop --all",),
    "status": ("legion status --json",),
    "reconcile": ("legion reconcile --dry-run",),
    "log": ("legion log -n 50 --issue LEG-3", "legion log --replay --since 2026-11-01"),
    "why": ("legion why LEG-3", "legion why LEG-3 --json"),
    "usage": ("legion usage --issue LEG-3", "legion usage --since 2026-11-01 --json"),
    "hosts": ("legion hosts", "legion hosts --json"),
    "feedback": ('legion feedback LEG-3 "Use UTC."',),
    "dispatch": ("legion dispatch LEG-7 implement",),
    "resume": ('legion resume LEG-7 implement --prompt "Also handle an empty list."',),
    "answer": ("legion answer LEG-7 2", 'legion answer LEG-7 "UTC, always"'),
    "workers": ("legion workers --json",),
    "peek": ("legion peek LEG-7 -n 20",),
    "say": ('legion say "@implement the API spec is in docs/api.md"', 'legion say "@legion done?"'),
    "messages": ("legion messages --unread", "legion messages --channel app/main --follow"),
    "agents": ("legion agents --all --json",),
    "events": ("legion events --agent legion/LEG-7/implement", "legion events --follow --json"),
    "ask": ('legion ask "Should the cache be per user or global?"',),
    "reply": ('legion reply 5f0c9e1a-… "Per user."',),
    "complete": ('legion complete "Plan posted: 4 steps"',),
    "kill": ("legion kill legion/LEG-7/implement", "legion kill implement -f"),
    "archive": ("legion archive legion/LEG-7/review",),
    "attach": ("legion attach LEG-7", "legion attach legion/LEG-7/implement"),
}


def _example(name: str) -> str | None:
    examples = EXAMPLES.get(name)
    return common.example(*examples) if examples else None


app.add_typer(issues.app, name="issue")
app.add_typer(prs.app, name="pr")
app.add_typer(workspaces.app, name="workspace")
app.add_typer(project.app, name="project")
app.command("demo", epilog=_example("demo"))(demo.demo)
app.command("doctor", epilog=common.example("legion doctor", "legion doctor --install --json"))(
    doctor.doctor
)
for command in (
    start_stop.start,
    start_stop.stop,
    swarm.status,
    swarm.reconcile,
    swarm.log,
    swarm.why,
    swarm.usage,
    swarm.feedback,
    workers.dispatch,
    workers.resume,
    workers.answer,
    workers.workers,
    workers.peek,
    bus.say,
    bus.ask,
    bus.reply,
    bus.complete,
    bus.messages,
    agents.agents,
    events.events,
    agents.kill,
    agents.archive,
    agents.attach,
    fleet.hosts,
):
    app.command(epilog=_example(command.__name__))(command)
app.add_typer(tasks.task_app, name="task")
app.add_typer(fleet.host_app, name="host")
app.add_typer(web.web_app, name="web")
skills_app = typer.Typer(
    help="Legion's skills (for Claude Code and Codex).",
    no_args_is_help=True,
    epilog=common.example("legion skills install"),
)
skills_app.command("install", epilog=common.example("legion skills install --scope project"))(
    swarm.skills_install
)
app.add_typer(skills_app, name="skills")
app.command(
    "escalate",
    epilog=common.example(
        "legion escalate LEG-7", 'legion escalate LEG-7 --reason "The plan leaves the format open."'
    ),
)(oracle.escalate)


@app.command("tui", epilog=common.example("legion tui", "legion"))
def tui(ctx: typer.Context) -> None:
    """The control centre: every project's channels and agents, the questions waiting for
    you, each project's board, an agent's screen, the action log. `legion` alone on a
    terminal opens it too. Closing it stops nothing.

    Keys: F2 chat, F3 inbox, F4 board, F5 peek, F6 log, Ctrl+Q quit (docs/tui.md)."""
    from legion.tui import run_tui

    code = run_tui(os.environ, common.repo_path(ctx))
    if code:
        raise typer.Exit(code)


def _help_words(ctx: typer.Context, incomplete: str) -> list[str]:
    """What `legion help …<TAB>` completes: the commands (or the subcommands of the one
    named) that start with what was typed."""
    from typer.main import get_command

    command: Any = get_command(app)
    for word in ctx.params.get("words") or ():
        command = command.commands.get(word) if isinstance(command, TyperGroup) else None
        if command is None:
            return []
    if not isinstance(command, TyperGroup):
        return []
    return [name for name in command.commands if name.startswith(incomplete)]


app.command(
    "completion",
    epilog=common.example('eval "$(legion completion bash)"', "legion completion fish | source"),
)(completion.completion)


@app.command(
    "help",
    epilog=common.example("legion help issue create", "legion help"),
)
def help_command(
    words: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[COMMAND [SUBCOMMAND]]",
            help="A command, and a subcommand of it.",
            autocompletion=_help_words,
        ),
    ] = None,
) -> None:
    """Show a command's help: `legion help issue create` is `legion issue create --help`;
    `legion help` alone is `legion --help`."""
    from typer._click.core import Context as ClickContext
    from typer.main import get_command

    command = get_command(app)  # the whole tree, whatever `app_for` kept
    ctx = ClickContext(command, info_name="legion", **command.context_settings)
    path = "legion"
    for word in words or ():
        if not isinstance(command, TyperGroup):
            raise InputError(f"`{path}` has no subcommands (see `{path} --help`)")
        sub = command.get_command(ctx, word)
        if sub is None or sub.hidden:
            names = [name for name, cmd in command.commands.items() if not cmd.hidden]
            raise InputError(
                f"no command `{path} {word}`{common.did_you_mean(word, names)} "
                f"(see `{path} --help`)"
            )
        command, path = sub, f"{path} {word}"
        ctx = ClickContext(command, info_name=word, parent=ctx, **command.context_settings)
    typer.echo(ctx.get_help())


def _version(value: bool) -> None:
    if value:
        typer.echo(f"legion {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    repo: Annotated[
        Path | None,
        typer.Option(
            "--repo",
            "-C",
            envvar="LEGION_REPO",
            help="The project's repository (default: the current directory).",
            file_okay=False,
            exists=True,
        ),
    ] = None,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="Print only results (identifiers, tables, values, JSON): no hints, no notes "
            "that a list is empty. Errors and warnings still go to stderr.",
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Also print, on stderr, where the project, its settings and its state come "
            "from, and how long the command took.",
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", "-V", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    if quiet and verbose:
        raise InputError("give -q (--quiet) or -v (--verbose), not both")
    level = common.QUIET if quiet else common.VERBOSE if verbose else common.NORMAL
    ctx.obj = {"repo": repo, "verbosity": level}
    if verbose:
        import time

        started = time.monotonic()
        ctx.call_on_close(lambda: common.debug(f"took {time.monotonic() - started:.2f} s"))


app.command(
    epilog=common.example(
        "legion init --key ENG",
        "legion init --tracker linear --team ENG --forge github --repo acme/widgets",
    )
)(init.init)


@app.command(epilog=common.example("legion state", "legion state --json"))
def state(
    ctx: typer.Context,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Every issue's observed state and the action the decision table suggests."""
    from rich.text import Text

    from legion.backends import open_workers
    from legion.core.text import for_display
    from legion.reconcile.observe import observe
    from legion.trackers.splits import Splits

    project, backends = common.backends(ctx)
    snapshot = observe(
        project.settings.project_id,
        backends.tracker,
        backends.forge,
        open_workers(project, backends).roster,
        opt_in=project.settings.backlog_opt_in_labels,
        epic_children=Splits(backends.db).epic_children(),
    )
    if as_json:
        common.print_json(render.state_json(snapshot))
        return

    out = common.console()
    if not snapshot.issues:
        common.info('No issues yet: `legion issue create "Title"` adds one.')
    else:
        common.print_table(render.state_table(snapshot, out.width))
    for warning in snapshot.warnings:
        out.print(Text.assemble(("warning:", "yellow"), " ", for_display(warning)))


app.add_typer(config_commands.app, name="config")
app.command("trust", epilog=common.example("legion trust", "legion trust --json"))(
    config_commands.trust_config
)


class LegionCommand(TyperCommand):
    """Every leaf command: its usage line names a required argument in capitals (`TITLE`),
    not as typer writes it (`{title}`), which reads as a template left unfilled."""

    def collect_usage_pieces(self, ctx: Context) -> list[str]:
        return [
            re.sub(r"\{([^{}]+)\}", lambda found: found.group(1).upper(), piece)
            for piece in super().collect_usage_pieces(ctx)
        ]


def _use_legion_command(tree: typer.Typer) -> None:
    """Make every leaf command of `tree` (its groups' too) a `LegionCommand`."""
    for info in tree.registered_commands:
        if info.cls in (None, TyperCommand):  # typer's default, not a class of the command's own
            info.cls = LegionCommand
    for group in tree.registered_groups:
        if group.typer_instance is not None:
            _use_legion_command(group.typer_instance)


_use_legion_command(app)


def _command_name(info: CommandInfo) -> str | None:
    if info.name:
        return info.name
    return get_command_name(info.callback.__name__) if info.callback else None


ROOT_FLAGS = frozenset({"-q", "--quiet", "-v", "--verbose"})


def app_for(args: Sequence[str]) -> typer.Typer:
    """The command tree with only the command `args` name, when they name one: turning a
    command's signature into its options is most of a short command's start-up (about a
    third of `legion issue show`), and workers, hooks and scripts run many short commands.
    Within a group (`legion issue label`), only the subcommand named is kept, likewise.
    Anything else (`--help`, no command, a name that is not a command) gets the whole tree
    (or group), so its help, its suggestions and its errors are those of the whole tree."""
    rest = list(args)
    while rest:  # the root's own options
        if rest[0] in ("--repo", "-C"):
            rest = rest[2:]
        elif rest[0].startswith("--repo=") or rest[0] in ROOT_FLAGS:
            rest = rest[1:]
        else:
            break
    return _pruned(app, rest)


def _pruned(tree: typer.Typer, words: Sequence[str]) -> typer.Typer:
    """`tree` with only the command or group `words[0]` names, that group pruned to
    `words[1:]` in turn; `tree` itself when `words` names none of its commands."""
    if not words or words[0].startswith("-"):
        return tree
    word = words[0]
    commands = [info for info in tree.registered_commands if _command_name(info) == word]
    groups = [info for info in tree.registered_groups if info.name == word]
    if len(commands) + len(groups) != 1:
        return tree
    if groups and groups[0].typer_instance is not None:
        group = copy.copy(groups[0])
        group.typer_instance = _pruned(groups[0].typer_instance, words[1:])
        groups = [group]
    pruned = copy.copy(tree)
    pruned.registered_commands = commands
    pruned.registered_groups = groups
    return pruned
