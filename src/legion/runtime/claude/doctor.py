"""`legion doctor`'s checks of Claude Code (the registry's `doctor` of its plugin): found,
its version against the one Legion is tested with, a credential for its sessions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from legion.config.settings import Settings
from legion.config.values import RUNTIME_ROLES
from legion.errors import LegionError
from legion.plugins import CLAUDE_CODE, DoctorCheck, DoctorReport
from legion.runtime.claude import binary as claude_bin
from legion.runtime.claude.paths import CREDENTIAL_VARIABLES, config_dir

Check = DoctorCheck
CLAUDE_NAME = "claude"  # the command, as doctor lists it


def doctor_report(
    chosen: Settings | None,
    every: Sequence[Settings],
    env: Mapping[str, str],
) -> DoctorReport:
    """Needed unless every role of `chosen` (the project's settings, else the machine's) runs
    elsewhere; with no settings, `legion demo`'s default needs it."""
    needed = chosen is None or any(
        chosen.runtime_for(role) == CLAUDE_CODE for role in RUNTIME_ROLES
    )
    checks = _claude_checks(env, needed)
    return DoctorReport(checks, needs_install=not checks[0].ok)


def _claude_checks(env: Mapping[str, str], required: bool = True) -> list[Check]:
    """Claude Code: found (required when a role runs on it), its version, a credential."""
    from legion.config.resolve import machine_settings

    try:
        binary = claude_bin.CLI.resolve_configured(machine_settings(env), env)
    except LegionError as exc:
        return [Check(CLAUDE_NAME, False, "not found", str(exc), required=required)]
    version = claude_bin.CLI.version_of(binary.path)
    if version is None:
        return [
            Check(
                CLAUDE_NAME,
                False,
                f"{binary.path} ({binary.source}) does not run",
                "reinstall it",
                required=required,
            )
        ]
    checks = [
        Check(CLAUDE_NAME, True, f"{version} at {binary.path} ({binary.source})", required=required)
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
    checks.append(credential_check(env))
    return checks


# Where the CLI finds a credential besides a key: a cloud provider's own (its variables say so).
_CLOUD_VARIABLES = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX")


def credential_check(env: Mapping[str, str]) -> Check:
    """Whether Claude Code sessions can reach a model: each session's home is Legion's, its
    first-run screens answered there; what it needs of yours is a credential, a key the daemon
    holds (from `env`, where `legion start` runs), else your login (`claude` keeps it in its
    config folder), else a cloud provider's."""
    held = [name for name in (*CREDENTIAL_VARIABLES, *_CLOUD_VARIABLES) if env.get(name)]
    login = config_dir(env) / ".credentials.json"
    return Check(
        "claude login",
        bool(held) or login.is_file(),
        f"the daemon holds {held[0]}"
        if held
        else ("your login, read-only in sessions" if login.is_file() else "none found"),
        "set ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`) where "
        "`legion start` runs, or log in with `claude` (`legion demo` needs neither)",
        required=False,
    )
