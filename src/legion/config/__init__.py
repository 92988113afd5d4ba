"""A project: the git repository Legion manages, found from a folder, and its settings resolved
(`legion.config.resolve`: flag > environment > repo config > user config > default).

The repo config is `.legion/config.toml` at the root of the project's git repository; the user
config is `$XDG_CONFIG_HOME/legion/config.toml` (`legion.config.paths`). The settings' record
and rules: `legion.config.settings`, `legion.config.values`; the files: `legion.config.files`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from legion.config.paths import CONFIG_DIR_NAME, CONFIG_FILE_NAME, state_home
from legion.config.resolve import resolve_settings
from legion.config.settings import Settings
from legion.errors import ConfigError, ToolMissingError


@dataclass(frozen=True)
class Project:
    """A git repository that Legion manages, and its resolved settings."""

    root: Path
    settings: Settings
    env: Mapping[str, str]

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_DIR_NAME / CONFIG_FILE_NAME

    @property
    def state_dir(self) -> Path:
        if self.settings.state_dir is not None:
            return self.settings.state_dir
        return state_home(self.env) / self.settings.project_id

    @property
    def db_path(self) -> Path:
        return self.state_dir / "legion.db"

    @property
    def workspace_root(self) -> Path:
        """Where issue workspaces go: configured, else a folder beside the repository."""
        if self.settings.workspace_root is not None:
            return self.settings.workspace_root
        return self.root.parent / f"{self.root.name}-workspaces"


def git_toplevel(start: Path) -> Path | None:
    """The main working tree's root for `start` (also from inside a linked worktree)."""
    try:
        result = subprocess.run(
            ["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
            cwd=start,
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        raise ToolMissingError(
            "git is not installed: install git (e.g. apt-get install git)"
        ) from None
    except NotADirectoryError:
        return None
    if result.returncode != 0:
        return None
    common = Path(result.stdout.strip())
    # A normal repository's common dir is <root>/.git; a bare one has no working tree.
    return common.parent if common.name == ".git" else None


def find_project_root(start: Path) -> Path:
    """The nearest folder at or above `start` holding .legion/config.toml, else the main
    working tree of the git repository `start` is in (so workers in worktrees find it too)."""
    start = start.resolve()
    if not start.is_dir():
        raise ConfigError(f"{start} is not a directory")
    for folder in (start, *start.parents):
        if (folder / CONFIG_DIR_NAME / CONFIG_FILE_NAME).is_file():
            return folder
    toplevel = git_toplevel(start)
    if toplevel is not None and (toplevel / CONFIG_DIR_NAME / CONFIG_FILE_NAME).is_file():
        return toplevel
    where = f"{start} or the git repository it is in" if toplevel else str(start)
    raise ConfigError(
        f"no Legion project found in {where}: run `legion init` in your git repository"
    )


def load_project(
    start: Path,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Project:
    env = os.environ if env is None else env
    root = find_project_root(start)
    settings = resolve_settings(root / CONFIG_DIR_NAME / CONFIG_FILE_NAME, env, flags)
    return Project(root=root, settings=settings, env=env)
