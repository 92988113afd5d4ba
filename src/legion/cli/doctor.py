"""`legion doctor`: is this machine ready for Legion, and if not, what to do."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from legion import plugins
from legion.cli import common
from legion.errors import LegionError
from legion.plugins import DoctorCheck, DoctorReport

if TYPE_CHECKING:
    from legion.config import Project
    from legion.config.settings import Settings


Check = DoctorCheck
_SETTINGS_CHECKS = frozenset({"config", "project config"})


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


def _settings(project: Project | None) -> tuple[Settings | None, list[Settings]]:
    """The settings that choose the agent CLIs' binaries (the project's, else the machine's),
    and every settings that may put a role on one (the machine's and the project's)."""
    from legion.config.resolve import machine_settings

    found: list[Settings] = []
    with contextlib.suppress(LegionError):  # broken settings: a runtime's check says why
        found.append(machine_settings(os.environ))
    if project is not None:
        found.append(project.settings)
    return (found[-1] if found else None), found


def run_checks(project: Project | None = None) -> list[Check]:
    checks = [
        Check("python", sys.version_info >= (3, 11), sys.version.split()[0], "Python >= 3.11"),
        _tool("git", ["git", "--version"], "install git (e.g. apt-get install git)"),
        _tool("tmux", ["tmux", "-V"], "install tmux (e.g. apt-get install tmux)"),
    ]
    settings, every = _settings(project)
    needs_npm = False
    for plugin in plugins.RUNTIMES:
        report: DoctorReport = plugins.load(plugin.doctor)(settings, every, os.environ)
        checks += report.checks
        needs_npm = needs_npm or report.needs_install
    npm = _tool("npm", ["npm", "--version"], "install Node.js and npm (apt-get install npm)")
    # npm is only needed to install the agent CLIs, which are there already when they resolve.
    checks.append(Check(npm.name, npm.ok, npm.detail, npm.fix, required=needs_npm))
    checks.append(_sandbox(settings))
    return checks


def _sandbox(settings: Settings | None) -> Check:
    """bubblewrap, which confines every worker: required when `sandbox = "bwrap"`, else a
    warning (sessions would run unconfined); none is asked for with `sandbox = "none"`."""
    from legion.sandbox import INSTALL_HINT, find_bwrap, resolve

    chosen = None if settings is None else settings.sandbox
    if chosen == "none":
        return Check("bubblewrap", True, "not used (sandbox = none: sessions run unconfined)")
    found = resolve(None, os.environ)  # what unset would give: said, required or not
    if found.bwrap is not None:
        return Check("bubblewrap", True, _tool_version([found.bwrap, "--version"]) or found.bwrap)
    installed = find_bwrap(os.environ) is not None
    fix = "run Legion where bubblewrap can make namespaces" if installed else INSTALL_HINT
    return Check(
        "bubblewrap",
        False,
        f"{found.why}: sessions would run unconfined",
        f'{fix}, or set sandbox = "none" to run them so knowingly',
        required=chosen == "bwrap",
    )


def _load_project(ctx: typer.Context) -> tuple[Project | None, list[Check]]:
    """The project here (None outside one, or when its settings do not load), and the checks
    of what every other command loads first: the environment's LEGION_* variables and your
    user config, then the project's .legion/config.toml. A failure is the line the other
    commands refuse with."""
    from legion.config import find_project_root
    from legion.config.paths import CONFIG_DIR_NAME, CONFIG_FILE_NAME
    from legion.config.paths import user_config_path as user_config
    from legion.config.resolve import ignored_variables, machine_settings

    checks: list[Check] = []
    mine = user_config(os.environ)
    try:
        machine_settings(os.environ)
    except LegionError as exc:
        broken = str(exc)
        fix = f"correct the setting it names (in {mine} or your environment)"
        checks.append(Check("config", False, broken, fix))
    else:
        broken = ""
        shown = str(mine) if mine.exists() else "no user config"
        checks.append(Check("config", True, f"{shown}; LEGION_* variables read"))
    for name in ignored_variables(os.environ):
        checks.append(
            Check(
                "environment",
                False,
                f"{name} is no setting of Legion's: ignored",
                "unset it: a setting's variable is its name in capitals after LEGION_ "
                "(LEGION_WIP_LIMIT)",
                required=False,
            )
        )
    try:
        root = find_project_root(common.repo_path(ctx))
    except LegionError:
        return None, checks  # no project here: doctor checks the machine only
    try:
        project = common.project(ctx)
    except LegionError as exc:
        if str(exc) != broken:  # the same line once is enough
            config = root / CONFIG_DIR_NAME / CONFIG_FILE_NAME
            fix = f"correct the setting it names in {config}, or do as it says"
            checks.append(Check("project config", False, str(exc), fix))
        return None, checks
    checks.append(Check("project config", True, str(project.config_path)))
    return project, checks


def _project_lines(project: Project | None) -> tuple[dict[str, str] | None, list[Check]]:
    """The project's facts, and the checks of its tracker and forge (credentials, reachable,
    team or repository found, statuses mapped, labels present)."""
    from legion.backends import backend_checks
    from legion.daemon_link import running_pid
    from legion.store import store_checks

    if project is None:
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
    lines["pickup"] = _pickup(project)
    checks = store_checks(project)
    checks += [
        Check(name, ok, detail if ok else "not ready", "" if ok else detail)
        for name, ok, detail in found
    ]
    return lines, checks


def _pickup(project: Project) -> str:
    """What Legion will work on among the tracker's issues (the Backlog opt-in), or why that
    is unknown."""
    from legion.core.text import for_display
    from legion.services.projects import pickup_line

    try:
        return pickup_line(project)
    except LegionError as exc:
        return for_display(f"unknown: {exc}")


def _runtime_named(name: str) -> str:
    """The runtime `--runtime` names (or an alias of it); an unknown one is refused."""
    from legion.errors import InputError

    found = plugins.runtime_aliases().get(name, name)
    if found not in plugins.runtime_names():
        known = ", ".join(plugins.runtime_names())
        raise InputError(f"--runtime: unknown runtime {name!r} (known: {known})")
    return found


def doctor(
    ctx: typer.Context,
    install: Annotated[
        bool,
        typer.Option(
            "--install",
            help="First install the version of each agent CLI Legion is tested with into "
            "Legion's cache (needs npm): the default runtime's (Claude Code), and another's "
            "when a role runs on it or --runtime names it.",
        ),
    ] = False,
    runtimes: Annotated[
        list[str] | None,
        typer.Option(
            "--runtime",
            help="With --install: install this runtime's tested CLI even when no role runs on "
            f"it ({', '.join(plugins.runtime_names())}; may be given more than once).",
        ),
    ] = None,
    codex: Annotated[
        bool,
        typer.Option(
            "--codex",
            help="With --install: install the tested Codex CLI even when no role runs on Codex "
            "(--runtime codex).",
        ),
    ] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Check what Legion needs (your settings: the LEGION_* variables, your user config and the
    project's .legion/config.toml, each refused as every other command would refuse it; git,
    tmux, Claude Code, npm; the Codex CLI, its config.toml and Legion's skills for it, required
    when a role runs on Codex; and in a project its tracker and forge: credentials, team or
    repository, statuses, labels) and say how to fix what is missing.

    Exits 0 when everything required is there, 1 otherwise.
    """
    from legion.config.settings import roles_on

    found, config_checks = _load_project(ctx)
    if install:
        say = (lambda text: None) if as_json else (lambda text: typer.echo(text, err=True))
        asked = {_runtime_named(name) for name in runtimes or ()}
        # `--codex` is older than `--runtime`, and scripts and the docs use it.
        asked |= {plugins.CODEX} if codex else set()
        every = _settings(found)[1]
        for plugin in plugins.RUNTIMES:
            # The default runtime always (`legion demo` runs on it); another when asked for
            # or when a role runs on it.
            default = plugin.name == plugins.DEFAULT_RUNTIME
            if default or plugin.name in asked or roles_on(plugin.name, every):
                plugins.load(plugin.install)(os.environ, say)
    checks = config_checks + run_checks(found)
    project, backend = _project_lines(found)
    checks += backend
    ok = all(check.ok for check in checks if check.required)
    if as_json:
        common.print_json(
            {"ok": ok, "checks": [check._asdict() for check in checks], "project": project}
        )
    else:
        for check in checks:
            mark = "ok" if check.ok else ("MISSING" if check.required else "warning")
            if not check.ok and check.required and check.name in _SETTINGS_CHECKS:
                mark = "INVALID"  # a setting there is wrong, not a tool missing
            if not check.ok and not check.required and not check.fix:
                mark = "info"  # nothing to fix: e.g. Codex, missing, when no role runs on it
            common.echo(f"{mark:>8}  {check.name:<15} {check.detail}")
            if not check.ok and check.fix:
                common.echo(f"{'':>8}  {'':<15} fix: {check.fix}")
        if project is not None:
            typer.echo(
                f"{'project':>8}  {project['root']} (tracker {project['tracker']}, forge "
                f"{project['forge']}, daemon {project['daemon']})"
            )
            typer.echo(f"{'pickup':>8}  {project['pickup']}")
    if not ok:
        raise typer.Exit(1)
