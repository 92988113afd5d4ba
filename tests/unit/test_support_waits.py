"""The tests' own waits (tests/support/waits.py): a count of a daemon's ticks is a count of
whole ticks, and every wait ends at its deadline."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from tests.support.waits import wait_for_ticks, wait_until


def _beat(heartbeat: Path, times: int, every: float, started: threading.Event) -> None:
    started.wait()
    for _ in range(times):
        time.sleep(every)
        os.utime(heartbeat)  # as the daemon touches it


def test_ticks_are_counted_whole_one_more_touch_than_ticks(tmp_path: Path) -> None:
    heartbeat = tmp_path / "heartbeat"
    heartbeat.touch()  # a tick under way when the wait starts: not a whole one
    started = threading.Event()
    beats = threading.Thread(target=_beat, args=(heartbeat, 3, 0.1, started))
    beats.start()
    begun = time.monotonic()
    started.set()
    wait_for_ticks(heartbeat, 2, timeout=10)
    took = time.monotonic() - begun
    beats.join()
    assert took >= 0.3 - 0.05  # the third touch ended the second whole tick


def test_ticks_that_do_not_come_fail_at_the_deadline(tmp_path: Path) -> None:
    heartbeat = tmp_path / "heartbeat"
    with pytest.raises(AssertionError, match="2 ticks"):
        wait_for_ticks(heartbeat, 2, timeout=0.2)


def test_wait_until_returns_the_first_true_answer_or_says_what_it_waited_for() -> None:
    answers = iter([0, None, "yes"])
    assert wait_until("an answer", lambda: next(answers), interval=0.01) == "yes"
    with pytest.raises(AssertionError, match="timed out waiting for nothing"):
        wait_until("nothing", lambda: False, timeout=0.05, interval=0.01)
