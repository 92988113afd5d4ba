"""The "blocked by" checks every tracker shares: no issue blocks itself, and no cycle."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legion.errors import InputError
from legion.trackers.base import blocker_change


def test_additions_and_removals_are_normalized_and_each_once() -> None:
    added, removed = blocker_change("leg-5", ["leg-1", "LEG-1", "LEG-2"], ["leg-3"], {})
    assert (added, removed) == (["LEG-1", "LEG-2"], ["LEG-3"])


def test_an_issue_cannot_block_itself() -> None:
    with pytest.raises(InputError, match="LEG-5 cannot be blocked by itself"):
        blocker_change("LEG-5", ["leg-5"], [], {})


def test_a_blocker_both_added_and_removed_is_refused() -> None:
    with pytest.raises(InputError, match="both added and removed"):
        blocker_change("LEG-5", ["LEG-1"], ["leg-1"], {})


def test_a_cycle_is_refused_with_its_chain() -> None:
    graph = {"LEG-2": ["LEG-1"], "LEG-3": ["LEG-2"]}  # 3 waits for 2, 2 for 1
    with pytest.raises(InputError) as refused:
        blocker_change("LEG-1", ["LEG-3"], [], graph)
    message = str(refused.value)
    assert "LEG-1 -> LEG-3 -> LEG-2 -> LEG-1" in message and "cycle" in message
    assert "\n" not in message
    # The other direction is no cycle, and removing never is one.
    assert blocker_change("LEG-3", ["LEG-1"], [], graph) == (["LEG-1"], [])
    assert blocker_change("LEG-1", [], ["LEG-3"], graph) == ([], ["LEG-3"])


ids = st.integers(min_value=1, max_value=6).map(lambda n: f"LEG-{n}")


@given(st.lists(st.tuples(ids, ids), max_size=12))
def test_the_relation_built_through_the_check_never_has_a_cycle(
    pairs: list[tuple[str, str]],
) -> None:
    graph: dict[str, list[str]] = {}
    for blocked, blocker in pairs:
        try:
            added, _ = blocker_change(blocked, [blocker], [], graph)
        except InputError:
            continue
        graph.setdefault(blocked, []).extend(b for b in added if b not in graph.get(blocked, []))
    # Depth-first: no issue reaches itself through its blockers.
    for start in graph:
        seen: set[str] = set()
        stack = list(graph.get(start, []))
        while stack:
            current = stack.pop()
            assert current != start, (start, graph)
            if current not in seen:
                seen.add(current)
                stack.extend(graph.get(current, []))
