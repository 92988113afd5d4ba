"""The daemon waits for the soonest requeue its steps asked for (`legion.daemon.steps`)."""

from __future__ import annotations

from legion.daemon.steps import DONE, StepResult, soonest


def test_the_wait_is_the_tick_unless_a_step_asks_sooner() -> None:
    assert soonest(60.0, [DONE, DONE]) == 60.0
    assert soonest(60.0, [DONE, StepResult(requeue_after=1.0), StepResult(0.5)]) == 0.5
    assert soonest(60.0, [StepResult(requeue_after=120.0)]) == 60.0
    assert soonest(60.0, [StepResult(requeue_after=0.0)]) == 0.05  # never a busy loop
    assert soonest(60.0, []) == 60.0
