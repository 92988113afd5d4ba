"""`legion doctor`'s checks of Claude Code (the registry's `doctor` of its plugin): found,
its version against the one Legion is tested with, its first-run set-up."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from legion.config import RUNTIME_ROLES, Settings
from legion.errors import LegionError
from legion.plugins import CLAUDE_CODE, DoctorCheck, DoctorReport
from legion.runtime.claude import binary as claude_bin
from legion.runtime.claude.paths import global_config_file

Check = DoctorCheck
CLAUDE_NAME = "claude"  # the command, as doctor lists it


def doctor_report(
    chosen: Settings | None,
    every: Sequence[Settings],
    env: Mapping[str, str],
    skills_installed: Callable[[Path], bool],
) -> DoctorReport:
    """Needed unless every role of `chosen` (the project's settings, else the machine's) runs
    elsewhere; with no settings, `legion demo`'s default needs it. (Its skills are not checked,
    as before: `legion start` installs them.)"""
    needed = chosen is None or any(
        chosen.runtime_for(role) == CLAUDE_CODE for role in RUNTIME_ROLES
    )
    checks = _claude_checks(env, needed)
    return DoctorReport(checks, needs_install=not checks[0].ok)


def _claude_checks(env: Mapping[str, str], required: bool = True) -> list[Check]:
    """Claude Code: found (required when a role runs on it), its version, its set-up."""
    from legion.config import machine_settings

    try:
        binary = claude_bin.resolve_configured(machine_settings(env), env)
    except LegionError as exc:
        return [Check(CLAUDE_NAME, False, "not found", str(exc), required=required)]
    version = claude_bin.version_of(binary.path)
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
    config = global_config_file(env)
    try:
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
