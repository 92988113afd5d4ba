"""The kill campaign (see campaign.py): the swarm SIGKILLed at each named fault point, then run
again without the fault, must finish every issue without losing or duplicating anything."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.campaign import CAMPAIGN, DAEMON_KILLS, QUICK, run_daemon_kills, run_point

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(330)]

# The suite kills at the points whose crash did, or could most easily, lose or repeat work; the
# whole campaign (every point) runs with FAULTS_CAMPAIGN=all, or as bench/faults.py.
SPECS = CAMPAIGN if os.environ.get("FAULTS_CAMPAIGN") == "all" else QUICK


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
    result = run_daemon_kills(tmp_path, isolated_env)
    assert len(result.killed) == len(DAEMON_KILLS), result.killed
    assert result.problems == [], "\n".join(result.problems)
