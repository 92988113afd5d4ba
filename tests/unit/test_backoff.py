"""Per-issue backoff: doubling from 30 s to a cap, the server's wait as a floor, and a refusal
that will not pass by itself held until the issue changes."""

from __future__ import annotations

from legion.core.backoff import BASE_S, CAP_S, PERMANENT_S, after_failure, delay, waiting


def test_the_delay_doubles_up_to_the_cap_and_never_undercuts_the_server() -> None:
    assert [delay(n) for n in (1, 2, 3)] == [BASE_S, 2 * BASE_S, 4 * BASE_S]
    assert delay(50) == CAP_S
    assert delay(1, retry_after=600.0) == 600.0


def test_a_change_of_state_ends_the_wait_and_restarts_the_count() -> None:
    held = after_failure(None, "a", 0.0, retryable=True)
    again = after_failure(held, "a", 40.0, retryable=True)
    assert again.failures == 2 and again.until == 40.0 + 2 * BASE_S
    assert waiting(again, "a", 50.0) == again.until - 50.0
    assert waiting(again, "b", 50.0) == 0.0
    assert after_failure(again, "b", 50.0, retryable=True).failures == 1


def test_a_permanent_refusal_waits_for_a_change_or_an_hour() -> None:
    held = after_failure(None, "a", 0.0, retryable=False)
    assert held.permanent and waiting(held, "a", PERMANENT_S - 1) == 1.0
    assert waiting(held, "a", PERMANENT_S) == 0.0
