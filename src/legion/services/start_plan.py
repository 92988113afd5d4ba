"""What `legion start` is about to start, and the bounds on spending in force, said before
anything starts (`legion start --dry-run` says only this): the controller, the workers the
daemon's first pass would start and those it would keep waiting (the reconciler's own dry run,
as that daemon would see it: `Reconciler.run(dry_run=True, as_start=True)`), and every setting
that bounds spending (`SettingSpec.caps`), with where each is set."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from legion.backends import Backends
from legion.config import Project
from legion.config.settings import SPECS
from legion.reconcile import Outcome, Reconciler
from legion.sessions.workers import WorkerManager
from legion.store.actionlog import ActionLog

# What each bound on spending holds back, in a few words (a setting with none is still shown).
BOUND_MEANING: dict[str, str] = {
    "wip_limit": "code workers at once (reviewers not counted)",
    "token_budget": "tokens one issue's workers may use, then a human is asked",
    "daily_token_budget": "tokens every session together may use a day (from 00:00 UTC)",
    "idle_spend_limit": "tokens a worker may use with no sign of progress, then it is stopped",
}


@dataclass(frozen=True)
class Bound:
    """One setting that bounds spending, as in force now."""

    name: str
    value: int | None  # None: unlimited
    source: str  # "default", "env", "flag", or the configuration file's path
    env_var: str
    meaning: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "source": self.source,
            "meaning": self.meaning,
        }


@dataclass(frozen=True)
class StartPlan:
    mode: str  # the controller mode: auto, llm or manual
    controller: str | None  # the controller's runtime; None in manual mode (none runs)
    # The first pass's outcomes, issue by issue: a worker planned (`<mode> worker`), or why
    # it waits (the WIP limit, a budget, a failure). Empty in manual mode (no pass runs); in
    # llm mode the controller decides, and these are what the decision table suggests.
    first_pass: list[Outcome]
    bounds: list[Bound]
    config: Path

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "controller": None if self.controller is None else {"runtime": self.controller},
            "first_pass": [o.to_json() for o in self.first_pass],
            "bounds": [bound.to_json() for bound in self.bounds],
            "config": str(self.config),
        }


def bounds(project: Project) -> list[Bound]:
    """Every setting that bounds spending, its value and where it is set."""
    settings = project.settings
    return [
        Bound(
            spec.name,
            settings.value(spec.name),
            settings.sources.get(spec.name, "default"),
            spec.env_var,
            BOUND_MEANING.get(spec.name, ""),
        )
        for spec in SPECS
        if spec.caps
    ]


def plan_start(
    project: Project, backends: Backends, workers: WorkerManager, mode: str
) -> StartPlan:
    """What a daemon started now in `mode` would start first: one dry-run pass of the
    reconciler (changes nothing; waits for a pass already running)."""
    first_pass: list[Outcome] = []
    if mode != "manual":
        reconciler = Reconciler(
            project,
            backends.tracker,
            backends.forge,
            workers,
            ActionLog(backends.db),
            oracle=True,
        )
        first_pass = reconciler.run(dry_run=True, as_start=True)
    return StartPlan(
        mode=mode,
        controller=None if mode == "manual" else workers.runtimes.controller.name,
        first_pass=first_pass,
        bounds=bounds(project),
        config=project.config_path,
    )
