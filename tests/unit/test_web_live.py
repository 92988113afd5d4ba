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


async def next_part(queue: asyncio.Queue[str], timeout: float = 20.0) -> str:
    return await asyncio.wait_for(queue.get(), timeout)


def test_a_stamped_view_is_read_when_its_stamp_moves_and_pages_get_only_changes() -> None:
    source = Source()
    view = View(source.read, render, lambda: source.stamp)
    views = LiveViews(period=0.05, refresh=60)

    async def run() -> None:
        with views.listener("board", view, Role.VIEWER, "ana") as first:
            assert await next_part(first) == "a:viewer"
            await asyncio.sleep(0.4)
            assert source.reads == 1  # the stamp did not move: not read again
            with views.listener("board", view, Role.VIEWER, "ana") as second:
                assert await next_part(second) == "a:viewer"  # what there is, at once
                source.value, source.stamp = "b", 2
                assert await next_part(first) == "b:viewer"
                assert await next_part(second) == "b:viewer"
                source.stamp = 3  # moved, but the same view: nobody is sent it again
                await asyncio.sleep(0.4)
                assert first.empty() and second.empty()
            with views.listener("board", view, Role.OPERATOR, "ana") as third:
                assert await next_part(third) == "b:operator"  # its role's, read for it
        views.close()

    asyncio.run(run())


def test_a_view_that_cannot_tell_is_read_slowly_and_one_without_a_stamp_each_period() -> None:
    """A stamp that cannot tell (a tracker that is a service) means: read every `slow`, its
    rate limit is the swarm's; no stamp at all (hosts' heartbeats): every period."""
    blind, plain = Source(), Source()
    views = LiveViews(period=0.1, slow=1.0)

    async def run() -> None:
        with (
            views.listener("board", View(blind.read, render, lambda: None), Role.VIEWER, "a"),
            views.listener("hosts", View(plain.read, render), Role.VIEWER, "a"),
        ):
            await asyncio.sleep(1.5)
        views.close()

    asyncio.run(run())
    assert 1 <= blind.reads <= 3, blind.reads  # at 0 s and 1 s (a slow machine: fewer)
    assert plain.reads >= 5, plain.reads  # about fifteen


def test_the_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Views other than the fixed ones, live pages in all, and one person's (their token's,
    however many times they logged in)."""
    monkeypatch.setattr(live, "MAX_VIEWS", 2)
    monkeypatch.setattr(live, "MAX_LISTENERS", 5)
    monkeypatch.setattr(live, "MAX_PER_OWNER", 3)
    source = Source()
    view = View(source.read, render)
    views = LiveViews(period=0.05, fixed=frozenset({"board"}))

    async def run() -> None:
        with (
            views.listener("a", view, Role.VIEWER, "bo"),
            views.listener("b", view, Role.VIEWER, "bo"),
        ):
            assert views.refusal("c", "ana") == "2 views are watched already"
            with pytest.raises(TooManyListeners), views.listener("c", view, Role.VIEWER, "ana"):
                pass
            assert views.refusal("board", "ana") is None  # a fixed view is never refused so
            with views.listener("board", view, Role.VIEWER, "bo"):
                assert views.refusal("board", "bo") == "3 live pages of yours are open already"
                with (
                    views.listener("board", view, Role.VIEWER, "ana"),
                    views.listener("a", view, Role.VIEWER, "cy"),
                ):
                    assert views.refusal("a", "dan") == "5 live pages are open already"
        assert views.listening() == 0 and views.refusal("c", "ana") is None
        views.close()

    asyncio.run(run())
