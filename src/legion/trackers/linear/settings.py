"""Linear's settings: the team (`linear_team = "ENG"`), whose key is its issues'."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from legion.setting_spec import SettingSpec


def _team_key(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a team key (e.g. ENG), got {value!r}")
    return value.strip().upper()


@dataclass(frozen=True)
class LinearSettings:
    team: str | None = None  # the team's key

    specs: ClassVar[tuple[SettingSpec, ...]] = (SettingSpec("linear_team", _team_key, widens=True),)
    fields: ClassVar[Mapping[str, str]] = {"linear_team": "team"}
