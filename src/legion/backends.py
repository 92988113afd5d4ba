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


def open_backends(project: Project) -> Backends:
    settings = project.settings
    # Only the embedded backends exist so far; config validation rejects other names.
    db = Database(project.db_path)
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
    if vcs == "jj":
        return JjWorkspaces(project.root, project.workspace_root, base)
    return GitWorktrees(project.root, project.workspace_root, base)


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
    return WorkerManager(
        project=project,
        tracker=backends.tracker,
        registry=Registry(backends.db),
        tmux=Tmux(socket=settings.tmux_socket, config=settings.tmux_config),
        workspaces=_workspaces(project, base),
        claude=ClaudeRuntime(
            binary=str(settings.claude_bin) if settings.claude_bin else "claude",
            permission_mode=settings.permission_mode,
            extra_args=settings.claude_args,
        ),
        env=dict(os.environ if env is None else env),
    )
