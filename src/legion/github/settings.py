"""GitHub's settings, for its tracker and its forge: the repository, the Projects (v2) board
whose Status field is the status, and how pull requests are merged."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from legion.setting_spec import SettingSpec, choice

MERGE_METHODS = ("squash", "merge", "rebase")


def _github_repo(value: Any) -> str:
    text = value.strip() if isinstance(value, str) else ""
    owner, _, name = text.partition("/")
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
    if not owner or not name or "/" in name or not set(owner + name) <= allowed:
        raise ValueError(f"must be OWNER/NAME (e.g. acme/widgets), got {value!r}")
    return text


def _project_number(value: Any) -> int:
    """A GitHub Projects (v2) number: the N of github.com/orgs/OWNER/projects/N."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"must be a project number (1 or more), got {value!r}")
    return value


@dataclass(frozen=True)
class GitHubSettings:
    repo: str | None = None  # OWNER/NAME; None: the one the remote points at
    project: int | None = None  # the Projects (v2) board whose Status field is the status
    merge_method: str = "squash"

    specs: ClassVar[tuple[SettingSpec, ...]] = (
        SettingSpec("github_repo", _github_repo, widens=True),
        SettingSpec("github_project", _project_number),
        SettingSpec("merge_method", choice(MERGE_METHODS), "squash"),
    )
    fields: ClassVar[Mapping[str, str]] = {
        "github_repo": "repo",
        "github_project": "project",
        "merge_method": "merge_method",
    }
