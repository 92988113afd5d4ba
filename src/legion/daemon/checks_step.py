"""The daemon's `local_checks` step: the embedded forge's CI (`legion.forges.local_checks`),
run on each open pull request's head, each check's start and end in the action log."""

from __future__ import annotations

from legion.config import Project
from legion.daemon_link import wake_fifo
from legion.forges.base import Forge, PrState
from legion.forges.local import LocalForge
from legion.forges.local_checks import CheckRunner
from legion.sessions.workers import WorkerManager
from legion.store.actionlog import ActionLog, OutcomeKind

from .steps import DONE, StepResult


class LocalChecksStep:
    def __init__(self, forge: LocalForge, runner: CheckRunner, log: ActionLog) -> None:
        self.forge = forge
        self.runner = runner
        self.log = log
        self._open: set[int] = set()  # the PRs this daemon ran checks for

    def run(self) -> StepResult:
        prs = self.forge.list_prs()
        issues = {pr.number: pr.issue for pr in prs}
        opened = [pr.number for pr in prs if pr.state is PrState.OPEN]
        for line in self.runner.run(opened):
            number = int(line.split(":", 1)[0].lstrip("#"))
            self.log.append(issues.get(number, "-"), "local_check", OutcomeKind.DONE, line)
        now_open = set(opened)
        for number in self._open - now_open:
            self.runner.forget(number)  # merged or closed: its copies and runs go
        self._open = now_open
        return DONE


def local_checks_step(
    project: Project, forge: Forge, workers: WorkerManager, log: ActionLog
) -> LocalChecksStep | None:
    """The step, when the forge is the embedded one and the `checks` setting names commands."""
    if not isinstance(forge, LocalForge) or forge.checks is None:
        return None
    runner = CheckRunner(
        forge.checks,
        project.root,
        workers.supervisor.confinement.check_plan,
        lambda number: forge.branch_head(str(number)),
        timeout=project.settings.checks_timeout,
        wake=wake_fifo(project),
    )
    return LocalChecksStep(forge, runner, log)
