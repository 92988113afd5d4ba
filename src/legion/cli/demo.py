"""`legion demo`: the swarm, end to end, on a throwaway repository."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from legion.errors import InputError, LegionError
from legion.plugins import DEFAULT_RUNTIME, RUNTIMES, runtime_aliases, runtime_names

if TYPE_CHECKING:
    from legion.demo.run import DemoResult, IssueSummary


def demo(
    directory: Annotated[
        Path | None,
        typer.Option("--dir", help="Where to create the demo (default: a new temporary folder)."),
    ] = None,
    issues: Annotated[
        int | None, typer.Option(min=1, max=5, help="How many issues to run (default: 3).")
    ] = None,
    mode: Annotated[str, typer.Option(help="Controller mode: auto or llm.")] = "auto",
    real: Annotated[
        bool,
        typer.Option(
            "--real",
            help="Use each CLI's real API instead of the scripted model: "
            + ", ".join(
                f"{plugin.demo.api}'s ({plugin.secret_variables[0]})"
                for plugin in RUNTIMES
                if plugin.demo is not None and plugin.secret_variables
            )
            + ".",
        ),
    ] = False,
    runtime: Annotated[
        str,
        typer.Option(
            help=f"The agent CLI: {', '.join(runtime_names())} (every session) or mixed "
            "(Codex implementers, Claude Code for the other roles)."
        ),
    ] = DEFAULT_RUNTIME,
    timeout: Annotated[float, typer.Option(help="Give up after this many seconds.")] = 600.0,
    hosts: Annotated[
        int,
        typer.Option(
            min=1,
            max=5,
            help="Run it on a fleet of this many hosts on this machine, on PostgreSQL, and "
            "kill one mid-work: its issue moves to another host.",
        ),
    ] = 1,
    store: Annotated[
        str | None,
        typer.Option(
            help="With --hosts: the PostgreSQL store (postgresql://…); default: a private "
            "server in the demo folder (needs PostgreSQL's initdb)."
        ),
    ] = None,
    web: Annotated[
        bool,
        typer.Option(
            "--web",
            help="Serve the web view while it runs (a link that logs in is printed), and "
            "after, until Ctrl-C.",
        ),
    ] = False,
    epic: Annotated[
        bool,
        typer.Option(
            "--epic",
            help="Run one epic instead of --issues: its architect splits it into two issues, "
            "the second blocked by the first, and it closes once both are Done.",
        ),
    ] = False,
) -> None:
    """Run the whole swarm on a throwaway repository: every issue from Todo to Done.

    Ctrl-C (or SIGTERM) stops it at once: it cleans up and exits 130 (143)."""
    from legion.core.suggest import did_you_mean
    from legion.demo.run import DEMO_ISSUE_COUNT, RUNTIME_CHOICES, run_demo

    if mode not in ("auto", "llm"):
        hint = did_you_mean(mode, ("auto", "llm"))
        raise InputError(f"unknown controller mode {mode!r} (known: auto, llm){hint}")
    runtime = runtime_aliases().get(runtime, runtime)
    if runtime not in RUNTIME_CHOICES:
        known = ", ".join(RUNTIME_CHOICES)
        hint = did_you_mean(runtime, RUNTIME_CHOICES)
        raise InputError(f"unknown runtime {runtime!r} (known: {known}){hint}")
    if not timeout > 0 or timeout == float("inf"):
        raise InputError(f"--timeout must be a number of seconds above 0, not {timeout:g}")
    if epic and issues is not None:
        raise InputError("--epic runs one epic of two issues: not with --issues")
    count = DEMO_ISSUE_COUNT if issues is None else issues
    folder = None if directory is None else _checked_folder(directory)
    if hosts > 1 or store is not None:
        if epic:
            raise InputError("--epic runs on one host: not with --hosts or --store")
        if web:
            raise InputError("--web serves the demo on one host: not with --hosts or --store")
        _fleet_demo(folder, hosts, count, mode, real, runtime, store, timeout)
        return

    def report(result: DemoResult) -> None:
        _report(result, mode, runtime, real, timeout)
        if web:
            _serve_on(result)

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        run_demo(
            folder,
            issues=count,
            mode=mode,
            real=real,
            timeout=timeout,
            say=typer.echo,
            runtime=runtime,
            web=web,
            then=report,
            epic=epic,
        )
    except _Terminated:
        typer.echo("legion: the demo was interrupted (SIGTERM) before the swarm ran", err=True)
        raise typer.Exit(128 + signal.SIGTERM) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def _serve_on(result: DemoResult) -> None:
    """After a demo that went well: the web view stays up until Ctrl-C (or SIGTERM)."""
    import threading

    typer.echo("")
    typer.echo("The web view stays up to look around: Ctrl-C stops it.")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        typer.echo(f"Web view stopped. The demo's files stay in {result.folder}.")


def _fleet_demo(
    folder: Path | None,
    hosts: int,
    issues: int,
    mode: str,
    real: bool,
    runtime: str,
    store: str | None,
    timeout: float,
) -> None:
    """`legion demo --hosts N`: `legion.demo.fleet`."""
    from legion.demo.fleet import check_store, run_fleet_demo
    from legion.demo.run import _check_prerequisites, _make_folder

    if hosts < 2:
        raise InputError("--store goes with --hosts N (2 or more): the demo on a fleet")
    if real:
        raise InputError("--hosts runs on the scripted model only: no --real")
    if store is not None:
        check_store(store)
    _check_prerequisites(runtime, False)
    made = _make_folder(folder)
    previous = signal.signal(signal.SIGTERM, _terminate)  # stops as Ctrl-C does: cleaned up
    try:
        result = run_fleet_demo(
            made,
            hosts=hosts,
            issues=issues,
            mode=mode,
            store=store,
            timeout=timeout,
            say=typer.echo,
            runtime=runtime,
        )
    except KeyboardInterrupt as exc:
        how = signal.SIGTERM if isinstance(exc, _Terminated) else signal.SIGINT
        typer.echo("legion: the demo was interrupted; its hosts are stopped", err=True)
        raise typer.Exit(128 + how) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    done = [issue for issue, status in result.statuses.items() if status == "Done"]
    typer.echo("")
    typer.echo(f"{len(done)} of {len(result.statuses)} issues Done in {result.seconds:.0f} s.")
    for issue, ran in result.hosts_of.items():
        typer.echo(f"  {issue}: {result.statuses.get(issue, '?')}, ran on {', '.join(ran) or '-'}")
    if result.killed is not None:
        moved = ", ".join(result.moved) or "none yet"
        typer.echo(f"Host {result.killed} was killed mid-work; moved to another host: {moved}.")
    typer.echo(f"Files: {result.folder}   (each host's in hosts/<name>/)")
    typer.echo(f"Remove them all with: rm -rf {shlex.quote(str(result.folder))}")
    if result.interrupted is not None:
        typer.echo("legion: the demo was interrupted; its hosts are stopped", err=True)
        raise typer.Exit(128 + result.interrupted)
    if len(done) != len(result.statuses):
        raise LegionError(f"the demo on {hosts} hosts ran out of time after {timeout:g} s")


def _report(result: DemoResult, mode: str, runtime: str, real: bool, timeout: float) -> None:
    """The closing lines: the figures, where the files are, what to run next (as it runs from
    the user's shell), and how it ended."""
    from legion.config.paths import STATE_HOME_ENV
    from legion.demo.run import demo_state_home, issues_text

    folder = result.folder
    legion = legion_command()
    # The demo's own bus and trust: every command below needs it to see the demo's.
    own_state = f"{STATE_HOME_ENV}={shlex.quote(str(demo_state_home(folder)))}"
    done = [issue for issue, status in result.statuses.items() if status == "Done"]
    typer.echo("")
    typer.echo(
        f"{len(done)} of {issues_text(len(result.statuses))} Done in {result.seconds:.0f} s "
        f"({mode} mode, {runtime})."
    )
    typer.echo("")
    for line in summary_table(result.issues):
        typer.echo(line)
    typer.echo("")
    if not real:
        typer.echo(
            f"Model requests (scripted): {result.requests}, of which the controller made "
            f"{result.controller_requests}."
        )
    for kept in result.kept_workspaces:
        typer.echo(f"Kept a workspace: {kept}")
    repo = folder / "repo"
    typer.echo(f"Files: {folder}")
    typer.echo(f"  repo:        {repo}")
    state = repo / ".legion" / "state"
    typer.echo(f"  state:       {state}   (database, daemon log)")
    # Each session's own CLI home: its transcript (Claude Code) or rollouts (Codex).
    from legion.runtime.homes import CLI_FOLDER

    typer.echo(f"  sessions:    {state / CLI_FOLDER}   (each session's home and transcript)")
    typer.echo(f"  bus:         {demo_state_home(folder)}   (the demo's own: its agents, messages)")
    for issue, screen in result.screens.items():
        typer.echo(f"  {issue}'s last screen: {screen}")
    first = next(iter(result.statuses), None)
    typer.echo("Look around (every command as it runs from here):")
    typer.echo(f"  cd {shlex.quote(str(repo))}")
    typer.echo(f"  export {own_state}   (the demo's own bus, not your machine's)")
    typer.echo(f"  {legion} issue list")
    if first is not None:
        typer.echo(f"  {legion} issue show {first}   (its comments, pull request and tokens)")
    typer.echo(f"  {legion} agents   (its sessions, on its bus)")
    typer.echo(f"  {legion} log")
    typer.echo(f"Remove them all with: rm -rf {shlex.quote(str(folder))}")
    if result.interrupted is not None:
        name = "Ctrl-C" if result.interrupted == signal.SIGINT else "SIGTERM"
        typer.echo(
            f"legion: the demo was interrupted ({name}) after {result.seconds:.0f} s; its "
            "sessions, tmux server and model server are stopped",
            err=True,
        )
        raise typer.Exit(128 + result.interrupted)
    if result.paused:
        raise LegionError(f"the demo stopped: {_demo_advice(result.paused, result.screens)}")
    if len(done) != len(result.statuses):
        raise LegionError(
            f"the demo ran out of time after {timeout:g} s with "
            f"{issues_text(len(result.statuses) - len(done))} not Done; see `{own_state} "
            f"{legion} log` in {repo}"
        )


class _Terminated(KeyboardInterrupt):
    """SIGTERM before the swarm runs (while Claude Code installs): stop as Ctrl-C would."""


def _terminate(signum: int, frame: object) -> None:
    raise _Terminated()


def _checked_folder(directory: Path) -> Path:
    """`--dir`: a new or empty folder; anything else is bad input (exit 2), not a crash."""
    folder = directory.expanduser().resolve()
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{folder} is not a folder: choose a new folder for the demo")
    if folder.exists() and any(folder.iterdir()):
        raise InputError(f"{folder} is not empty: choose a new folder for the demo")
    parent = next((p for p in folder.parents if p.exists()), None)
    if parent is not None and not (parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)):
        raise InputError(f"cannot create {folder}: {parent} is not a writable folder")
    return folder


def legion_command() -> str:
    """How the user runs this `legion` from their shell: `legion` when that is the one on
    PATH, else the running script's absolute path (after the Quickstart `legion` is not on
    PATH: `.venv/bin/legion` is)."""
    script = Path(sys.argv[0])
    if script.name == "__main__.py":  # `python -m legion`
        return f"{shlex.quote(sys.executable)} -m legion"
    on_path = shutil.which("legion")
    resolved = shutil.which(str(script)) or str(script)
    if on_path is not None and os.path.realpath(on_path) == os.path.realpath(resolved):
        return "legion"
    return shlex.quote(os.path.abspath(resolved))


def _demo_advice(paused: str, screens: dict[str, Path]) -> str:
    """The pause line, with the advice that works after the demo: its tmux server is gone (no
    `legion peek`), and a new demo, not `legion start`, is the way to try again."""
    cause = paused.split(". Fix that", 1)[0]
    for issue, screen in screens.items():
        cause = cause.replace(
            f"`legion peek {issue}` shows its last screen", f"last screen: {screen}"
        )
    cause = re.sub(r" \(`legion peek [^`]*` shows its last screen\)", "", cause)
    return (
        f"{cause}. Fix that (`{legion_command()} doctor` checks the setup), then run the demo again"
    )


def summary_table(issues: Sequence[IssueSummary]) -> list[str]:
    """One row per issue: its workers in order, its time, its model requests, its PR."""
    header = ("issue", "status", "workers", "time", "requests", "PR")
    rows = [header] + [
        (
            s.identifier,
            s.status,
            " ".join(s.modes) or "-",
            "-" if s.seconds is None else f"{s.seconds:.0f} s",
            "-" if s.requests is None else str(s.requests),
            s.pr,
        )
        for s in issues
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]  # fmt: skip
