"""The kill campaign (see campaign.py): the swarm SIGKILLed at each named fault point, then run
again without the fault, must finish every issue without losing or duplicating anything.

The chain and the daemon's kills run every session on Codex: their points are the daemon's and
the merge's, the same whatever CLI the sessions run, and a Codex session costs a tenth of a
Claude Code one's CPU. A point whose subject is typing into a session's screen
(`judgment_typed`: the controller's wake-up) runs on Claude Code, as `FAULTS_CAMPAIGN=all`
and bench/faults.py run every point."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.campaign import (
    CAMPAIGN,
    DAEMON_KILLS,
    QUICK_ALONE,
    QUICK_CHAIN,
    run_daemon_kills,
    run_point,
    run_points,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(330)]


def test_the_swarm_survives_a_kill_at_each_point_of_its_cycle_in_one_run(
    tmp_path: Path, isolated_env: Path
) -> None:
    """A worker start after a transition, a transition, a merge (`QUICK_CHAIN`), each killed in
    turn in one run as the issue's cycle reaches it, the swarm started again after each: it
    finishes every issue once, nothing lost. One run, not one per point: each is a cycle."""
    result = run_points(QUICK_CHAIN, tmp_path, isolated_env, flavor="codex")
    assert [line.split()[0] for line in result.killed] == [s.split(":")[0] for s in QUICK_CHAIN]
    assert result.problems == [], "\n".join(result.problems)


# Every point in a run of its own with FAULTS_CAMPAIGN=all; in the suite, those not in the chain.
SPECS = CAMPAIGN if os.environ.get("FAULTS_CAMPAIGN") == "all" else QUICK_ALONE


@pytest.mark.parametrize("spec", SPECS)
def test_the_swarm_survives_a_kill_at(spec: str, tmp_path: Path, isolated_env: Path) -> None:
    result = run_point(spec, tmp_path, isolated_env)
    assert result.killed, f"{spec}: nothing was killed"
    assert [line.split()[0] for line in result.killed] == [spec.split(":", maxsplit=1)[0]]
    assert result.problems == [], "\n".join(result.problems)


def test_the_swarm_survives_the_daemon_killed_three_times(
    tmp_path: Path, isolated_env: Path
) -> None:
    """Issue 24, item 4: the daemon SIGKILLed three times as it starts sessions, started again
    each time; never two processes on one session (watched all along), nothing lost."""
    result = run_daemon_kills(tmp_path, isolated_env, flavor="codex")
    assert len(result.killed) == len(DAEMON_KILLS), result.killed
    assert result.problems == [], "\n".join(result.problems)
