"""`paged`: a connection read page after page, which a server cannot make endless."""

from __future__ import annotations

from typing import Any

import pytest

from legion.errors import BackendError
from legion.trackers.graphql import MAX_PAGES, paged


def page(nodes: list[Any], cursor: str | None) -> dict[str, Any]:
    return {"nodes": nodes, "pageInfo": {"hasNextPage": cursor is not None, "endCursor": cursor}}


def test_every_node_of_every_page_and_no_hidden_one() -> None:
    pages = {None: page([1, None], "a"), "a": page([2], "b"), "b": page([3], None)}
    assert list(paged(lambda after: pages[after])) == [1, 2, 3]


def test_a_cursor_named_again_stops_the_reading() -> None:
    pages = {None: page([1], "a"), "a": page([2], "b"), "b": page([3], "a")}
    with pytest.raises(BackendError, match="linear: the server named a page cursor again"):
        list(paged(lambda after: pages[after], "linear"))


def test_pages_without_end_stop_at_the_bound() -> None:
    read = []

    def endless(after: str | None) -> dict[str, Any]:
        read.append(after)
        return page([len(read)], f"c{len(read)}")

    with pytest.raises(BackendError, match=f"paged past {MAX_PAGES}"):
        list(paged(endless))
    assert len(read) == MAX_PAGES + 1


# -- `paged_back`: the latest nodes, read from the end ------------------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from legion.trackers.graphql import paged_back  # noqa: E402


def back_pages(items: list[int]) -> Any:
    """A connection over `items` paged backward, cursors being positions (GitHub's way)."""
    asked: list[int] = []

    def fetch(before: str | None, last: int) -> dict[str, Any]:
        asked.append(last)
        end = len(items) if before is None else int(before)
        start = max(0, end - last)
        return {
            "nodes": items[start:end],
            "pageInfo": {"hasPreviousPage": start > 0, "startCursor": str(start)},
        }

    return fetch, asked


@given(st.integers(0, 60), st.integers(0, 70), st.integers(1, 9))
def test_the_latest_nodes_in_order_in_as_few_pages_as_their_size_allows(
    count: int, limit: int, size: int
) -> None:
    items = list(range(count))
    fetch, asked = back_pages(items)
    got = paged_back(fetch, limit, size)
    assert got == items[max(0, count - limit) :] if limit else got == []
    assert len(asked) <= max(1, -(-limit // size))
    assert all(0 < last <= size for last in asked)


def test_a_cursor_named_again_stops_the_reading_back() -> None:
    def fetch(before: str | None, last: int) -> dict[str, Any]:
        return {"nodes": [1], "pageInfo": {"hasPreviousPage": True, "startCursor": "same"}}

    with pytest.raises(BackendError, match="github: the server named a page cursor again"):
        paged_back(fetch, 10, 1, "github")


def test_pages_of_hidden_nodes_without_end_stop_at_the_bound() -> None:
    asked = []

    def fetch(before: str | None, last: int) -> dict[str, Any]:
        asked.append(before)
        cursor = str(len(asked))
        return {"nodes": [None], "pageInfo": {"hasPreviousPage": True, "startCursor": cursor}}

    with pytest.raises(BackendError, match=f"paged past {MAX_PAGES}"):
        paged_back(fetch, 10, 5)
    assert len(asked) == MAX_PAGES + 1
