"""The daemon waits for the soonest requeue its steps asked for, and runs those its role runs
(`legion.daemon.steps`)."""

from __future__ import annotations

from legion.daemon.steps import DONE, Role, StepResult, Where, soonest


def test_the_wait_is_the_tick_unless_a_step_asks_sooner() -> None:
    assert soonest(60.0, [DONE, DONE]) == 60.0
    assert soonest(60.0, [DONE, StepResult(requeue_after=1.0), StepResult(0.5)]) == 0.5
    assert soonest(60.0, [StepResult(requeue_after=120.0)]) == 60.0
    assert soonest(60.0, [StepResult(requeue_after=0.0)]) == 0.05  # never a busy loop
    assert soonest(60.0, []) == 60.0


def test_a_step_runs_on_the_daemons_it_declares() -> None:
    leader, follower = Role.LEADER, Role.FOLLOWER
    assert Where.LEADER_ONLY.runs_as(leader) and not Where.LEADER_ONLY.runs_as(follower)
    assert Where.FOLLOWERS_ONLY.runs_as(follower) and not Where.FOLLOWERS_ONLY.runs_as(leader)
    assert Where.EVERY_HOST.runs_as(leader) and Where.EVERY_HOST.runs_as(follower)
