"""`legion start | stop | status | reconcile | log | feedback`: the swarm running itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Annotated, Any

import typer

from legion.cli import common
from legion.config import Project
from legion.daemon_link import heartbeat_file, running_pid
from legion.errors import InputError, LegionError


def reconcile(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be done; do nothing.")
    ] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Carry out every mechanical action the decision table suggests, once, idempotently."""
    from legion.actionlog import ActionLog
    from legion.backends import open_workers
    from legion.reconcile import Reconciler

    project, backends = common.backends(ctx)
    workers = open_workers(project, backends)
    reconciler = Reconciler(
        project, backends.tracker, backends.forge, workers, ActionLog(backends.db)
    )
    outcomes = reconciler.run(dry_run=dry_run)
    if as_json:
        common.print_json(
            [
                {"issue": o.issue, "action": o.action, "outcome": o.outcome, "detail": o.detail}
                for o in outcomes
            ]
        )
        return
    if not outcomes:
        typer.echo("Nothing to do.")
    for o in outcomes:
        typer.echo(f"{o.issue}: {o.action}: {o.outcome}" + (f" ({o.detail})" if o.detail else ""))


def log(
    ctx: typer.Context,
    lines: Annotated[
        int, typer.Option("--lines", "-n", min=1, max=100000, help="How many entries.")
    ] = 20,
    issue: Annotated[str | None, typer.Option("--issue", "-i", help="Only this issue.")] = None,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """The action log: what Legion did, to which issue, and how it went."""
    from legion.actionlog import ActionLog
    from legion.core.model import normalize_identifier

    _, backends = common.backends(ctx)
    entries = ActionLog(backends.db).tail(lines, normalize_identifier(issue) if issue else None)
    if as_json:
        common.print_json([entry.to_json() for entry in entries])
        return
    for entry in entries:
        detail = f"  {entry.detail}" if entry.detail else ""
        typer.echo(f"{entry.at}  {entry.issue:8}  {entry.action}: {entry.outcome}{detail}")


def feedback(
    ctx: typer.Context,
    issue: Annotated[str, typer.Argument(help="The issue waiting for you.")],
    text: Annotated[str, typer.Argument(help="Your answer.")],
) -> None:
    """Answer a question a worker escalated: comments and adds user-feedback-given."""
    from legion.core.model import Label

    project, backends = common.backends(ctx)
    comment = backends.tracker.add_comment(issue, text, author=common.default_author())
    backends.tracker.update_labels(comment.issue, add=[Label.USER_FEEDBACK_GIVEN.value])
    common.changed(project)
    typer.echo(f"{comment.issue}: answer recorded; Legion relays it to the worker")


def _preflight(project: Project) -> list[str]:
    """Check what the swarm needs, and install the skills where Claude Code finds them."""
    from legion.backends import open_backends, open_workers
    from legion.runtime.claude_paths import config_dir

    workers = open_workers(project, open_backends(project))
    workers.tmux.run("-V")
    workers.claude.executable()
    # The controller runs in the repository: Claude Code must be set up and trust it.
    workers.claude.prepare(os.environ, project.root)
    notes: list[str] = []
    try:
        from legion import skills
    except ImportError:
        return notes
    target = config_dir(os.environ) / "skills"
    if not skills.installed(target):
        skills.install(target)
        notes.append(f"installed the Legion skills in {target}")
    return notes


def start(
    ctx: typer.Context,
    foreground: Annotated[bool, typer.Option("--foreground", help="Run in this terminal.")] = False,
    mode: Annotated[str | None, typer.Option(help="Controller mode: auto or llm.")] = None,
    tick: Annotated[float | None, typer.Option(help="Seconds between ticks.")] = None,
) -> None:
    """Start the swarm: the daemon, the controller, and (through them) the workers."""
    from legion.config import load_project
    from legion.daemon import Daemon, DaemonConfig

    flags = {"controller_mode": mode, "tick": tick}
    project = load_project(common.repo_path(ctx), flags=flags)
    pid = running_pid(project)
    if pid is not None:
        raise LegionError(
            f"Legion is already running for {project.root} (pid {pid}); `legion stop` stops it"
        )
    for note in _preflight(project):
        typer.echo(note)
    settings = project.settings
    if foreground:
        config = DaemonConfig(
            mode=settings.controller_mode,
            tick=settings.tick,
            stale_after=settings.stale_after,
            restart_cooldown=settings.restart_cooldown,
        )
        typer.echo(f"Legion running for {project.root} ({config.mode} mode); Ctrl-C stops it")
        Daemon(project, config, os.environ).run()
        return
    log_path = project.state_dir / "daemon.log"
    project.state_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "legion", "--repo", str(project.root), "start", "--foreground"]
    argv += ["--mode", settings.controller_mode, "--tick", str(settings.tick)]
    with log_path.open("ab") as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
        )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if running_pid(project) is not None:
            typer.echo(
                f"Legion started for {project.root} "
                f"(pid {proc.pid}, {settings.controller_mode} mode)"
            )
            typer.echo(f"  log: {log_path}   status: legion status   stop: legion stop")
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
) -> None:
    """Stop the daemon. Workers keep running (their sessions stay resumable) unless --all."""
    from legion import daemon

    project = common.project(ctx)
    pid = daemon.stop(project)
    typer.echo("Legion was not running." if pid is None else f"Legion stopped (pid {pid}).")
    if all_windows:
        from legion.backends import open_backends, open_workers

        workers = open_workers(project, open_backends(project))
        workers.tmux.kill_session(workers.session)
        typer.echo(f"Closed tmux session {workers.session}.")


def status(
    ctx: typer.Context,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """The daemon, the controller, the workers, WIP, and the last actions."""
    from legion.actionlog import ActionLog
    from legion.backends import open_workers
    from legion.daemon import CONTROLLER_WINDOW, controller_state_of
    from legion.reconcile import counts_toward_wip

    project, backends = common.backends(ctx)
    workers = open_workers(project, backends)
    views = workers.views()
    now = time.time()
    try:
        beat: float | None = round(now - heartbeat_file(project).stat().st_mtime, 1)
    except OSError:
        beat = None
    controller, activity = controller_state_of(project, workers)
    code = sum(1 for v in views if v.state.is_live and counts_toward_wip(v.record.mode))
    data: dict[str, Any] = {
        "daemon": {"pid": running_pid(project), "heartbeat_age_s": beat},
        "controller": {
            "window": CONTROLLER_WINDOW,
            "state": controller.value,
            "transcript_age_s": None if activity is None else round(now - activity, 1),
        },
        "workers": [view.to_json(now) for view in views],
        "wip": {"code_workers": code, "limit": project.settings.wip_limit},
        "last_actions": [entry.to_json() for entry in ActionLog(backends.db).tail(10)],
    }
    if as_json:
        common.print_json(data)
        return
    pid = data["daemon"]["pid"]
    typer.echo(
        f"daemon:     {'running (pid ' + str(pid) + ')' if pid else 'not running'}"
        + (f", heartbeat {beat:.0f}s ago" if beat is not None else "")
    )
    typer.echo(f"controller: {controller.value}")
    limit = project.settings.wip_limit
    typer.echo(f"WIP:        {code} code worker(s) of {'unlimited' if limit is None else limit}")
    for view in views:
        typer.echo(
            f"  {view.record.issue:8} {view.record.mode.value:10} "
            f"{view.state.value:8} {view.record.window}"
        )
    if data["last_actions"]:
        typer.echo("last actions:")
        for entry in data["last_actions"]:
            typer.echo(f"  {entry['at']}  {entry['issue']:8} {entry['action']}: {entry['outcome']}")


def skills_install(
    ctx: typer.Context,
    scope: Annotated[
        str, typer.Option(help="user (Claude Code's config dir) or project (this repository).")
    ] = "user",
) -> None:
    """Put Legion's skills where Claude Code finds them."""
    from legion import skills
    from legion.runtime.claude_paths import config_dir

    if scope not in ("user", "project"):
        raise InputError(f"unknown scope {scope!r} (known: user, project)")
    if scope == "user":
        target = config_dir(os.environ) / "skills"
    else:
        target = common.project(ctx).root / ".claude" / "skills"
    written = skills.install(target)
    typer.echo(f"Installed {len(written)} skill files in {target}")
