"""`bench/swarm.py`'s breakdown of a hand-off: each instant of it goes to the innermost step
running then (another issue's as "other issues", none as the idle line), so the parts always
add up to the whole."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from legion.diagnostics.tracing import Span
from tests.support.bench import load_bench

swarm = load_bench("swarm")
DAEMON = 100


def test_each_instant_goes_to_the_innermost_step() -> None:
    spans = [
        Span("legion issue label", "LEG-1", 0.0, 0.4, 55),
        Span("tick", "-", 1.0, 2.0, DAEMON),
        Span("tick: reconcile", "-", 1.2, 2.0, DAEMON),
        Span("retire: close window", "LEG-1", 1.3, 1.4, DAEMON),
        Span("start: open the window", "LEG-2", 1.5, 1.6, DAEMON),
        Span("start: open the window", "LEG-1", 1.7, 1.9, DAEMON),
    ]
    parts = swarm.attribute(spans, "LEG-1", 0.0, 1.9)
    expected = {
        "legion issue label": 0.4,
        swarm.IDLE: 0.6,
        "tick": 0.2,
        "tick: reconcile": 0.1 + 0.1 + 0.1,
        "retire: close window": 0.1,
        "other issues: start: open the window": 0.1,
        "start: open the window": 0.2,
    }
    assert parts.keys() == expected.keys()
    for name, seconds in expected.items():
        assert abs(parts[name] - seconds) < 1e-9, name


def test_the_breakdown_runs_from_the_label_command_to_the_window_and_ignores_bystanders() -> None:
    spans = [
        Span("legion start", "-", -100.0, 100.0, DAEMON),  # the daemon's own command
        Span("legion issue label", "LEG-1", 0.0, 0.3, 55),
        Span("legion pr view", "LEG-2", 0.0, 1.0, 56),  # another worker, beside it
        Span("tick", "-", 0.5, 0.9, DAEMON),
        Span("start: open the window", "LEG-1", 0.8, 0.9, DAEMON),
    ]
    hand_off = swarm.HandOff("LEG-1", done_at=0.25, window_at=0.95)
    assert swarm.hand_off_span(spans, hand_off) == (0.0, 0.9)
    lines = swarm.breakdown(spans, [hand_off], DAEMON)
    assert "median 0.900 s" in lines[0] and "p95 0.900 s" in lines[0]
    named = {line.split("  median")[0].strip(): line for line in lines[1:]}
    assert set(named) == {"legion issue label", swarm.IDLE, "tick", "start: open the window"}
    assert "median 0.300 s" in named["legion issue label"]
    assert "median 0.200 s" in named[swarm.IDLE]


@given(
    st.lists(
        st.tuples(
            st.floats(0, 10, allow_nan=False),
            st.floats(0, 10, allow_nan=False),
            st.sampled_from(["-", "LEG-1", "LEG-2"]),
        ),
        max_size=12,
    ),
    st.floats(0, 5, allow_nan=False),
    st.floats(5, 10, allow_nan=False),
)
def test_the_parts_add_up_to_the_whole(
    raw: list[tuple[float, float, str]], start: float, end: float
) -> None:
    spans = [
        Span(f"s{i}", issue, min(a, b), max(a, b), DAEMON) for i, (a, b, issue) in enumerate(raw)
    ]
    parts = swarm.attribute(spans, "LEG-1", start, end)
    assert abs(sum(parts.values()) - (end - start)) < 1e-6
    assert all(value >= 0 for value in parts.values())
