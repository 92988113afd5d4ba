"""The TUI's watcher on its own, in plain threads: what it posts when the bus changes (once
per change), what it reads for the view shown, and the signal that tells it the bus changed."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.message import Message as TextualMessage

from legion.bus.model import AgentRole, AgentStatus, Channel, MessageKind
from legion.bus.stored import SqliteBus
from legion.tui.sources import Board, Unavailable
from legion.tui.watcher import (
    AgentsChanged,
    AsksRead,
    BoardChanged,
    BusState,
    InboxChanged,
    Loop,
    MessagesArrived,
    Synced,
    SyncWaits,
    Watcher,
    file_signal,
)
from tests.unit.test_tui import FakeSources

HERE = Channel("app", "main")


class Posted:
    """The app as the watcher sees it: a queue of what was posted, from any thread."""

    def __init__(self) -> None:
        self.messages: queue.Queue[TextualMessage] = queue.Queue()

    def post_message(self, message: TextualMessage) -> bool:
        self.messages.put(message)
        return True

    def until_synced(self, watcher: Watcher, loop: Loop) -> list[TextualMessage]:
        """What the loop posted up to its answer to a new `sync`."""
        token = watcher.sync(loop)
        found: list[TextualMessage] = []
        while True:
            message = self.messages.get(timeout=10)
            if isinstance(message, Synced) and message.loop == loop and message.token >= token:
                return found
            if not isinstance(message, Synced):
                found.append(message)


@pytest.fixture
def bus(tmp_path: Path) -> Iterator[SqliteBus]:
    bus = SqliteBus(tmp_path / "bus.db")
    yield bus
    bus.close()


def watching(
    bus: SqliteBus, sources: FakeSources, *loops: Loop
) -> tuple[Watcher, Posted, list[threading.Thread]]:
    posted = Posted()
    start = BusState(0, tuple(bus.agents(include_archived=True)), (), ())
    watcher = Watcher(
        posted, lambda: SqliteBus(bus.path), sources, start, signal=file_signal(bus.path)
    )
    threads = [threading.Thread(target=watcher.run, args=(loop,)) for loop in loops]
    for thread in threads:
        thread.start()
    return watcher, posted, threads


def test_each_change_of_the_bus_is_posted_once(bus: SqliteBus) -> None:
    watcher, posted, threads = watching(bus, FakeSources(), "bus")
    try:
        assert posted.until_synced(watcher, "bus") == []  # nothing new since the start
        agent = bus.register_agent(
            HERE, "legion", role=AgentRole.CONTROLLER, runtime="claude-code", session_id="s"
        )
        bus.post(agent.id, HERE, "hello")
        found = posted.until_synced(watcher, "bus")
        kinds = [type(m) for m in found]
        assert kinds == [MessagesArrived, AgentsChanged]
        arrived = found[0]
        assert isinstance(arrived, MessagesArrived)
        assert [m.body for m in arrived.messages] == ["hello"]
        assert posted.until_synced(watcher, "bus") == []  # posted once, not again
        bus.update_agent(agent.id, status=AgentStatus.IDLE)
        bus.post(agent.id, HERE, "Which zone? @human", kind=MessageKind.ASK)
        found = posted.until_synced(watcher, "bus")
        assert [type(m) for m in found] == [MessagesArrived, AgentsChanged, InboxChanged]
        inbox = found[2]
        assert isinstance(inbox, InboxChanged)
        assert [m.body for m in inbox.questions] == ["Which zone? @human"]
    finally:
        watcher.stop()
        for thread in threads:
            thread.join(10)
    assert not any(thread.is_alive() for thread in threads)


def test_the_view_shown_is_read_when_shown_and_the_trackers_at_the_start(
    bus: SqliteBus,
) -> None:
    sources = FakeSources(board_view=Board("app", (), ()))
    watcher, posted, threads = watching(bus, sources, "views", "trackers")
    try:
        assert [type(m) for m in posted.until_synced(watcher, "trackers")] == [AsksRead]
        assert posted.until_synced(watcher, "views") == []  # chat: nothing to read
        watcher.show(view="board", project="app")
        found = posted.until_synced(watcher, "views")
        assert [type(m) for m in found] == [BoardChanged]
        assert sources.boards_for == ["app"]
        watcher.show(view="peek")
        found = posted.until_synced(watcher, "views")
        assert [getattr(m, "peek", None) for m in found] == [
            Unavailable("highlight an agent in the sidebar to see its screen")
        ]
        assert posted.until_synced(watcher, "trackers") == []  # read seldom: not again
        assert sources.inbox_reads == 1
    finally:
        watcher.stop()
        for thread in threads:
            thread.join(10)


def test_the_signal_moves_with_each_commit_and_only_then(bus: SqliteBus) -> None:
    signal = file_signal(bus.path)
    before = signal()
    assert signal() == before
    agent = bus.register_agent(
        HERE, "legion", role=AgentRole.CONTROLLER, runtime="claude-code", session_id="s"
    )
    after = signal()
    assert after != before
    other = SqliteBus(bus.path)  # another process's connection, as a worker's
    try:
        other.post(agent.id, HERE, "hello")
    finally:
        other.close()
    assert signal() != after


def test_a_settle_wait_ends_at_its_loops_pass_for_its_token_or_a_later_one() -> None:
    async def scenario() -> None:
        waits = SyncWaits()
        bus_pass = waits.waiting("bus", 2)
        views_pass = waits.waiting("views", 1)
        waits.synced(Synced("views", 2))  # another loop: the bus's wait goes on
        assert views_pass.done() and not bus_pass.done()
        waits.synced(Synced("bus", 1))  # an earlier pass than the one asked for
        assert not bus_pass.done()
        waits.synced(Synced("bus", 3))
        assert bus_pass.done()

    asyncio.run(scenario())
