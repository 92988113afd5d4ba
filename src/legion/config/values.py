"""The rules of each of the project's own settings (`CORE_SPECS`): what a value may be, how a
variable spells it, its default. A plugin's settings have their own, in its section
(`legion.setting_spec`, `legion.plugins`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from legion import plugins
from legion.core.model import Status, validate_issue_key, validate_label_name
from legion.core.pickup import DEFAULT_BACKLOG_OPT_IN, EVERY_ISSUE
from legion.core.statusmap import parse_status_table
from legion.core.text import url_without_secrets
from legion.core.usage import Price
from legion.errors import InputError
from legion.setting_spec import (
    SettingSpec,
    choice,
    path,
    strings,
)

# The plugins' names come from their one registry (`legion.plugins`).
TRACKERS = plugins.tracker_names()

FORGES = plugins.forge_names()

# The agent CLIs a session can run on, and the roles each can be chosen for. A retro resumes
# the implementer's session, so it runs where that did.
RUNTIMES = plugins.runtime_names()

RUNTIME_ROLES = ("controller", "architect", "plan", "implement", "review", "finish")

_RUNTIME_ALIASES = plugins.runtime_aliases()

_BACKEND_ALIASES = plugins.backend_aliases()

# Ignored files that a build or an install makes again, so a workspace may lose them. Each
# pattern is matched against every part of an ignored path. Everything else that is ignored
# (`.env`, local notes, keys) exists nowhere else and keeps the workspace.
DEFAULT_REGENERABLE: tuple[str, ...] = (
    "__pycache__", "*.pyc", "*.pyo", ".venv", "venv", "node_modules", "dist", "build",
    "target", "*.egg-info", ".eggs", ".cache", ".pytest_cache", ".mypy_cache", ".ruff_cache",
    ".hypothesis", ".tox", ".nox", ".coverage", "htmlcov", ".next", ".gradle", ".DS_Store",
)  # fmt: skip


def _backend(options: tuple[str, ...]) -> Callable[[Any], str]:
    choose = choice(options)

    def parse(value: Any) -> str:
        if isinstance(value, str):
            value = _BACKEND_ALIASES.get(value.strip().lower(), value)
        return choose(value)

    return parse


def _uuid(value: Any) -> str:
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise ValueError(f"must be a UUID, got {value!r}") from None


def _issue_key(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a string, got {value!r}")
    try:
        return validate_issue_key(value.strip().upper())
    except InputError as exc:
        raise ValueError(str(exc)) from None


def _wip_limit(value: Any) -> int | None:
    """A non-negative whole number (0 pauses new code workers), or "unlimited"."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("", "unlimited", "none"):
            return None
        if not text.isdigit():
            raise ValueError(f"must be a whole number or 'unlimited', got {value!r}")
        value = int(text)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"must be a whole number or 'unlimited', got {value!r}")
    return value


def _labels(value: Any) -> tuple[str, ...]:
    items = value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise ValueError(f"must be a list of label names, got {value!r}")
    try:
        return tuple(validate_label_name(i) for i in items if i.strip())
    except InputError as exc:
        raise ValueError(str(exc)) from None


def _opt_in_labels(value: Any) -> tuple[str, ...]:
    """Label names, or ["*"]: every Backlog issue."""
    if isinstance(value, list | tuple) and [str(v).strip() for v in value] == [EVERY_ISSUE]:
        return (EVERY_ISSUE,)
    return _labels(value)


def _opt_in_labels_from_env(value: Any) -> tuple[str, ...]:
    return _opt_in_labels([part for part in str(value).split(",")])


def _labels_from_env(value: Any) -> tuple[str, ...]:
    """A variable holds a comma-separated list."""
    return _labels(str(value).split(","))


# Seconds settings: below the floor the daemon would spin, above the ceiling it would sleep
# through everything; neither is what anybody means.
MIN_SECONDS = 0.1

MAX_SECONDS = 7 * 24 * 3600.0


def _seconds(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"must be a number of seconds, got {value!r}") from None
    if isinstance(value, bool) or not MIN_SECONDS <= number <= MAX_SECONDS:
        raise ValueError(
            f"must be a number of seconds from {MIN_SECONDS:g} to {MAX_SECONDS:g}, got {value!r}"
        )
    return number


_SWITCH = {"true": True, "yes": True, "on": True, "1": True}
_SWITCH |= {"false": False, "no": False, "off": False, "0": False}


def _switch(value: Any) -> bool:
    """On or off: TOML's `true`/`false`; in a variable, `true`, `yes`, `on`, `1` and their
    opposites."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _SWITCH:
        return _SWITCH[value.strip().lower()]
    raise ValueError(f"must be true or false, got {value!r}")


def _runtime(value: Any) -> str:
    if isinstance(value, str):
        value = _RUNTIME_ALIASES.get(value.strip().lower(), value.strip().lower())
    return choice(RUNTIMES)(value)


def _runtimes(value: Any) -> dict[str, str]:
    """A table of role = runtime (`implement = "<runtime>"`); roles not named use `runtime`."""
    if not isinstance(value, Mapping):
        raise ValueError(f"must be a table of role = runtime, got {value!r}")
    chosen: dict[str, str] = {}
    for role, runtime in value.items():
        key = str(role).strip().lower()
        if key == "retro":
            raise ValueError(
                "has 'retro', but a retro resumes the implementer's session: set 'implement'"
            )
        if key not in RUNTIME_ROLES:
            raise ValueError(f"has unknown role {role!r} (roles: {', '.join(RUNTIME_ROLES)})")
        try:
            chosen[key] = _runtime(runtime)
        except ValueError as exc:
            raise ValueError(f"{role}: {exc}") from None
    return chosen


def _runtimes_from_env(value: Any) -> dict[str, str]:
    """A variable holds `role=runtime` pairs separated by commas."""
    pairs = [part.partition("=") for part in str(value).split(",") if part.strip()]
    if any(not sep for _, sep, _ in pairs):
        raise ValueError(f'must be "role=runtime" pairs separated by commas, got {value!r}')
    return _runtimes({role.strip(): runtime.strip() for role, _, runtime in pairs})


def _statuses(value: Any) -> dict[str, Status]:
    return parse_status_table(value)


def _statuses_from_env(value: Any) -> dict[str, Status]:
    """A variable holds `Backend name=Legion status` pairs separated by commas."""
    pairs = [part.partition("=") for part in str(value).split(",") if part.strip()]
    if any(not sep for _, sep, _ in pairs):
        raise ValueError(f'must be "Name=Status" pairs separated by commas, got {value!r}')
    return parse_status_table({name: target.strip() for name, _, target in pairs})


# A session that spends this much with nothing to show for it is looping: Claude Code sends the
# whole conversation with each request, so this is some 50-100 requests of a large context,
# well past any reading a real task needs before its first change.
DEFAULT_IDLE_SPEND_LIMIT = 5_000_000

_PRICE_KEYS = ("input", "output", "cache_read", "cache_write")


def _prices(value: Any) -> dict[str, Price]:
    """A table of model = {input, output, cache_read, cache_write}: what a million tokens
    cost; cache prices not given cost what input does."""
    if not isinstance(value, Mapping):
        raise ValueError(f"must be a table of model = {{input = …, output = …}}, got {value!r}")
    prices: dict[str, Price] = {}
    for model, table in value.items():
        if not isinstance(table, Mapping):
            raise ValueError(
                f"{model}: must be a table (input = 3.0, output = 15.0), got {table!r}"
            )
        unknown = set(table) - set(_PRICE_KEYS)
        if unknown:
            raise ValueError(
                f"{model}: unknown key {sorted(unknown)[0]!r} (keys: {', '.join(_PRICE_KEYS)})"
            )
        figures: dict[str, float] = {}
        for key in _PRICE_KEYS:
            raw = table.get(key, table.get("input") if key.startswith("cache") else None)
            if raw is None:
                raise ValueError(f"{model}: needs {key!r} (per million tokens)")
            if isinstance(raw, bool) or not isinstance(raw, int | float) or raw < 0:
                raise ValueError(f"{model}: {key} must be a number of at least 0, got {raw!r}")
            figures[key] = float(raw)
        prices[str(model)] = Price(**figures)
    return prices


def _prices_from_env(value: Any) -> dict[str, Price]:
    """A variable holds the table as JSON: {"model": {"input": 3, "output": 15}}."""
    import json

    try:
        return _prices(json.loads(str(value)))
    except json.JSONDecodeError:
        raise ValueError(
            'must be JSON, e.g. {"claude-sonnet-4-5": {"input": 3, "output": 15}}'
        ) from None


def _shell_commands(value: Any) -> tuple[str, ...]:
    """A list of shell commands (each run as `bash -c COMMAND`); one string is one command."""
    if isinstance(value, str):
        value = [value] if value.strip() else []
    if not isinstance(value, list | tuple) or not all(
        isinstance(item, str) and item.strip() for item in value
    ):
        raise ValueError(f"must be a list of shell commands (strings), got {value!r}")
    if any("\0" in item for item in value):
        raise ValueError("a command may not hold a NUL character")
    return tuple(value)


def _shell_commands_from_env(value: Any) -> tuple[str, ...]:
    """From a variable: one command a line."""
    text = value if isinstance(value, str) else ""
    return tuple(line for line in text.splitlines() if line.strip())


def _host_name(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", value):
        raise ValueError(
            f"must be a host name (letters, digits, '.', '_', '-'; at most 63), got {value!r}"
        )
    return value


def _positive(value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"must be a whole number of at least 1, got {value!r}")
    return value


def _egress(value: Any) -> tuple[str, ...]:
    """`sandbox_egress`: its entries as `legion.core.egress` says them again (a preset
    expanded), each checked."""
    from legion.core import egress

    if not isinstance(value, list | tuple) or not all(isinstance(i, str) for i in value):
        raise ValueError(
            f'must be a list of strings (`["pypi.org", "@registries"]`), got {value!r}'
        )
    return egress.texts(egress.parse(value))


def _egress_from_env(value: Any) -> tuple[str, ...]:
    return _egress(str(value).replace(",", " ").split())


def _egress_narrowed(user: tuple[str, ...], repository: tuple[str, ...]) -> tuple[str, ...]:
    from legion.core import egress

    return egress.texts(egress.narrow(egress.parse(user), egress.parse(repository)))


def _store_url(value: Any) -> str | None:
    # Never quoted back: the URL may carry a password.
    if not isinstance(value, str):
        raise ValueError('must be a postgresql:// URL, or "sqlite"')
    text = value.strip()
    if text.lower() in ("", "sqlite"):
        return None
    if not text.startswith(("postgresql://", "postgres://")):
        raise ValueError('must be a postgresql:// URL, or "sqlite" (the value is not shown)')
    return text


def _store_shown(value: Any) -> Any:
    return url_without_secrets(value) if isinstance(value, str) else value


def _branch(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or value.startswith("-"):
        raise ValueError(f"must be a branch name, got {value!r}")
    return value.strip()


CORE_SPECS: tuple[SettingSpec, ...] = (
    SettingSpec("project_id", _uuid, repo_only=True),
    SettingSpec("issue_key", _issue_key, "LEG", repo_only=True),
    SettingSpec("tracker", _backend(TRACKERS), plugins.DEFAULT_BACKEND, widens=True),
    SettingSpec("forge", _backend(FORGES), plugins.DEFAULT_BACKEND, widens=True),
    SettingSpec("remote", _branch, "origin", widens=True),
    SettingSpec("statuses", _statuses, {}, parse_env=_statuses_from_env),
    SettingSpec("base_branch", _branch),
    SettingSpec("state_dir", path, widens=True),
    # Bounds on spending: a repository's config may lower them, never raise them (`caps`).
    SettingSpec("wip_limit", _wip_limit, caps=True),
    SettingSpec("token_budget", _wip_limit, caps=True),
    SettingSpec("daily_token_budget", _wip_limit, caps=True),
    SettingSpec("idle_spend_limit", _wip_limit, DEFAULT_IDLE_SPEND_LIMIT, caps=True),
    SettingSpec("prices", _prices, {}, parse_env=_prices_from_env),
    SettingSpec("labels", _labels, (), parse_env=_labels_from_env),
    SettingSpec(
        "backlog_opt_in_labels",
        _opt_in_labels,
        DEFAULT_BACKLOG_OPT_IN,
        parse_env=_opt_in_labels_from_env,
        widens=True,  # `["*"]`: every Backlog issue anyone files gets a worker
    ),
    SettingSpec("workspace_root", path, widens=True),
    SettingSpec("tmux_socket", path, widens=True),
    SettingSpec("tmux_config", path, widens=True),
    SettingSpec("runtime", _runtime, plugins.DEFAULT_RUNTIME, widens=True),
    SettingSpec("runtimes", _runtimes, {}, parse_env=_runtimes_from_env, widens=True),
    SettingSpec("stale_after", _seconds, 600.0),
    SettingSpec("workspace_vcs", choice(("auto", "git", "jj")), "auto", widens=True),
    SettingSpec("regenerable", strings, DEFAULT_REGENERABLE),
    SettingSpec("controller_mode", choice(("auto", "llm", "manual")), "auto"),
    SettingSpec("sandbox", choice(("bwrap", "none")), widens=True),
    # Commands run in a worker's workspace: the user's, or a trusted repository config's.
    SettingSpec(
        "workspace_setup", _shell_commands, (), parse_env=_shell_commands_from_env, widens=True
    ),
    SettingSpec(
        "workspace_refresh", _shell_commands, (), parse_env=_shell_commands_from_env, widens=True
    ),
    SettingSpec("workspace_setup_timeout", _seconds, 900.0),
    # The embedded forge's CI: run by the daemon, confined; a repository's only once trusted.
    SettingSpec("checks", _shell_commands, (), parse_env=_shell_commands_from_env, widens=True),
    SettingSpec("checks_timeout", _seconds, 900.0),
    # Where a confined session may connect besides the model (`legion.core.egress`); a
    # repository's config only narrows the user's list.
    SettingSpec(
        "sandbox_egress",
        _egress,
        (),
        parse_env=_egress_from_env,
        narrows=_egress_narrowed,
    ),
    SettingSpec("tick", _seconds, 60.0),
    SettingSpec("restart_cooldown", _seconds, 60.0),
    SettingSpec("checkpoint_every", _seconds, 300.0),
    SettingSpec("task_sync", _switch, True),
    SettingSpec("store", _store_url, shown=_store_shown, user_only=True),
    SettingSpec("host_name", _host_name),
    SettingSpec("max_sessions", _positive),
    SettingSpec("host_timeout", _seconds, 60.0),
)
