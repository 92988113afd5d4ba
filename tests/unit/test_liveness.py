"""The liveness rules (`legion.core.liveness`): pure, on facts already observed."""

from __future__ import annotations

from legion.core.liveness import (
    FINISHING_GRACE_S,
    SETTLE_S,
    START_S,
    ScreenSeen,
    SessionState,
    finishing,
    screen_seen,
    screen_stuck,
    session_state,
    settling,
    stale_mid_turn,
    transcript_grew,
    worker_stuck,
)


def test_session_state() -> None:
    assert session_state(False, question_open=True, turn_ended=True) is SessionState.DEAD
    assert session_state(True, question_open=True, turn_ended=True) is SessionState.BLOCKED
    assert session_state(True, question_open=False, turn_ended=True) is SessionState.IDLE
    assert session_state(True, question_open=False, turn_ended=False) is SessionState.RUNNING
    assert not SessionState.DEAD.is_live and SessionState.BLOCKED.is_live


def test_a_prompt_is_taken_once_the_transcript_grew() -> None:
    assert transcript_grew(10, 11) and not transcript_grew(10, 10) and not transcript_grew(10, 0)


def test_settling_and_finishing() -> None:
    assert settling(100.0, 100.0 + SETTLE_S / 2) and not settling(100.0, 100.0 + SETTLE_S)
    assert not settling(None, 100.0)
    running, idle = SessionState.RUNNING, SessionState.IDLE
    assert finishing(running, 100.0, 100.0 + FINISHING_GRACE_S - 1)
    assert not finishing(running, 100.0, 100.0 + FINISHING_GRACE_S)
    assert not finishing(idle, 100.0, 101.0) and not finishing(running, None, 101.0)


def test_stale_mid_turn() -> None:
    assert stale_mid_turn(SessionState.RUNNING, 0.0, 11.0, 10.0)
    assert not stale_mid_turn(SessionState.RUNNING, 0.0, 10.0, 10.0)
    assert not stale_mid_turn(SessionState.IDLE, 0.0, 99.0, 10.0)
    assert not stale_mid_turn(SessionState.RUNNING, None, 99.0, 10.0)


def test_a_screen_is_unchanged_only_in_one_window_showing_one_thing() -> None:
    first = screen_seen(None, "@1", "abc", 5.0)
    assert first == ScreenSeen("@1", "abc", 5.0)
    assert screen_seen(first, "@1", "abc", 9.0) is first
    assert screen_seen(first, "@1", "abd", 9.0).since == 9.0
    assert screen_seen(first, "@2", "abc", 9.0).since == 9.0
    blank = screen_seen(screen_seen(None, "@1", "", 1.0), "@1", "", 50.0)
    assert blank.since == 50.0 and not screen_stuck(blank, 100.0, 1.0)
    assert screen_stuck(first, 15.0, 10.0) and not screen_stuck(first, 14.0, 10.0)


def test_a_worker_is_stuck_only_when_both_signals_agree() -> None:
    screen = ScreenSeen("@1", "abc", 0.0)
    assert worker_stuck(0.0, 0.0, 11.0, screen, 10.0, 10.0)
    assert not worker_stuck(5.0, 0.0, 11.0, screen, 10.0, 10.0)  # the transcript moved
    assert not worker_stuck(0.0, 0.0, 11.0, screen, 9.0, 10.0)  # the screen moved


def test_a_worker_still_starting_is_given_the_start_allowance_whatever_stale_after_says() -> None:
    screen = ScreenSeen("@1", "banner", 0.0)
    # No transcript yet: a slow CLI start, not a stuck worker, within START_S of its start.
    assert not worker_stuck(None, 0.0, START_S - 1, screen, START_S - 1, 3.0)
    assert worker_stuck(None, 0.0, START_S + 1, screen, START_S + 1, 3.0)
    # A longer stale_after still rules.
    assert not worker_stuck(None, 0.0, START_S + 1, screen, START_S + 1, 100.0)
    # Once it has written, stale_after alone counts.
    assert worker_stuck(1.0, 0.0, 5.0, screen, 5.0, 3.0)
