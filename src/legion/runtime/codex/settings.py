"""Codex's settings: which `codex` runs, its sessions' CODEX_HOME, the arguments of every
turn."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from legion.setting_spec import SettingSpec, path, strings


@dataclass(frozen=True)
class CodexSettings:
    bin: Path | None = None  # None: Legion's install, else `codex` on PATH
    home: Path | None = None  # CODEX_HOME of its sessions; None: the environment's
    args: tuple[str, ...] = ()

    specs: ClassVar[tuple[SettingSpec, ...]] = (
        SettingSpec("codex_bin", path, widens=True),
        SettingSpec("codex_home", path, widens=True),
        SettingSpec("codex_args", strings, (), widens=True),
    )
    fields: ClassVar[Mapping[str, str]] = {
        "codex_bin": "bin",
        "codex_home": "home",
        "codex_args": "args",
    }
