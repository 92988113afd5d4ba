"""Opens the tracker and forge a project is configured for."""

from __future__ import annotations

from dataclasses import dataclass

from legion.config import Project
from legion.embedded.db import Database
from legion.forges.base import Forge
from legion.forges.local import LocalForge
from legion.trackers.base import Tracker
from legion.trackers.local import LocalTracker


@dataclass
class Backends:
    tracker: Tracker
    forge: Forge


def open_backends(project: Project) -> Backends:
    settings = project.settings
    # Only the embedded backends exist so far; config validation rejects other names.
    db = Database(project.db_path)
    tracker = LocalTracker(db, issue_key=settings.issue_key, extra_labels=settings.labels)
    forge = LocalForge(db, project.root, base_branch=settings.base_branch)
    return Backends(tracker=tracker, forge=forge)
