"""`legion doctor`: is this machine ready for Legion, and if not, what to do."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Annotated

import typer

from legion.cli import common
from legion.errors import LegionError


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True  # a failed optional check is a warning


def _tool_version(argv: list[str]) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if out.returncode == 0 and text else None


def _tool(name: str, argv: list[str], fix: str) -> Check:
    found = shutil.which(argv[0])
    version = _tool_version(argv) if found else None
    if version is None:
        return Check(name, False, "not found" if not found else f"{found} does not run", fix)
    return Check(name, True, version)


def _claude_checks() -> list[Check]:
    from legion.config import machine_settings
    from legion.runtime import claude_bin
    from legion.runtime.claude_paths import global_config_file

    try:
        binary = claude_bin.resolve_configured(machine_settings(os.environ), os.environ)
    except LegionError as exc:
        return [Check("claude", False, "not found", str(exc))]
    version = claude_bin.version_of(binary.path)
    if version is None:
        return [
            Check("claude", False, f"{binary.path} ({binary.source}) does not run", "reinstall it")
        ]
    checks = [Check("claude", True, f"{version} at {binary.path} ({binary.source})")]
    if version != claude_bin.PINNED_VERSION:
        checks.append(
            Check(
                "claude version",
                False,
                f"{version}; Legion is tested with {claude_bin.PINNED_VERSION}",
                "`legion doctor --install` puts the tested version in Legion's cache",
                required=False,
            )
        )
    config = global_config_file(os.environ)
    try:
        import json

        onboarded = json.loads(config.read_text(encoding="utf-8")).get("hasCompletedOnboarding")
    except (OSError, ValueError, AttributeError):
        onboarded = False
    checks.append(
        Check(
            "claude setup",
            onboarded is True,
            "first-run setup done" if onboarded is True else f"not set up yet ({config})",
            "run `claude` once and finish its first-run screens (needed by `legion start`; "
            "`legion demo` does not need it)",
            required=False,
        )
    )
    return checks


def run_checks() -> list[Check]:
    checks = [
        Check("python", sys.version_info >= (3, 11), sys.version.split()[0], "Python >= 3.11"),
        _tool("git", ["git", "--version"], "install git (e.g. apt-get install git)"),
        _tool("tmux", ["tmux", "-V"], "install tmux (e.g. apt-get install tmux)"),
    ]
    claude = _claude_checks()
    checks += claude
    npm = _tool("npm", ["npm", "--version"], "install Node.js and npm (apt-get install npm)")
    # npm is only needed to install Claude Code, which is there already when it resolves.
    checks.append(Check(npm.name, npm.ok, npm.detail, npm.fix, required=not claude[0].ok))
    return checks


def _project_lines(ctx: typer.Context) -> tuple[dict[str, str] | None, list[Check]]:
    """The project's facts, and the checks of its tracker and forge (credentials, reachable,
    team or repository found, statuses mapped, labels present)."""
    from legion.backends import backend_checks
    from legion.daemon_link import running_pid

    try:
        project = common.project(ctx)
    except LegionError:
        return None, []
    pid = running_pid(project)
    lines = {
        "root": str(project.root),
        "state_dir": str(project.state_dir),
        "tracker": project.settings.tracker,
        "forge": project.settings.forge,
        "daemon": f"running (pid {pid})" if pid else "not running",
    }
    try:
        found = backend_checks(project)
    except LegionError as exc:
        found = [("backends", False, str(exc))]
    checks = [
        Check(name, ok, detail if ok else "not ready", "" if ok else detail)
        for name, ok, detail in found
    ]
    return lines, checks


def doctor(
    ctx: typer.Context,
    install: Annotated[
        bool,
        typer.Option(
            "--install",
            help="First install the Claude Code version Legion is tested with into Legion's "
            "cache (needs npm).",
        ),
    ] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Check what Legion needs (git, tmux, Claude Code, npm, and in a project its tracker and
    forge: credentials, team or repository, statuses, labels) and say how to fix what is missing.

    Exits 0 when everything required is there, 1 otherwise.
    """
    from legion.runtime import claude_bin

    if install:
        say = (lambda text: None) if as_json else (lambda text: typer.echo(text, err=True))
        claude_bin.install(os.environ, say)
    checks = run_checks()
    project, backend = _project_lines(ctx)
    checks += backend
    ok = all(check.ok for check in checks if check.required)
    if as_json:
        common.print_json(
            {"ok": ok, "checks": [asdict(check) for check in checks], "project": project}
        )
    else:
        for check in checks:
            mark = "ok" if check.ok else ("MISSING" if check.required else "warning")
            typer.echo(f"{mark:>8}  {check.name:<15} {check.detail}")
            if not check.ok and check.fix:
                typer.echo(f"{'':>8}  {'':<15} fix: {check.fix}")
        if project is not None:
            typer.echo(
                f"{'project':>8}  {project['root']} (tracker {project['tracker']}, forge "
                f"{project['forge']}, daemon {project['daemon']})"
            )
    if not ok:
        raise typer.Exit(1)
