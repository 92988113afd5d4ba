"""How one setting is read: its name (the key of `.legion/config.toml`, `LEGION_<NAME>` in the
environment), the rules its value must meet, its default. The project's own settings are in
`legion.config`; each plugin's are in its settings section (`legion.plugins` lists them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar


@dataclass(frozen=True)
class SettingSpec:
    name: str
    parse: Callable[[Any], Any]
    default: Any = None
    repo_only: bool = False  # meaningless outside one repository (the project's identity)
    # The machine's, never one repository's (the store: every project here shares its bus,
    # and its URL may be a credential).
    user_only: bool = False
    # Chooses what Legion runs or where (a program, its arguments, the sandbox, a folder, a
    # remote): a repository's config may set it only once the user trusts that file
    # (`legion.trust`), since whoever lands a commit writes that file.
    widens: bool = False
    # A bound on spending (a token budget, a limit; None: unlimited): a repository's config may
    # lower it below what the user's config (or the default) allows, and raise it only once the
    # user trusts that file, as a `widens` setting.
    caps: bool = False
    # What a repository's config sets only narrows the user's value (theirs, from their
    # config or a LEGION_* variable; else the default): `narrows(user, repository)` is what is
    # used (the egress allow-list: a repository may allow less, never more).
    narrows: Callable[[Any, Any], Any] | None = None
    parse_env: Callable[[Any], Any] | None = None  # when a variable's text needs other parsing
    # How `legion config` shows the value, when it may hold a secret (a URL's password).
    shown: Callable[[Any], Any] | None = None

    @property
    def env_var(self) -> str:
        return f"LEGION_{self.name.upper()}"


class SettingsSection(Protocol):
    """A plugin's own typed settings (a frozen dataclass whose every field has a default): the
    specs of its keys, and which field holds each key's value."""

    specs: ClassVar[tuple[SettingSpec, ...]]
    fields: ClassVar[Mapping[str, str]]  # key of .legion/config.toml: the field holding it


Section = TypeVar("Section", bound=SettingsSection)


def section_of(kind: type[Section], values: Mapping[str, Any]) -> Section:
    """The section of `kind` holding `values` (by key); a key not given keeps its default."""
    return kind(**{field: values[key] for key, field in kind.fields.items() if key in values})


def section_value(section: SettingsSection, key: str) -> Any:
    return getattr(section, type(section).fields[key])


def choice(options: tuple[str, ...]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if not isinstance(value, str) or value.strip().lower() not in options:
            raise ValueError(
                f"must be one of {', '.join(options)}, got {value!r}{_meant(value, options)}"
            )
        return value.strip().lower()

    return parse


def choice_exact(options: tuple[str, ...]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if value not in options:
            raise ValueError(
                f"must be one of {', '.join(options)}, got {value!r}{_meant(value, options)}"
            )
        return str(value)

    return parse


def _meant(value: Any, options: tuple[str, ...]) -> str:
    """`: did you mean "x"?` when a string given is close to one of `options`."""
    from legion.core.suggest import did_you_mean

    return did_you_mean(value.strip().lower(), options) if isinstance(value, str) else ""


def path(value: Any) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a path, got {value!r}")
    return Path(value).expanduser()


def strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        import shlex

        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise ValueError(f"cannot split {value!r}: {exc}") from None
    if not isinstance(value, list | tuple) or not all(isinstance(i, str) for i in value):
        raise ValueError(f"must be a list of strings, got {value!r}")
    return tuple(value)
