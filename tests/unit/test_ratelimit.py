"""The token bucket (`legion.core.ratelimit`): a burst, then a steady rate, whatever the
timing of the calls."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from legion.core.ratelimit import Bucket


def test_a_burst_then_the_rate() -> None:
    bucket = Bucket.full(3, 0.5, now=100.0)
    waits = []
    for _ in range(4):
        bucket, wait = bucket.take(100.0)
        waits.append(wait)
    assert waits == [0.0, 0.0, 0.0, 2.0]  # the fourth waits for a token at 0.5 a second
    bucket, wait = bucket.take(102.0)
    assert wait == 0.0
    bucket, wait = bucket.take(102.5)
    assert wait == 1.5


@given(
    st.lists(st.floats(min_value=0, max_value=5, allow_nan=False), min_size=1, max_size=200),
    st.integers(min_value=1, max_value=20),
    st.floats(min_value=0.1, max_value=10),
)
def test_no_more_calls_go_than_the_burst_and_the_rate_allow(
    gaps: list[float], capacity: int, per_second: float
) -> None:
    now = 0.0
    bucket = Bucket.full(capacity, per_second, now)
    allowed = 0
    for gap in gaps:
        now += gap
        bucket, wait = bucket.take(now)
        if wait == 0.0:
            allowed += 1
        else:
            assert wait > 0
    assert allowed <= capacity + now * per_second + 1e-6
