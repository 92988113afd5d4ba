"""Gemini's settings: which `gemini` runs, your own Gemini home, the model its sessions use,
the arguments of every turn."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from legion.setting_spec import SettingSpec, path, strings

# Without `-m` the CLI first asks a router model which model to use (docs/gemini-cli.md).
DEFAULT_MODEL = "gemini-2.5-pro"
# A model's name is part of the request's path (`/v1beta/models/<model>:...`).
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def model_name(value: object) -> str:
    if not isinstance(value, str) or not _MODEL_NAME.fullmatch(value.strip()):
        raise ValueError(f"must be a Gemini model's name (gemini-2.5-pro), got {value!r}")
    return value.strip()


@dataclass(frozen=True)
class GeminiSettings:
    bin: Path | None = None  # None: Legion's install, else `gemini` on PATH
    home: Path | None = None  # your GEMINI_CLI_HOME (its `.gemini/settings.json`); None: ~
    model: str = DEFAULT_MODEL
    args: tuple[str, ...] = ()

    specs: ClassVar[tuple[SettingSpec, ...]] = (
        SettingSpec("gemini_bin", path, widens=True),
        SettingSpec("gemini_home", path, widens=True),
        SettingSpec("gemini_model", model_name, DEFAULT_MODEL, widens=True),
        SettingSpec("gemini_args", strings, (), widens=True),
    )
    fields: ClassVar[Mapping[str, str]] = {
        "gemini_bin": "bin",
        "gemini_home": "home",
        "gemini_model": "model",
        "gemini_args": "args",
    }
