"""`legion doctor`'s checks of Gemini (the registry's `doctor` of its plugin): found, its
version, and whether its sessions have a key to reach the model with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from legion.config.settings import Settings, roles_on
from legion.plugins import GEMINI, DoctorCheck, DoctorReport

Check = DoctorCheck


def doctor_report(
    chosen: Settings | None,
    every: Sequence[Settings],
    env: Mapping[str, str],
) -> DoctorReport:
    """Needed when a role runs on Gemini under the machine's or the project's settings; the
    binary is the one `chosen` (the project's, else the machine's) names."""
    roles = roles_on(GEMINI, every)
    checks = _checks(chosen, roles, env)
    return DoctorReport(checks, needs_install=bool(roles) and not checks[0].ok)


def credential_check(env: Mapping[str, str], required: bool = True) -> Check:
    """Whether Gemini sessions can reach a model: a Gemini API key (never its value)."""
    from legion.runtime.gemini.model_route import KEY_VARIABLES

    held = [name for name in KEY_VARIABLES if env.get(name)]
    if held:
        return Check("gemini key", True, f"{held[0]} is set", required=required)
    return Check(
        "gemini key",
        False,
        "GEMINI_API_KEY is not set",
        "set GEMINI_API_KEY to your Gemini API key (Legion runs Gemini with an API key only)",
        required=required,
    )


def _checks(settings: Settings | None, roles: list[str], env: Mapping[str, str]) -> list[Check]:
    """Gemini: found (required when a role runs on it), its version, its key."""
    from legion.runtime.gemini import binary as gemini_bin
    from legion.runtime.npm_pin import installed_checks

    return installed_checks(
        gemini_bin.CLI, settings, roles, env, install="legion doctor --install --runtime gemini",
        more=lambda needed: [credential_check(env, needed)],
    )  # fmt: skip
