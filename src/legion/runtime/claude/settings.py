"""Claude Code's settings: which `claude` runs, where its sessions keep their config and
transcripts, the arguments every session gets, and its permission mode."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from legion.setting_spec import SettingSpec, choice_exact, path, strings

PERMISSION_MODES = ("bypass", "acceptEdits", "auto", "default", "plan")


@dataclass(frozen=True)
class ClaudeSettings:
    bin: Path | None = None  # None: Legion's install, else `claude` on PATH
    # Where this project's sessions keep their config and transcripts (CLAUDE_CONFIG_DIR);
    # None: the environment's, else ~/.claude.
    config_dir: Path | None = None
    args: tuple[str, ...] = ()
    permission_mode: str = "bypass"

    specs: ClassVar[tuple[SettingSpec, ...]] = (
        SettingSpec("claude_bin", path, widens=True),
        SettingSpec("claude_config_dir", path, widens=True),
        SettingSpec("claude_args", strings, (), widens=True),
        SettingSpec("permission_mode", choice_exact(PERMISSION_MODES), "bypass", widens=True),
    )
    fields: ClassVar[Mapping[str, str]] = {
        "claude_bin": "bin",
        "claude_config_dir": "config_dir",
        "claude_args": "args",
        "permission_mode": "permission_mode",
    }
