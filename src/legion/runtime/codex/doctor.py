"""`legion doctor`'s checks of Codex (the registry's `doctor` of its plugin): found, its
version, what its config.toml says about the model's provider and key. (Legion's skills are
Legion's part of each session's own home: `legion.runtime.homes`.)"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from legion.config.settings import Settings, roles_on
from legion.core.text import url_without_secrets
from legion.plugins import CODEX, DoctorCheck, DoctorReport

Check = DoctorCheck


def doctor_report(
    chosen: Settings | None,
    every: Sequence[Settings],
    env: Mapping[str, str],
) -> DoctorReport:
    """Needed when a role runs on Codex under the machine's or the project's settings; the
    binary is the one `chosen` (the project's, else the machine's) names."""
    roles = roles_on(CODEX, every)
    checks = _codex_checks(chosen, roles, env)
    return DoctorReport(checks, needs_install=bool(roles) and not checks[0].ok)


def credential_check(env: Mapping[str, str]) -> Check:
    """Whether Codex sessions can reach a model: `_codex_config`, required."""
    return _codex_config(env, True)


def _codex_config(env: Mapping[str, str], required: bool) -> Check:
    """What `$CODEX_HOME/config.toml` says about the model, its provider and how Codex
    authenticates to it; never the value of a key or token."""
    from legion.runtime.codex.provider import BUILT_IN_PROVIDERS, OPENAI, read_provider
    from legion.runtime.codex.runtime import codex_home

    def passed(detail: str) -> Check:
        return Check("codex config", True, detail, required=required)

    home = codex_home(env)
    path = home / "config.toml"
    fix_file = f"fix {path} (see docs/codex-cli.md)"
    try:
        provider = read_provider(home)
    except (OSError, ValueError) as exc:
        reason = " ".join(str(exc).split())
        return Check("codex config", False, f"{path}: {reason}", fix_file, required=required)

    where = str(path) if path.is_file() else f"no {path}, Codex's defaults"
    model = provider.model or "Codex's default"
    head = f"model {model}, provider {provider.name}"
    if provider.name == OPENAI:
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
    if provider.name in BUILT_IN_PROVIDERS:
        return passed(f"{head} (built in); {where}")
    if not provider.has_table:
        return Check(
            "codex config",
            False,
            f"{head}, but config.toml has no [model_providers.{provider.name}]; {where}",
            f"add [model_providers.{provider.name}] (base_url, env_key) to {path}, or change "
            "model_provider",
            required=required,
        )
    url = url_without_secrets(provider.base_url) if provider.base_url else "no base_url"
    env_key = provider.env_key
    if not env_key:
        return passed(f"{head} at {url}, no env_key (no API key); {where}")
    if env.get(env_key):
        return passed(f"{head} at {url}, key in ${env_key} (set); {where}")
    return Check(
        "codex config",
        False,
        f"{head} at {url}, key in ${env_key} (not set); {where}",
        f"set {env_key} to the API key of provider {provider.name}",
        required=required,
    )


def _codex_checks(
    settings: Settings | None,
    roles: list[str],
    env: Mapping[str, str],
) -> list[Check]:
    """Codex: found (required when a role runs on it), its version, its config."""
    from legion.runtime.codex import binary as codex_bin
    from legion.runtime.npm_pin import installed_checks

    return installed_checks(
        codex_bin.CLI, settings, roles, env, install="legion doctor --install --codex",
        more=lambda needed: [_codex_config(env, needed)],
    )  # fmt: skip
