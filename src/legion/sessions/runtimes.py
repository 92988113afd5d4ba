"""Which agent CLI a session runs on: the one its role is configured for when it starts (the
`runtime`/`runtimes` settings), the one it was recorded on ever after (a retro resumes the
implementer's session where it ran). Everything that reads or types into a session asks here.
"""

from __future__ import annotations

from collections.abc import Mapping

from legion.config.settings import Settings
from legion.config.values import RUNTIME_ROLES
from legion.core.decide import session_mode
from legion.core.ids import session_id
from legion.core.model import Mode
from legion.errors import ConfigError
from legion.runtime.base import AgentRuntime
from legion.sessions.registry import Registry, WorkerRecord


class RuntimeChoice:
    def __init__(
        self,
        settings: Settings,
        registry: Registry,
        default: AgentRuntime,
        runtimes: Mapping[str, AgentRuntime] | None = None,
    ) -> None:
        """`default`: the CLI of a session whose own is unknown; `runtimes`: every CLI a role
        can be configured to run on, by name."""
        self.settings = settings
        self.registry = registry
        self.default = default
        self.by_name: dict[str, AgentRuntime] = dict(runtimes or {})
        self.by_name.setdefault(default.name, default)

    def named(self, name: str) -> AgentRuntime:
        found = self.by_name.get(name)
        if found is None:
            raise ConfigError(
                f"no agent runtime named {name!r} (known: {', '.join(sorted(self.by_name))})"
            )
        return found

    def for_role(self, role: str) -> AgentRuntime:
        """The CLI configured for `role` (a session mode, or `controller`)."""
        return self.named(self.settings.runtime_for(role))

    @property
    def controller(self) -> AgentRuntime:
        return self.for_role("controller")

    def of(self, record: WorkerRecord) -> AgentRuntime:
        """The CLI a worker's session runs on (as recorded when it started)."""
        return self.by_name.get(record.runtime, self.default)

    def of_session(self, sid: str) -> AgentRuntime:
        """The CLI session `sid` runs on: its worker's, else (the controller) the controller's."""
        record = self.registry.by_session(sid)
        return self.controller if record is None else self.of(record)

    def for_worker(self, issue: str, mode: Mode) -> AgentRuntime:
        """The CLI for `mode`'s session of `issue`: the one it already ran on, when it did (a
        retro resumes the implementer's session where it ran), else the configured one."""
        sid = session_id(self.settings.project_id, issue, session_mode(mode))
        record = self.registry.by_session(sid)
        if record is not None:
            return self.of(record)
        return self.for_role(session_mode(mode).value)

    def in_use(self) -> list[AgentRuntime]:
        """The CLIs the configured roles run on, each once."""
        names = dict.fromkeys(self.settings.runtime_for(role) for role in RUNTIME_ROLES)
        return [self.named(name) for name in names]
