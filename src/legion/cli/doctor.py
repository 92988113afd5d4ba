"""`legion doctor`: is this machine ready for Legion, and if not, what to do."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any

import typer

from legion.cli import common
from legion.errors import LegionError

if TYPE_CHECKING:
    from legion.config import Project, Settings


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


def _claude_checks(required: bool = True) -> list[Check]:
    """Claude Code: found (required when a role runs on it), its version, its set-up."""
    from legion.config import machine_settings
    from legion.runtime import claude_bin
    from legion.runtime.claude_paths import global_config_file

    try:
        binary = claude_bin.resolve_configured(machine_settings(os.environ), os.environ)
    except LegionError as exc:
        return [Check("claude", False, "not found", str(exc), required=required)]
    version = claude_bin.version_of(binary.path)
    if version is None:
        return [
            Check(
                "claude",
                False,
                f"{binary.path} ({binary.source}) does not run",
                "reinstall it",
                required=required,
            )
        ]
    checks = [
        Check("claude", True, f"{version} at {binary.path} ({binary.source})", required=required)
    ]
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


def codex_roles(settings: list[Settings]) -> list[str]:
    """The roles that run on Codex under any of `settings`, in `RUNTIME_ROLES` order."""
    from legion.config import RUNTIME_ROLES

    return [role for role in RUNTIME_ROLES if any(s.runtime_for(role) == "codex" for s in settings)]


# Codex's providers that need no `[model_providers.X]` table (besides "openai").
_BUILT_IN_PROVIDERS = ("ollama", "lmstudio", "oss")


def _safe_url(url: str) -> str:
    """`url` without what may hold a secret (`user:password@`, the query, the fragment)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(not a valid URL)"
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _text(value: object, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{what} is not a string")


def _codex_config(env: Mapping[str, str], required: bool) -> Check:
    """What `$CODEX_HOME/config.toml` says about the model, its provider and how Codex
    authenticates to it; never the value of a key or token."""
    import tomllib

    from legion.runtime.codex import codex_home

    def passed(detail: str) -> Check:
        return Check("codex config", True, detail, required=required)

    home = codex_home(env)
    path = home / "config.toml"
    fix_file = f"fix {path} (see docs/codex-cli.md)"
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        data = {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        reason = " ".join(str(exc).split())
        return Check("codex config", False, f"{path}: {reason}", fix_file, required=required)
    try:
        settings = dict(data)
        profile = _text(data.get("profile"), "profile")
        if profile is not None:
            profiles = data.get("profiles", {})
            chosen = profiles.get(profile) if isinstance(profiles, dict) else None
            if not isinstance(chosen, dict):
                raise ValueError(f"profile {profile!r} has no [profiles.{profile}] table")
            settings.update(chosen)
        model = _text(settings.get("model"), "model") or "Codex's default"
        provider = _text(settings.get("model_provider"), "model_provider") or "openai"
        providers = data.get("model_providers", {})
        if not isinstance(providers, dict):
            raise ValueError("model_providers is not a table")
        table = providers.get(provider)
        if table is not None and not isinstance(table, dict):
            raise ValueError(f"model_providers.{provider} is not a table")
        base_url = _text((table or {}).get("base_url"), f"model_providers.{provider}.base_url")
        env_key = _text((table or {}).get("env_key"), f"model_providers.{provider}.env_key")
    except (ValueError, AttributeError) as exc:
        return Check("codex config", False, f"{path}: {exc}", fix_file, required=required)

    where = str(path) if path.is_file() else f"no {path}, Codex's defaults"
    head = f"model {model}, provider {provider}"
    if provider == "openai":  # built in: a [model_providers.openai] table does not replace it
        if (home / "auth.json").is_file():
            return passed(f"{head}, logged in (auth.json); {where}")
        if env.get("OPENAI_API_KEY"):
            return passed(f"{head}, OPENAI_API_KEY is set; {where}")
        return Check(
            "codex config",
            False,
            f"{head}, not logged in (no {home / 'auth.json'}) and OPENAI_API_KEY not set; {where}",
            "run `codex login`, or set OPENAI_API_KEY, or configure a provider in config.toml",
            required=required,
        )
    if provider in _BUILT_IN_PROVIDERS:
        return passed(f"{head} (built in); {where}")
    if table is None:
        return Check(
            "codex config",
            False,
            f"{head}, but config.toml has no [model_providers.{provider}]; {where}",
            f"add [model_providers.{provider}] (base_url, env_key) to {path}, or change "
            "model_provider",
            required=required,
        )
    url = _safe_url(base_url) if base_url else "no base_url"
    if not env_key:
        return passed(f"{head} at {url}, no env_key (no API key); {where}")
    if env.get(env_key):
        return passed(f"{head} at {url}, key in ${env_key} (set); {where}")
    return Check(
        "codex config",
        False,
        f"{head} at {url}, key in ${env_key} (not set); {where}",
        f"set {env_key} to the API key of provider {provider}",
        required=required,
    )


def _codex_checks(settings: Settings | None, roles: list[str]) -> list[Check]:
    """Codex: found (required when a role runs on it), its version, its config, the skills."""
    from legion.runtime import codex_bin
    from legion.runtime.codex import codex_home
    from legion.skills import installed

    env = os.environ
    needed = bool(roles)
    skills_dir = codex_home(env) / "skills"
    have_skills = installed(skills_dir)
    skills = Check(
        "codex skills",
        have_skills,
        f"Legion's skills {'in' if have_skills else 'not installed in'} {skills_dir}",
        "`legion skills install --runtime codex` (or `legion start` installs them)",
        required=False,
    )
    try:
        # None: the settings are broken, and the error says so where they are used
        binary = codex_bin.resolve_configured(settings, env)
    except LegionError as exc:
        if not needed:
            return [Check("codex", False, "not found; not used (no role runs on codex)", "", False)]
        return [Check("codex", False, f"not found (used by {', '.join(roles)})", str(exc)), skills]
    version = codex_bin.version_of(binary.path)
    if version is None:
        return [
            Check(
                "codex",
                False,
                f"{binary.path} ({binary.source}) does not run",
                "reinstall it (`legion doctor --install --codex` puts the tested version in "
                "Legion's cache)",
                required=needed,
            ),
            skills,
        ]
    used = f"used by {', '.join(roles)}" if needed else "no role runs on codex"
    found = f"{version} at {binary.path} ({binary.source}); {used}"
    checks = [Check("codex", True, found, required=needed)]
    if version != codex_bin.PINNED_VERSION:
        checks.append(
            Check(
                "codex version",
                False,
                f"{version}; Legion is tested with {codex_bin.PINNED_VERSION}",
                "`legion doctor --install --codex` puts the tested version in Legion's cache",
                required=False,
            )
        )
    checks.append(_codex_config(env, needed))
    checks.append(skills)
    if not needed:
        # Nothing to act on while no role runs on Codex: information, not a warning.
        unused = "(not needed: no role runs on codex)"
        checks = [
            check if check.ok else replace(check, detail=f"{check.detail} {unused}", fix="")
            for check in checks
        ]
    return checks


def _settings(project: Project | None) -> tuple[Settings | None, list[Settings]]:
    """The settings that choose Codex's binary (the project's, else the machine's), and every
    settings that may put a role on Codex (the machine's and the project's)."""
    from legion.config import machine_settings

    found: list[Settings] = []
    with contextlib.suppress(LegionError):  # broken settings: the claude check says why
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
    # Claude Code is needed unless every role runs on Codex (and for `legion demo`'s default).
    from legion.config import RUNTIME_ROLES

    claude_needed = settings is None or any(
        settings.runtime_for(role) == "claude-code" for role in RUNTIME_ROLES
    )
    claude = _claude_checks(claude_needed)
    checks += claude
    roles = codex_roles(every)
    codex = _codex_checks(settings, roles)
    checks += codex
    npm = _tool("npm", ["npm", "--version"], "install Node.js and npm (apt-get install npm)")
    # npm is only needed to install Claude Code and Codex, which are there already when they
    # resolve.
    needs_npm = not claude[0].ok or (bool(roles) and not codex[0].ok)
    checks.append(Check(npm.name, npm.ok, npm.detail, npm.fix, required=needs_npm))
    return checks


def _load_project(ctx: typer.Context) -> Project | None:
    try:
        return common.project(ctx)
    except LegionError:
        return None


def _project_lines(project: Project | None) -> tuple[dict[str, str] | None, list[Check]]:
    """The project's facts, and the checks of its tracker and forge (credentials, reachable,
    team or repository found, statuses mapped, labels present)."""
    from legion.backends import backend_checks
    from legion.daemon_link import running_pid

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
    checks = [
        Check(name, ok, detail if ok else "not ready", "" if ok else detail)
        for name, ok, detail in found
    ]
    return lines, checks


def _pickup(project: Project) -> str:
    """What Legion will work on among the tracker's issues (the Backlog opt-in), or why that
    is unknown."""
    from legion.core.text import for_display
    from legion.projects import pickup_line

    try:
        return pickup_line(project)
    except LegionError as exc:
        return for_display(f"unknown: {exc}")


def doctor(
    ctx: typer.Context,
    install: Annotated[
        bool,
        typer.Option(
            "--install",
            help="First install the Claude Code version Legion is tested with into Legion's "
            "cache (needs npm), and the Codex CLI version too when a role runs on Codex (or "
            "with --codex).",
        ),
    ] = False,
    codex: Annotated[
        bool,
        typer.Option(
            "--codex",
            help="With --install: install the tested Codex CLI even when no role runs on Codex.",
        ),
    ] = False,
    as_json: Annotated[bool, common.JsonOption] = False,
) -> None:
    """Check what Legion needs (git, tmux, Claude Code, npm; the Codex CLI, its config.toml and
    Legion's skills for it, required when a role runs on Codex; and in a project its tracker and
    forge: credentials, team or repository, statuses, labels) and say how to fix what is missing.

    Exits 0 when everything required is there, 1 otherwise.
    """
    from legion.runtime import claude_bin, codex_bin

    found = _load_project(ctx)
    if install:
        say = (lambda text: None) if as_json else (lambda text: typer.echo(text, err=True))
        claude_bin.install(os.environ, say)
        if codex or codex_roles(_settings(found)[1]):
            codex_bin.install(os.environ, say)
    checks = run_checks(found)
    project, backend = _project_lines(found)
    checks += backend
    ok = all(check.ok for check in checks if check.required)
    if as_json:
        common.print_json(
            {"ok": ok, "checks": [asdict(check) for check in checks], "project": project}
        )
    else:
        for check in checks:
            mark = "ok" if check.ok else ("MISSING" if check.required else "warning")
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
