"""What every part of one pass works with, handed to each explicitly: the project's tracker,
forge, workers and workspaces, the stores a pass writes (the action log, the judgment queue, the
dispatch pause), the guard its steps run under, and whether the pass only plans (a dry run)."""

from __future__ import annotations

from dataclasses import dataclass

from legion.forges.base import Forge
from legion.reconcile.judgments import JudgmentQueue
from legion.sessions.pause import DispatchPause
from legion.sessions.workers import WorkerManager
from legion.store.actionlog import ActionLog
from legion.trackers.base import Tracker
from legion.workspaces.base import Workspaces

from .guard import PassGuard


@dataclass(frozen=True, slots=True)
class PassContext:
    tracker: Tracker
    forge: Forge
    workers: WorkerManager
    workspaces: Workspaces
    log: ActionLog
    judgments: JudgmentQueue
    pause: DispatchPause
    guard: PassGuard
    dry_run: bool
