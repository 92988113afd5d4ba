"""Settings: CLI flag > environment (LEGION_*) > repo config > user config > default.

The repo config is `.legion/config.toml` at the root of the project's git repository; the user
config is `$XDG_CONFIG_HOME/legion/config.toml`. Every value is validated where it is read, and a
bad one is reported with its file (or variable), key and what is wrong.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tomllib
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from legion import plugins, trust
from legion.core.budget import Limits
from legion.core.model import Status, validate_issue_key, validate_label_name
from legion.core.pickup import DEFAULT_BACKLOG_OPT_IN, EVERY_ISSUE
from legion.core.statusmap import parse_status_table
from legion.core.text import url_without_secrets
from legion.core.usage import Price
from legion.errors import ConfigError, InputError, ToolMissingError
from legion.setting_spec import (
    SettingSpec,
    SettingsSection,
    choice,
    path,
    section_of,
    section_value,
    strings,
)

CONFIG_DIR_NAME = ".legion"
CONFIG_FILE_NAME = "config.toml"

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
    SettingSpec("store", _store_url, shown=_store_shown, user_only=True),
    SettingSpec("host_name", _host_name),
    SettingSpec("max_sessions", _positive),
    SettingSpec("host_timeout", _seconds, 60.0),
)
# Each plugin's own settings section (`legion.plugins`): its keys sit beside the project's in
# the same files and variables, and are read by the same rules.
SECTIONS: tuple[type[SettingsSection], ...] = tuple(
    plugins.load(where)  # type: ignore[misc]
    for where in [plugin.settings for plugin in plugins.BACKENDS]
    + [plugin.settings for plugin in plugins.RUNTIMES]
    if where is not None
)
SPECS: tuple[SettingSpec, ...] = CORE_SPECS + tuple(
    spec for section in SECTIONS for spec in section.specs
)
SPEC_BY_NAME = {spec.name: spec for spec in SPECS}
Section = TypeVar("Section")  # a plugin's settings section


@dataclass(frozen=True)
class Settings:
    project_id: str
    issue_key: str = "LEG"
    tracker: str = plugins.DEFAULT_BACKEND
    forge: str = plugins.DEFAULT_BACKEND
    remote: str = "origin"
    statuses: Mapping[str, Status] = field(default_factory=dict)
    base_branch: str | None = None
    state_dir: Path | None = None
    wip_limit: int | None = None
    token_budget: int | None = None  # tokens an issue's workers may use before a human is asked
    # Tokens every session together may use in a day (from 00:00 UTC) before requests stop.
    daily_token_budget: int | None = None
    # Tokens a worker may spend with no commit, workspace change, comment or message before it
    # is stopped and a human asked (None: never).
    idle_spend_limit: int | None = DEFAULT_IDLE_SPEND_LIMIT
    # What a million tokens of each model cost (`legion usage` shows money with them).
    prices: Mapping[str, Price] = field(default_factory=dict)
    labels: tuple[str, ...] = ()
    # A Backlog issue is worked on only with one of these labels (["*"]: every one).
    backlog_opt_in_labels: tuple[str, ...] = DEFAULT_BACKLOG_OPT_IN
    workspace_root: Path | None = None
    tmux_socket: Path | None = None
    tmux_config: Path | None = None
    runtime: str = plugins.DEFAULT_RUNTIME  # the agent CLI of every role `runtimes` does not name
    runtimes: Mapping[str, str] = field(default_factory=dict)  # role: runtime
    stale_after: float = 600.0
    workspace_vcs: str = "auto"
    regenerable: tuple[str, ...] = DEFAULT_REGENERABLE
    controller_mode: str = "auto"
    # How workers are confined: "bwrap", "none"; None: bubblewrap where it works (`legion.sandbox`).
    sandbox: str | None = None
    # Shell commands run in a new workspace before its first session, and before each later
    # one; the seconds each list may take (`legion.workspaces.setup`).
    workspace_setup: tuple[str, ...] = ()
    workspace_refresh: tuple[str, ...] = ()
    workspace_setup_timeout: float = 900.0
    # Where a confined session may connect besides the model: `legion.core.egress`'s entries.
    sandbox_egress: tuple[str, ...] = ()
    tick: float = 60.0
    restart_cooldown: float = 60.0
    checkpoint_every: float = 300.0  # seconds between a running worker's checkpoints
    # Where Legion keeps what it shares: None, the SQLite file in the state folder; a
    # `postgresql://` URL, a PostgreSQL database every host of a fleet reaches (a credential).
    store: str | None = None
    # This machine in the fleet (`legion.fleet.hosts`): its name (None: the hostname), how many
    # sessions it runs at once (None: from its cores and memory), and how long without a
    # heartbeat before a host is lost (also how long the leader lease lasts).
    host_name: str | None = None
    max_sessions: int | None = None
    host_timeout: float = 60.0
    # Each plugin's typed settings, by its section's class (`section`).
    sections: Mapping[type, Any] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    def section(self, kind: type[Section]) -> Section:
        """A plugin's own settings (`settings.section(LinearSettings).team`); its defaults when
        these settings were made without it."""
        found = self.sections.get(kind)
        return found if isinstance(found, kind) else kind()

    def value(self, name: str) -> Any:
        """The value of the setting `name` (a key of .legion/config.toml), wherever it lives."""
        if name in _CORE_NAMES:
            return getattr(self, name)
        for kind in SECTIONS:
            if any(spec.name == name for spec in kind.specs):
                return section_value(self.section(kind), name)
        raise KeyError(name)

    @property
    def limits(self) -> Limits:
        """The token budgets the model proxy and a pass enforce."""
        return Limits(self.token_budget, self.daily_token_budget)

    def runtime_for(self, role: str) -> str:
        """The agent CLI that runs `role` (a mode's session mode, or `controller`)."""
        return self.runtimes.get(role, self.runtime)


def roles_on(runtime: str, settings: Iterable[Settings]) -> list[str]:
    """The roles that run on `runtime` under any of `settings`, in `RUNTIME_ROLES` order."""
    every = list(settings)
    return [role for role in RUNTIME_ROLES if any(s.runtime_for(role) == runtime for s in every)]


def user_config_path(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".config")
    return Path(base) / "legion" / CONFIG_FILE_NAME


# Where the machine's Legion state is, when not under $XDG_STATE_HOME: `legion demo` keeps
# its own in the demo's folder, so that removing the folder leaves nothing of it behind.
STATE_HOME_ENV = "LEGION_STATE_HOME"


def state_home(env: Mapping[str, str]) -> Path:
    """The machine's Legion state: the bus, the configs you trust, each project's state unless
    its `state_dir` says otherwise, the TUI's read marks. `$LEGION_STATE_HOME` when set, else
    `$XDG_STATE_HOME/legion` (`~/.local/state/legion`)."""
    own = env.get(STATE_HOME_ENV, "")
    if own:
        return Path(own).expanduser()
    base = env.get("XDG_STATE_HOME") or str(
        Path(env.get("HOME", "~")).expanduser() / ".local" / "state"
    )
    return Path(base) / "legion"


# A repository's config is a few hundred bytes; one larger is not read.
MAX_REPO_CONFIG = 1 << 20


def read_config(path: Path, *, repo: bool = False) -> tuple[bytes, dict[str, Any]]:
    """The file's bytes and its table (b"" and {} when it does not exist); a broken file is a
    ConfigError. One read serves both, so what is trusted is what is used. A repository's
    `.legion/config.toml` is whatever was committed: it is read through no link, only when it
    is a regular file, and up to `MAX_REPO_CONFIG` bytes (`legion.files.worker_written`)."""
    from legion.files.worker_written import read_regular

    below = path.parent.parent if repo and path.parent.name == CONFIG_DIR_NAME else None
    try:
        if below is None:
            data = path.read_bytes()
        else:
            data = read_regular(below, path.relative_to(below), cap=MAX_REPO_CONFIG)
    except FileNotFoundError:
        return b"", {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    try:
        return data, tomllib.loads(data.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None


def read_toml(path: Path) -> dict[str, Any]:
    """The file's table, or {} when it does not exist; a broken file is a ConfigError."""
    return read_config(path)[1]


def widening_keys(table: Mapping[str, Any], below: Mapping[str, Any] | None = None) -> list[str]:
    """The keys of a config table that choose what Legion runs or where (`SettingSpec.widens`),
    set to anything but their default (which widens nothing: `legion init` writes the embedded
    tracker's name), and the bounds on spending (`SettingSpec.caps`) it raises above `below`
    (the user's own values by key: their config's; a key not there, its default). A value that
    does not parse is left to its parse to report."""
    return list(_widening(table, below))


def _widening(table: Mapping[str, Any], below: Mapping[str, Any] | None) -> dict[str, str]:
    """`widening_keys`, each with how it is named in the refusal."""
    found: dict[str, str] = {}
    for key, raw in table.items():
        spec = SPEC_BY_NAME.get(key)
        if spec is None or not (spec.widens or spec.caps):
            continue
        try:
            value = spec.parse(raw)
        except ValueError:
            continue  # its parse says what is wrong with it
        if spec.caps:
            bound = (below or {}).get(key, spec.default)
            if _above(value, bound):
                found[key] = f"{key} ({_limit(value)}, over your {_limit(bound)})"
        elif value != spec.default:
            found[key] = key
    return found


def _above(value: int | None, bound: int | None) -> bool:
    """Whether the bound `value` allows more than `bound` (None: unlimited)."""
    return bound is not None and (value is None or value > bound)


def _limit(value: int | None) -> str:
    return "unlimited" if value is None else str(value)


def _layer_from_file(
    path: Path,
    *,
    repo: bool,
    state: Path | None = None,
    below: Mapping[str, Any] | None = None,
) -> dict[str, tuple[Any, str]]:
    """One file's settings. `state`: for a repository's config, the user's state home, where
    the files the user trusts are recorded (None: trusted, for `legion trust` itself); `below`:
    the user's own values by key, which a repository's config may lower, not raise."""
    layer: dict[str, tuple[Any, str]] = {}
    data, table = read_config(path, repo=repo)
    widening = _widening(table, below) if repo and state is not None else {}
    if state is not None and widening and not trust.is_trusted(state, path, data):
        raises = [key for key in widening if SPEC_BY_NAME[key].caps]
        what = [] if len(raises) == len(widening) else ["what Legion runs, or where"]
        what += ["a budget above your own"] if raises else []
        raise ConfigError(
            f"{path} sets what only you choose ({'; '.join(what)}): "
            f"{', '.join(widening.values())}; set it in your user config or a LEGION_* "
            "variable, or read the file and run `legion trust` to trust it as it is"
        )
    for key, raw in table.items():
        spec = SPEC_BY_NAME.get(key)
        if spec is None:
            raise ConfigError(unknown_setting(key, f"in {path}"))
        if spec.repo_only and not repo:
            raise ConfigError(f"{path}: key {key!r} belongs in the repository's {CONFIG_FILE_NAME}")
        if spec.user_only and repo:
            raise ConfigError(
                f"{path}: key {key!r} belongs in your user config "
                f"(~/.config/legion/config.toml) or the environment ({spec.env_var}), "
                "never in the repository"
            )
        layer[key] = (_parse(spec, raw, f"{path}: key {key!r}"), str(path))
    return layer


def unknown_setting(name: str, where: str, *, variable: bool = False) -> str:
    """The one line that refuses a setting nobody knows (a key `name`, or with `variable` the
    variable of that name): the one it likely meant, else every setting's name."""
    from legion.core.suggest import closest

    key = name.removeprefix("LEGION_").lower() if variable else name
    shown = name if variable else f'"{name}"'
    match = closest(key, SPEC_BY_NAME)
    if match is not None:
        meant = SPEC_BY_NAME[match].env_var if variable else f'"{match}"'
        return f"unknown setting {shown} {where}: did you mean {meant}?"
    return f"unknown setting {shown} {where} (the settings: {', '.join(SPEC_BY_NAME)})"


# The LEGION_* variables that are no setting: what Legion sets in the sessions, the daemon's
# commands and its own processes, and the switches for debugging and tests. Any other LEGION_*
# variable close to a setting's is refused as a misspelt setting (`environment_typos`).
OTHER_VARIABLES = frozenset(
    {
        "LEGION_AUTHOR", "LEGION_CAPABILITY", "LEGION_CODEX_OVERRIDES", "LEGION_DEBUG",
        "LEGION_FAKE_OPENAI_KEY", "LEGION_FENCE_LEASE", "LEGION_HOOK_CONTEXT",
        "LEGION_HOOK_INBOX", "LEGION_HOST", "LEGION_ISSUE_ID", "LEGION_LOG_LEVEL", "LEGION_MODE",
        "LEGION_MODEL_TOKEN", "LEGION_RELAY_SOCKET", "LEGION_RELAY_WAIT", "LEGION_REPO",
        "LEGION_RUN_BY_DAEMON", "LEGION_SESSION_ID", "LEGION_SPAWN_INSTANCE",
        "LEGION_STATE_HOME", "LEGION_TEST_KILL_AT", "LEGION_TEST_KILL_LOG", "LEGION_TRACE",
        "LEGION_WAKE",
    }
)  # fmt: skip


def _unknown_variables(env: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """The LEGION_* variables set in `env` that are neither a setting nor one of Legion's own
    (`OTHER_VARIABLES`), by name, each with the setting it is close to (None: none)."""
    from legion.core.suggest import closest

    settings = {spec.env_var for spec in SPECS}
    return [
        (name, closest(name.removeprefix("LEGION_").lower(), SPEC_BY_NAME))
        for name in sorted(env)
        if name.startswith("LEGION_") and name not in settings and name not in OTHER_VARIABLES
    ]


def ignored_variables(env: Mapping[str, str]) -> list[str]:
    """The LEGION_* variables Legion ignores: neither a setting's, nor Legion's own, nor close
    to a setting's (one close to a setting's is refused as misspelt). `legion doctor` names
    them."""
    return [name for name, meant in _unknown_variables(env) if meant is None]


def _refuse_misspelt_variables(env: Mapping[str, str]) -> None:
    """A LEGION_* variable close to a setting's is refused, as an unknown key in a file is: it
    would otherwise be ignored without a word. One close to none is left alone (another
    program's, maybe): `ignored_variables`."""
    for name, meant in _unknown_variables(env):
        if meant is not None:
            raise ConfigError(unknown_setting(name, "in the environment", variable=True))


def user_values(env: Mapping[str, str]) -> dict[str, Any]:
    """The user's own config's values by key (what a repository's config may lower)."""
    layer = _layer_from_file(user_config_path(env), repo=False)
    return {key: value for key, (value, _) in layer.items()}


def _parse(spec: SettingSpec, raw: Any, where: str, *, from_env: bool = False) -> Any:
    parse = spec.parse_env if from_env and spec.parse_env is not None else spec.parse
    try:
        return parse(raw)
    except ValueError as exc:
        raise ConfigError(f"{where} {exc}") from None


def resolve_settings(
    repo_config: Path,
    env: Mapping[str, str],
    flags: Mapping[str, Any] | None = None,
    *,
    trusting: bool = False,
) -> Settings:
    """Merge every layer, highest first, validating each value where it came from. A
    repository's config that widens what runs, or raises a budget above the user's own, must
    be trusted (`legion.trust`), unless `trusting` (`legion trust`, which shows it first)."""
    _refuse_misspelt_variables(env)
    layers: list[dict[str, tuple[Any, str]]] = []
    layers.append(
        {
            name: (_parse(SPEC_BY_NAME[name], value, f"option --{name.replace('_', '-')}"), "flag")
            for name, value in (flags or {}).items()
            if value is not None
        }
    )
    layers.append(
        {
            spec.name: (
                _parse(spec, env[spec.env_var], f"environment {spec.env_var}", from_env=True),
                "env",
            )
            for spec in SPECS
            if env.get(spec.env_var, "") != ""
        }
    )
    state = None if trusting else state_home(env)
    user = _layer_from_file(user_config_path(env), repo=False)
    below = {key: value for key, (value, _) in user.items()}
    layers.append(_layer_from_file(repo_config, repo=True, state=state, below=below))
    layers.append(user)

    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    repository = layers[2]
    for spec in SPECS:
        for index, layer in enumerate(layers):
            if spec.narrows is not None and index == 2:
                continue  # the repository's value narrows the user's, below
            if spec.name in layer:
                values[spec.name], sources[spec.name] = layer[spec.name]
                break
        else:
            values[spec.name], sources[spec.name] = spec.default, "default"
        if spec.narrows is not None and spec.name in repository:
            narrower, where = repository[spec.name]
            values[spec.name] = spec.narrows(values[spec.name], narrower)
            sources[spec.name] = f"{sources[spec.name]}, narrowed by {where}"
    if values["project_id"] is None:
        raise ConfigError(
            f"{repo_config}: missing key 'project_id' (run `legion init` to create it)"
        )
    return settings_of(values, sources)


_CORE_NAMES = frozenset(spec.name for spec in CORE_SPECS)


def settings_of(values: Mapping[str, Any], sources: Mapping[str, str] | None = None) -> Settings:
    """Settings from values by key (a plugin's keys go to its section); a key not given has
    its default."""
    unknown = set(values) - set(SPEC_BY_NAME)
    if unknown:
        raise TypeError(f"unknown settings: {', '.join(sorted(unknown))}")
    full = {spec.name: spec.default for spec in SPECS} | dict(values)
    core = {name: value for name, value in full.items() if name in _CORE_NAMES}
    sections = {kind: section_of(kind, full) for kind in SECTIONS}
    return Settings(**core, sections=sections, sources=dict(sources or {}))


@dataclass(frozen=True)
class Project:
    """A git repository that Legion manages, and its resolved settings."""

    root: Path
    settings: Settings
    env: Mapping[str, str]

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_DIR_NAME / CONFIG_FILE_NAME

    @property
    def state_dir(self) -> Path:
        if self.settings.state_dir is not None:
            return self.settings.state_dir
        return state_home(self.env) / self.settings.project_id

    @property
    def db_path(self) -> Path:
        return self.state_dir / "legion.db"

    @property
    def workspace_root(self) -> Path:
        """Where issue workspaces go: configured, else a folder beside the repository."""
        if self.settings.workspace_root is not None:
            return self.settings.workspace_root
        return self.root.parent / f"{self.root.name}-workspaces"


def git_toplevel(start: Path) -> Path | None:
    """The main working tree's root for `start` (also from inside a linked worktree)."""
    try:
        result = subprocess.run(
            ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
            cwd=start,
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        raise ToolMissingError(
            "git is not installed: install git (e.g. apt-get install git)"
        ) from None
    except NotADirectoryError:
        return None
    if result.returncode != 0:
        return None
    common = Path(result.stdout.strip())
    # A normal repository's common dir is <root>/.git; a bare one has no working tree.
    return common.parent if common.name == ".git" else None


def find_project_root(start: Path) -> Path:
    """The nearest folder at or above `start` holding .legion/config.toml, else the main
    working tree of the git repository `start` is in (so workers in worktrees find it too)."""
    start = start.resolve()
    if not start.is_dir():
        raise ConfigError(f"{start} is not a directory")
    for folder in (start, *start.parents):
        if (folder / CONFIG_DIR_NAME / CONFIG_FILE_NAME).is_file():
            return folder
    toplevel = git_toplevel(start)
    if toplevel is not None and (toplevel / CONFIG_DIR_NAME / CONFIG_FILE_NAME).is_file():
        return toplevel
    where = f"{start} or the git repository it is in" if toplevel else str(start)
    raise ConfigError(
        f"no Legion project found in {where}: run `legion init` in your git repository"
    )


def machine_settings(env: Mapping[str, str]) -> Settings:
    """The settings outside any project (environment and user config), for commands such as
    `legion demo` and `legion doctor` that run before a project exists."""
    return resolve_settings(Path(os.devnull), env, flags={"project_id": str(uuid.UUID(int=0))})


def load_project(
    start: Path,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Project:
    env = os.environ if env is None else env
    root = find_project_root(start)
    settings = resolve_settings(root / CONFIG_DIR_NAME / CONFIG_FILE_NAME, env, flags)
    return Project(root=root, settings=settings, env=env)


def toml_value(value: Any) -> str:
    """A TOML literal for the simple values Legion writes (strings, ints, bools, lists)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):  # Python's repr is TOML's spelling (`inf`, `nan` too)
        return repr(value)
    if isinstance(value, str):
        escaped = "".join(_toml_char(c) for c in value)
        return f'"{escaped}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):  # an inline table; its keys are quoted, whatever they are
        return (
            "{"
            + ", ".join(f"{toml_value(str(k))} = {toml_value(v)}" for k, v in value.items())
            + "}"
        )
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _toml_char(char: str) -> str:
    if char.isprintable() and char not in '"\\':
        return char
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def write_repo_config(root: Path, values: Mapping[str, Any]) -> Path:
    """Write .legion/config.toml atomically (never a half-written file). What is in `.legion`
    is whatever a commit put there: a new file of a name drawn now, made through no link
    (`legion.files.worker_written.replace_file`), renamed over the name; `.legion` a link is
    refused."""
    from legion.files.worker_written import replace_file

    folder = root / CONFIG_DIR_NAME
    with contextlib.suppress(FileExistsError):
        folder.mkdir()
    path = folder / CONFIG_FILE_NAME
    lines = ["# Legion project settings. See Legion's docs/configuration.md."]
    lines += [f"{key} = {toml_value(value)}" for key, value in values.items() if value is not None]
    try:
        replace_file(root, path, ("\n".join(lines) + "\n").encode("utf-8"), mode=0o644)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write: {exc}") from None
    return path


def config_value(spec: SettingSpec, text: str) -> Any:
    """The value `legion config set` writes for `text`, as the file will hold it: `text` read
    as a TOML value (`3`, `true`, `["a", "b"]`, `{todo = "Open"}`) when the setting's rules
    take that, else `text` itself as a string. Refused in one line, by the setting's rules,
    when neither is valid."""
    candidates: list[Any] = []
    with contextlib.suppress(tomllib.TOMLDecodeError):
        candidates.append(tomllib.loads(f"v = {text}")["v"])
    if not candidates or candidates[0] != text:
        candidates.append(text)
    error: ValueError | None = None
    for raw in candidates:
        try:
            spec.parse(raw)
        except ValueError as exc:
            error = error or exc
            continue
        return raw
    assert error is not None
    raise InputError(f"{spec.name} {error}")


def check_config_key(key: str, *, repo: bool) -> SettingSpec:
    """The spec of a key `legion config set` may write to a repository's config (`repo`) or
    the user's; else a one-line refusal (an unknown key with the known ones close to it)."""
    import difflib

    spec = SPEC_BY_NAME.get(key)
    if spec is None:
        close = difflib.get_close_matches(key, list(SPEC_BY_NAME), n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(repr(n) for n in close)}?)" if close else ""
        raise InputError(f"unknown setting {key!r}{hint}; `legion config` lists them all")
    if key == "project_id":
        raise InputError("project_id is the project's identity: `legion init` sets it, once")
    if spec.repo_only and not repo:
        raise InputError(f"{key} belongs in the repository's config: drop --user")
    if spec.user_only and repo:
        raise InputError(f"{key} belongs in your user config, never in the repository: add --user")
    return spec


def with_config_value(text: str, key: str, value: Any) -> str:
    """The config file's `text` with top-level `key` set to `value` and everything else kept
    (comments, order, other keys): its line replaced (or its `[key]` table), or a new line
    after the file's last top-level key. Refused when the file would not then read back as
    the same table with that one key changed (a value over several lines, a dotted key)."""
    before = tomllib.loads(text)
    lines = text.splitlines()
    header = re.compile(r"^\s*\[")
    first_table = next((i for i, line in enumerate(lines) if header.match(line)), len(lines))
    own = re.compile(rf"^\s*(?:{re.escape(key)}|\"{re.escape(key)}\")\s*=")
    new_line = f"{key} = {toml_value(value)}"
    found = next((i for i in range(first_table) if own.match(lines[i])), None)
    table = re.compile(rf"^\s*\[\s*(?:{re.escape(key)}|\"{re.escape(key)}\")\s*\]\s*(#.*)?$")
    start = next((i for i in range(first_table, len(lines)) if table.match(lines[i])), None)
    if start is not None:  # `[key]`: taken out, and written inline among the top-level keys
        end = next((i for i in range(start + 1, len(lines)) if header.match(lines[i])), len(lines))
        lines[start:end] = []
    if found is not None:
        lines[found] = new_line
    else:
        at = first_table
        while at > 0 and not lines[at - 1].strip():
            at -= 1
        lines.insert(at, new_line)
    after = "\n".join(lines) + "\n"
    expected = dict(before) | {key: value}
    try:
        written = tomllib.loads(after)
    except tomllib.TOMLDecodeError:
        written = None
    if written != expected:
        raise InputError(
            f"cannot change {key} without rewriting other lines of the file (a value over "
            "several lines, or a dotted key): edit the file by hand"
        )
    return after


def write_config_value(path: Path, key: str, value: Any, *, repo: bool = False) -> None:
    """Set `key` in the config file at `path` (made if missing), atomically, keeping the
    rest of the file. A repository's is read as loading reads it (a regular file, no link)."""
    data, _ = read_config(path, repo=repo)  # a broken file is reported as loading reports it
    updated = with_config_value(data.decode("utf-8"), key, value)
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    # A new file of a name drawn now (O_EXCL): never one a commit put there, nor its link.
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=path.parent, prefix=".config-", suffix=".tmp", delete=False
    ) as tmp:
        tmp.write(updated)
    if repo:  # the project's, committed: readable as git checks it out (the user's stays 0600)
        os.chmod(tmp.name, 0o644)
    Path(tmp.name).replace(path)
