"""Which agent CLI a session runs on (`legion.sessions.runtimes.RuntimeChoice`), alone: the
role's when it starts, the one recorded for it ever after (a retro resumes the implementer's
session where it ran), the controller's for a session with no worker record."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from legion.config.resolve import machine_settings
from legion.core.ids import session_id
from legion.core.model import Mode
from legion.errors import ConfigError
from legion.sessions.registry import WorkerRecord
from legion.sessions.runtimes import RuntimeChoice

CLAUDE = SimpleNamespace(name="claude-code")
CODEX = SimpleNamespace(name="codex")


class Records:
    """The registry's one question here: the current record of a session."""

    def __init__(self, *records: WorkerRecord) -> None:
        self.records = {record.session_id: record for record in records}

    def by_session(self, sid: str) -> WorkerRecord | None:
        return self.records.get(sid)


def record(sid: str, runtime: str, mode: Mode = Mode.IMPLEMENT) -> WorkerRecord:
    return WorkerRecord(1, "LEG-1", mode, sid, "w", Path("/ws"), "2026-01-01T00:00:00Z", runtime)


def choice(tmp_path: Path, *records: WorkerRecord, **settings: Any) -> RuntimeChoice:
    base = machine_settings({"XDG_CONFIG_HOME": str(tmp_path)})
    chosen = dataclasses.replace(base, **settings)
    runtimes: Any = {"claude-code": CLAUDE, "codex": CODEX}
    return RuntimeChoice(chosen, Records(*records), CLAUDE, runtimes)  # type: ignore[arg-type]


def test_each_role_runs_on_its_configured_cli(tmp_path: Path) -> None:
    runtimes = choice(tmp_path, runtime="claude-code", runtimes={"review": "codex"})
    assert runtimes.for_role("review") is CODEX
    assert runtimes.for_role("plan") is CLAUDE
    assert runtimes.controller is CLAUDE
    assert runtimes.in_use() == [CLAUDE, CODEX]  # each once, in the roles' order


def test_an_unknown_name_is_an_error_naming_the_known(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'nope'.*claude-code, codex"):
        choice(tmp_path).named("nope")


def test_a_session_keeps_the_cli_it_was_recorded_on(tmp_path: Path) -> None:
    base = machine_settings({"XDG_CONFIG_HOME": str(tmp_path)})
    implementer = session_id(base.project_id, "LEG-1", Mode.IMPLEMENT)
    runtimes = choice(tmp_path, record(implementer, "codex"), runtime="claude-code")
    # The retro resumes the implementer's session, on Codex where it ran, whatever the role says.
    assert runtimes.for_worker("LEG-1", Mode.RETRO) is CODEX
    assert runtimes.for_worker("LEG-1", Mode.PLAN) is CLAUDE  # no session yet: the role's
    assert runtimes.of_session(implementer) is CODEX
    assert runtimes.of(record("other", "gone")) is CLAUDE  # a CLI no longer known: the default


def test_a_session_with_no_worker_record_is_the_controllers(tmp_path: Path) -> None:
    runtimes = choice(tmp_path, runtimes={"controller": "codex"})
    assert runtimes.of_session("the-controller") is CODEX
