"""Opens what a project is configured for: tracker, forge, and the worker runtime."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from legion.config import Project
from legion.embedded.db import Database
from legion.forges.base import Forge
from legion.forges.local import LocalForge
from legion.trackers.base import Tracker
from legion.trackers.local import LocalTracker

if TYPE_CHECKING:
    from legion.runtime.workers import WorkerManager
    from legion.workspaces.base import Workspaces


@dataclass
class Backends:
    tracker: Tracker
    forge: Forge
    db: Database


def open_backends(project: Project, *, create: bool = False) -> Backends:
    """The project's tracker and forge. Only `legion init` may `create` the database: for an
    existing project a missing or empty one is an error, never a fresh start."""
    settings = project.settings
    # Only the embedded backends exist so far; config validation rejects other names.
    db = Database(project.db_path, create=create)
    tracker = LocalTracker(db, issue_key=settings.issue_key, extra_labels=settings.labels)
    forge = LocalForge(db, project.root, base_branch=settings.base_branch)
    return Backends(tracker=tracker, forge=forge, db=db)


def _workspaces(project: Project, base: str) -> Workspaces:
    import shutil

    from legion.workspaces.git_worktree import GitWorktrees
    from legion.workspaces.jj import JjWorkspaces

    vcs = project.settings.workspace_vcs
    if vcs == "auto":
        jj_repo = (project.root / ".jj").is_dir() and shutil.which("jj") is not None
        vcs = "jj" if jj_repo else "git"
    keep = project.settings.regenerable
    if vcs == "jj":
        return JjWorkspaces(project.root, project.workspace_root, base, regenerable=keep)
    return GitWorktrees(project.root, project.workspace_root, base, regenerable=keep)


def open_workers(
    project: Project, backends: Backends, env: Mapping[str, str] | None = None
) -> WorkerManager:
    from legion.git import current_branch
    from legion.runtime.claude import ClaudeRuntime
    from legion.runtime.registry import Registry
    from legion.runtime.tmux import Tmux
    from legion.runtime.workers import WorkerManager

    settings = project.settings
    base = settings.base_branch or current_branch(project.root) or "main"
    environment = dict(os.environ if env is None else env)
    return WorkerManager(
        project=project,
        tracker=backends.tracker,
        registry=Registry(backends.db),
        tmux=Tmux(socket=settings.tmux_socket, config=settings.tmux_config),
        workspaces=_workspaces(project, base),
        claude=ClaudeRuntime(
            settings=settings,
            permission_mode=settings.permission_mode,
            extra_args=settings.claude_args,
            lookup_env=environment,
        ),
        env=environment,
    )
