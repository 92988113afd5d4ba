"""The web view's poller (`legion.web.live`): a view is read only when it may have changed,
each page is given what it was not given yet, and the bounds hold."""

from __future__ import annotations

import asyncio

import pytest

from legion.core.web_access import Role
from legion.web import live
from legion.web.live import LiveViews, TooManyListeners, View


class Source:
    def __init__(self) -> None:
        self.reads = 0
        self.value = "a"
        self.stamp: object = 1

    def read(self) -> object:
        self.reads += 1
        return self.value


def render(data: object, role: Role) -> str:
    return f"{data}:{role.value}"


async def next_part(queue: asyncio.Queue[str], timeout: float = 2.0) -> str:
    return await asyncio.wait_for(queue.get(), timeout)


def test_a_stamped_view_is_read_when_its_stamp_moves_and_pages_get_only_changes() -> None:
    source = Source()
    view = View(source.read, render, lambda: source.stamp)
    views = LiveViews(period=0.05, refresh=60)

    async def run() -> None:
        with views.listener("board", view, Role.VIEWER) as first:
            assert await next_part(first) == "a:viewer"
            await asyncio.sleep(0.4)
            assert source.reads == 1  # the stamp did not move: not read again
            with views.listener("board", view, Role.VIEWER) as second:
                assert await next_part(second) == "a:viewer"  # what there is, at once
                source.value, source.stamp = "b", 2
                assert await next_part(first) == "b:viewer"
                assert await next_part(second) == "b:viewer"
                source.stamp = 3  # moved, but the same view: nobody is sent it again
                await asyncio.sleep(0.4)
                assert first.empty() and second.empty()
            with views.listener("board", view, Role.OPERATOR) as third:
                assert await next_part(third) == "b:operator"  # its role's, read for it
        views.close()

    asyncio.run(run())


def test_a_view_that_cannot_tell_is_read_each_period_not_each_tick() -> None:
    source = Source()
    view = View(source.read, render, lambda: None)
    views = LiveViews(period=0.3, refresh=60)

    async def run() -> None:
        with views.listener("hosts", view, Role.VIEWER) as queue:
            await next_part(queue)
            await asyncio.sleep(1.0)
        views.close()

    asyncio.run(run())
    assert 2 <= source.reads <= 6, source.reads  # about every 0.3 s, not ten times a second


def test_the_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live, "MAX_VIEWS", 2)
    monkeypatch.setattr(live, "MAX_LISTENERS", 3)
    source = Source()
    view = View(source.read, render)
    views = LiveViews(period=0.05)

    async def run() -> None:
        with views.listener("a", view, Role.VIEWER), views.listener("b", view, Role.VIEWER):
            assert views.refusal("c") is not None
            with pytest.raises(TooManyListeners), views.listener("c", view, Role.VIEWER):
                pass
            with views.listener("a", view, Role.VIEWER):
                assert views.refusal("a") == "3 live pages are open already"
        assert views.listening() == 0 and views.refusal("c") is None
        views.close()

    asyncio.run(run())
