"""Whom a human's answer goes to, and whose `worker-done` counts: reconcile passes on the
embedded tracker, with real workers (the Claude Code CLI against the scripted model, a private
tmux server, real git and SQLite).

Issue 24, item 20: `token_budget` spent when the implementer was due; Legion asked; the human
answered "go on"; the answer was relayed to the finished planner's session, whose plan ended
with `worker-done` again, which was read as the implementer's: the issue went to Needs Review
with no implementation and no pull request.
"""

from __future__ import annotations

import time

import pytest

from legion.backends import Backends, open_backends, open_workers
from legion.config import load_project
from legion.core.model import Status
from legion.demo.swarm_script import swarm_script
from legion.reconcile import BUDGET_HEADING, Outcome, Reconciler
from legion.store.actionlog import ActionLog
from tests.support.swarm import Swarm

# Its reconcile passes start workers under a daemon in manual mode (`host`).
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("host")]


def _reconciler(swarm: Swarm, **flags: object) -> tuple[Reconciler, Backends]:
    loaded = load_project(swarm.repo, swarm.env, flags=flags)
    backends = open_backends(loaded)
    workers = open_workers(loaded, backends, swarm.env)
    return Reconciler(loaded, backends.tracker, backends.forge, workers, ActionLog(backends.db)), (
        backends
    )


def _passes_until(
    reconciler: Reconciler, what: str, check: object, timeout: float = 90.0
) -> list[Outcome]:
    """Run passes (as the daemon's ticks would) until `check()` holds; every outcome seen."""
    assert callable(check)
    seen: list[Outcome] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen += reconciler.run()
        if check():
            return seen
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}: {[(o.action, o.detail) for o in seen]}")


def test_a_budget_answer_starts_the_implementer_not_the_finished_planner(swarm: Swarm) -> None:
    swarm.server.script.scenarios.extend(swarm_script(["LEG-1"], review_rounds=1).scenarios)
    swarm.legion("issue", "create", "Feature one", "--body", "Add feature one.", "--status", "Todo")
    # Any token spends the budget: the planner runs (nothing used yet), then the implementer
    # is due with the budget spent.
    reconciler, backends = _reconciler(swarm, token_budget=1)
    tracker = backends.tracker

    def asked() -> bool:
        return "user-input-needed" in tracker.get_issue("LEG-1").labels

    seen = _passes_until(reconciler, "the budget question", asked)
    issue = tracker.get_issue("LEG-1")
    assert issue.status is Status.IN_PROGRESS, seen
    assert tracker.list_comments("LEG-1")[-1].body.startswith(BUDGET_HEADING)
    assert reconciler.workers.roster.views() == []  # the planner retired, no implementer started

    swarm.legion("feedback", "LEG-1", "go on")
    seen = _passes_until(
        reconciler,
        "LEG-1 in Needs Review",
        lambda: tracker.get_issue("LEG-1").status is not Status.IN_PROGRESS,
    )
    relayed = [o for o in seen if o.action == "relay_user_feedback"]
    assert relayed and "implement worker" in relayed[0].detail, seen
    # The implementer ran (with the answer in its prompt) and opened the pull request; the
    # planner was not started again.
    assert tracker.get_issue("LEG-1").status is Status.NEEDS_REVIEW
    pr = backends.forge.prs_by_issue(["LEG-1"]).get("LEG-1")
    assert pr is not None, seen
    prompts = [r.prompt or "" for r in swarm.server.message_requests() if r.turn == 0]
    implement = [p for p in prompts if "implement mode for LEG-1" in p]
    assert implement and "go on" in implement[0]
    assert len([p for p in prompts if "plan mode for LEG-1" in p]) == 1
