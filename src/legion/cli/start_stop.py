"""`legion start | stop`: the project's daemon started (in the background, or in the
foreground) after a check of what it needs, and stopped, its sessions closed or kept."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from legion.cli import common, render
from legion.config import Project
from legion.daemon_link import running_pid, start_refusal
from legion.errors import ConfigError, LegionError

if TYPE_CHECKING:
    from legion.daemon import DaemonConfig
    from legion.services.start_plan import StartPlan
    from legion.services.swarm_status import RunningSession
    from legion.sessions.workers import WorkerManager


def _preflight(project: Project) -> None:
    """Check what the swarm needs: tmux, and each agent CLI the roles run on, with a credential
    to reach a model (a swarm without one would sit at its CLI's login screen, looking busy).
    Each session's CLI home, with Legion's skills, is made as it starts (`legion.runtime.homes`).
    And the daemon's log level: refused here, not only in the background daemon's log."""
    from legion.backends import open_backends, open_workers
    from legion.diagnostics.log import level_from

    level_from(os.environ)
    workers = open_workers(project, open_backends(project))
    workers.windows.check_tmux()
    for runtime in workers.runtimes.in_use():
        runtime.executable()
        refusal = runtime.no_credential(os.environ)
        if refusal is not None:
            raise ConfigError(refusal)


def _plan(project: Project) -> StartPlan:
    """What a daemon started now would start first, and the bounds on spending."""
    from legion.backends import open_backends, open_workers
    from legion.services.start_plan import plan_start

    backends = open_backends(project)
    try:
        workers = open_workers(project, backends)
        return plan_start(project, backends, workers, project.settings.controller_mode)
    finally:
        backends.db.close()


def _say_plan(project: Project, plan: StartPlan, *, now: bool) -> None:
    """The plan for people: what starts, what waits and why, and the bounds on spending."""
    starts = "starts" if now else "would start"
    typer.echo(f"Legion {starts} for {project.root} ({plan.mode} mode):")
    if plan.controller is None:
        typer.echo("  controller: none (manual mode: workers start only by `legion dispatch`)")
    else:
        typer.echo(f"  controller: a {plan.controller} session, in tmux window `main`")
    if plan.mode == "llm":
        typer.echo("  workers:    the controller chooses; the decision table suggests:")
    elif plan.mode == "auto":
        typer.echo("  workers:    its first pass:")
    for o in plan.first_pass:
        common.echo(f"    {o.issue}: {o.action}: {o.kind}" + (f" ({o.detail})" if o.detail else ""))
    if plan.mode != "manual" and not plan.first_pass:
        typer.echo("    none: no issue is ready (`legion state` shows each issue's next step)")
    typer.echo(
        f"  bounds on spending (set in {plan.config} or LEGION_* variables; "
        "`legion config` shows where each comes from):"
    )
    for bound in plan.bounds:
        value = "unlimited" if bound.value is None else f"{bound.value:,}"
        where = render.source_text(bound.source, bound.env_var)
        common.echo(f"    {bound.name:18} {value:>11}  ({where}): {bound.meaning}")


def _say_dry_run(project: Project, plan: StartPlan, as_json: bool) -> None:
    if as_json:
        common.print_json({"root": str(project.root), "dry_run": True, "plan": plan.to_json()})
        return
    _say_plan(project, plan, now=False)
    typer.echo("Nothing started (--dry-run): `legion start` starts it.")


def _started(
    project: Project, pid: int, log_path: Path | None, plan: StartPlan | None
) -> dict[str, Any]:
    """What `legion start --json` prints: the daemon, its log, how to watch the swarm, and
    what it starts first (`plan`, as `--dry-run` prints it)."""
    from legion.backends import open_backends, open_workers

    session = open_workers(project, open_backends(project)).windows.session
    return {
        "root": str(project.root),
        "pid": pid,
        "mode": project.settings.controller_mode,
        "tick": project.settings.tick,
        "log": None if log_path is None else str(log_path),
        "session": session,
        "attach": common.attach_command(project.settings.tmux_socket, session),
        "plan": None if plan is None else plan.to_json(),
    }


def _run_daemon(project: Project, config: DaemonConfig) -> None:
    """The daemon, in this process, until it stops. What it logs is on stderr (`daemon.log`
    when started in the background): it quotes trackers, forges and workers, so it is escaped
    like any output."""
    from legion.daemon import Daemon
    from legion.diagnostics.log import setup

    setup()
    with common.escaped_output():
        Daemon(project, config, os.environ).run()


def start(
    ctx: typer.Context,
    foreground: Annotated[bool, typer.Option("--foreground", help="Run in this terminal.")] = False,
    mode: Annotated[
        str | None,
        typer.Option(help="Controller mode: auto, llm, or manual (workers start only by hand)."),
    ] = None,
    tick: Annotated[float | None, typer.Option(help="Seconds between ticks.")] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Say what would start and the budgets; start nothing."),
    ] = False,
    say_plan: Annotated[
        bool, typer.Option("--plan/--no-plan", hidden=True, help="Say what starts first.")
    ] = True,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Start the swarm: the daemon, the controller, and (through them) the workers.

    First says what starts now (the controller; the workers the first pass starts, and those
    the WIP limit or a budget keeps waiting) and the bounds on spending in force, with where
    to set them; --dry-run says only that. Then prints the daemon's pid, its log, and the tmux
    command that shows the swarm at work.
    """
    from legion.config import load_project
    from legion.daemon import DaemonConfig

    flags = {
        "controller_mode": None
        if mode is None
        else common.checked_option("controller_mode", mode, "option --mode"),
        "tick": None if tick is None else common.checked_option("tick", tick, "option --tick"),
    }
    project = load_project(common.repo_path(ctx), flags=flags)
    refusal = start_refusal(project)  # one runs here, or another host here shares its folders
    if refusal is not None:
        raise LegionError(refusal)
    _preflight(project)
    settings = project.settings
    plan = _plan(project) if say_plan or dry_run else None
    if dry_run:
        assert plan is not None
        _say_dry_run(project, plan, as_json)
        return
    if plan is not None and not as_json:
        _say_plan(project, plan, now=True)
    if foreground:
        config = DaemonConfig(
            mode=settings.controller_mode,
            tick=settings.tick,
            stale_after=settings.stale_after,
            restart_cooldown=settings.restart_cooldown,
            say_stop=not as_json,
        )
        info = _started(project, os.getpid(), None, plan)
        if as_json:
            common.print_json(info)
        else:
            typer.echo(f"Legion running for {project.root} ({config.mode} mode); Ctrl-C stops it")
            typer.echo(f"  watch: {info['attach']}")
        _run_daemon(project, config)
        if not as_json:
            typer.echo(f"Legion stopped (pid {os.getpid()}).")
        return
    log_path = project.state_dir / "daemon.log"
    argv = [sys.executable, "-m", "legion", "--repo", str(project.root), "start", "--foreground"]
    argv += ["--mode", settings.controller_mode, "--tick", str(settings.tick), "--no-plan"]
    from legion.files.private import open_private_binary_append

    with open_private_binary_append(log_path) as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
        )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if running_pid(project) is not None:
            info = _started(project, proc.pid, log_path, plan)
            if as_json:
                common.print_json(info)
                return
            typer.echo(
                f"Legion started for {project.root} "
                f"(pid {proc.pid}, {settings.controller_mode} mode)"
            )
            typer.echo(f"  watch:  {info['attach']}")
            typer.echo(f"  log:    {log_path}")
            typer.echo("  status: legion status   stop: legion stop")
            return
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            raise LegionError(f"the daemon exited at once: {tail[0]}")
        time.sleep(0.1)
    raise LegionError(f"the daemon did not start within 15 s; see {log_path}")


def stop(
    ctx: typer.Context,
    all_windows: Annotated[
        bool, typer.Option("--all", help="Also close the controller and worker windows.")
    ] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Stop the daemon. The controller and the workers keep running (their sessions stay
    resumable; `legion start` takes them up again) unless --all. Says what it stopped and
    what still runs."""
    from legion import daemon
    from legion.backends import open_backends, open_workers

    project = common.project(ctx)
    pid = daemon.stop(project)
    workers: WorkerManager | None = None
    running: list[RunningSession] = []
    unknown: str | None = None
    try:
        workers = open_workers(project, open_backends(project))
    except LegionError as exc:
        if all_windows:
            raise  # nothing is closed without them: said, not passed over
        unknown = str(exc)  # the daemon is stopped all the same
    else:
        running, unknown = _running(project, workers)
    closed: str | None = None
    session: str | None = None
    stopped: list[RunningSession] = []
    if workers is not None and all_windows:
        session = workers.windows.session
        # In a fleet, no process of a session may outlive this: the lease passes next.
        close = workers.close_now if workers.in_fleet else workers.windows.close_all
        if _close_and_mark(project, close):
            closed, stopped = session, running
            running, unknown = _running(project, workers)
        _hand_over(project, pid)
    if as_json:
        data: dict[str, Any] = {
            "stopped": pid is not None,
            "pid": pid,
            "closed_session": closed,
            "stopped_sessions": [r.to_json() for r in stopped],
            # None: unknown (why, in `unknown`), never "nothing runs"
            "still_running": None if unknown else [r.to_json() for r in running],
        }
        if unknown:
            data["unknown"] = unknown
        common.print_json(data)
        return
    typer.echo("Legion was not running." if pid is None else f"Legion stopped (pid {pid}).")
    if session is not None:
        names = ", ".join(r.name for r in stopped)
        typer.echo(
            (f"Closed tmux session {session}" + (f": stopped {names}." if names else "."))
            if closed
            else f"No tmux session {session} was open."
        )
    if unknown:
        common.echo(f"What still runs is unknown: {unknown}")
    elif running and workers is not None:
        names = ", ".join(r.name for r in running)
        typer.echo(
            f"Still running: {names} (tmux session {workers.windows.session}); "
            "`legion stop --all` stops them too, `legion start` takes them up again."
        )
    elif not all_windows:
        typer.echo("Nothing else runs.")


def _running(project: Project, workers: WorkerManager) -> tuple[list[RunningSession], str | None]:
    """The sessions that run, or why that is unknown (tmux did not answer)."""
    from legion.services.swarm_status import running_sessions

    try:
        return running_sessions(project, workers), None
    except LegionError as exc:
        return [], str(exc)


def _hand_over(project: Project, pid: int | None) -> None:
    """In a fleet, the lease the stopped daemon kept for its sessions passes now that they are
    closed (`legion.fleet.hosts.hand_over`)."""
    from legion.fleet.hosts import hand_over

    try:
        hand_over(project, pid)
    except LegionError as exc:  # the lease runs out by itself all the same
        typer.echo(f"legion: the leader lease was not handed over: {exc}", err=True)


def _close_and_mark(project: Project, close: Callable[[], bool]) -> bool:
    """Close the sessions, and mark what was stopped: the agents of the sessions just closed
    are read from the sessions (not running: failed, with who stopped them), not left busy.
    Whether there were sessions to close."""
    from legion.bus import open_bus
    from legion.services.agent_watch import close_and_mark

    closed: list[bool] = []

    def close_once() -> bool:
        if not closed:
            closed.append(close())
        return closed[0]

    try:
        bus = open_bus(os.environ)
        try:
            close_and_mark(project, bus, os.environ, close_once, "stopped by `legion stop --all`")
        finally:
            bus.close()
    except LegionError as exc:  # the sessions are closed all the same
        typer.echo(f"legion: the agents' statuses were not updated: {exc}", err=True)
    return close_once()
