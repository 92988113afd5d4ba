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
