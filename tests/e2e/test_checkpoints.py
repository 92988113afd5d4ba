"""The daemon checkpoints its workers' workspaces (`legion.daemon.checkpoint_step`): at the end
of a worker's turn, what the turn left in its workspace (a file not committed, not even added)
and its session's transcript are on the issue's checkpoint ref, and neither its branch nor its
files were touched. The real daemon (manual mode), Claude Code against the scripted model,
tmux and git."""

from __future__ import annotations

import pytest

from legion.workspaces import checkpoint
from tests.fakes.model_server import bash, text
from tests.support.cli import git
from tests.support.swarm import Daemon, Swarm
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e]


def test_a_workers_turn_end_checkpoints_its_workspace_and_transcript(swarm: Swarm) -> None:
    swarm.legion("issue", "create", "Notes")
    swarm.server.add_scenario(
        "plan mode for LEG-1",
        [[bash("mkdir -p notes && echo draft > notes/plan.md")], [text("Planned, in notes.")]],
    )
    with Daemon(swarm, mode="manual", tick=0.5):
        swarm.legion("dispatch", "LEG-1", "plan")
        worker = wait_until(
            "the turn over", lambda: (w := swarm.worker("LEG-1")) and w["state"] == "idle" and w
        )

        def after_the_turn() -> checkpoint.Checkpoint | None:
            found = checkpoint.find(swarm.repo, "LEG-1")
            if found is None or worker["session_id"] not in found.sessions:
                return None
            kept = git(swarm.repo, "show", f"{found.commit}:sessions/{worker['session_id']}.jsonl")
            return found if "Planned, in notes." in kept else None

        found = wait_until("the checkpoint of the turn", after_the_turn)
    workspace = swarm.workspace_root / "leg-1"
    assert git(swarm.repo, "show", f"{found.commit}:workspace/notes/plan.md") == "draft\n"
    kept = git(swarm.repo, "show", f"{found.commit}:sessions/{worker['session_id']}.jsonl")
    with open(worker["transcript"], encoding="utf-8") as now:
        assert now.read().startswith(kept)  # the session's transcript, as it was then
    # Left as it was: the file not added, the branch where the worker left it.
    assert git(workspace, "status", "--porcelain=v1", "--untracked=all") == "?? notes/plan.md\n"
    assert git(workspace, "rev-parse", "legion/leg-1").strip() == found.base
    assert not [e for e in swarm.json("log", "-n", "100") if e["action"] == "checkpoint"]
