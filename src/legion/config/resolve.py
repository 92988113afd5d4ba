"""Settings: CLI flag > environment (LEGION_*) > repo config > user config > default.

Every value is validated where it is read, and a bad one is reported with its file (or
variable), key and what is wrong. A repository's config that widens what runs, or raises a
budget above the user's own, waits for the user's trust (`legion.trust`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from legion import trust
from legion.config.files import read_config
from legion.config.paths import CONFIG_FILE_NAME, state_home, user_config_path
from legion.config.settings import SPEC_BY_NAME, SPECS, Settings, settings_of
from legion.errors import ConfigError
from legion.setting_spec import (
    SettingSpec,
)


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


def machine_settings(env: Mapping[str, str]) -> Settings:
    """The settings outside any project (environment and user config), for commands such as
    `legion demo` and `legion doctor` that run before a project exists."""
    return resolve_settings(Path(os.devnull), env, flags={"project_id": str(uuid.UUID(int=0))})
