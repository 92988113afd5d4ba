"""The settings record (`Settings`): every setting's value, the project's and each plugin's
section, made from values by key (`settings_of`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from legion import plugins
from legion.config.values import (
    CORE_SPECS,
    DEFAULT_IDLE_SPEND_LIMIT,
    DEFAULT_REGENERABLE,
    RUNTIME_ROLES,
)
from legion.core.budget import Limits
from legion.core.model import Status
from legion.core.pickup import DEFAULT_BACKLOG_OPT_IN
from legion.core.usage import Price
from legion.setting_spec import (
    SettingSpec,
    SettingsSection,
    section_of,
    section_value,
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
    # The embedded forge's CI: shell commands the daemon runs, each a check, on a pull
    # request's head whenever it changes (`legion.forges.local_checks`); the seconds each may take.
    checks: tuple[str, ...] = ()
    checks_timeout: float = 900.0
    # Where a confined session may connect besides the model: `legion.core.egress`'s entries.
    sandbox_egress: tuple[str, ...] = ()
    tick: float = 60.0
    restart_cooldown: float = 60.0
    checkpoint_every: float = 300.0  # seconds between a running worker's checkpoints
    # Each worker's task list mirrored into one comment on its issue (`legion.core.task_sync`).
    task_sync: bool = True
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
