"""What the TUI counts unread per channel (`legion.tui.channels`), without a terminal."""

from __future__ import annotations

from legion.bus.model import Channel, Message, MessageKind
from legion.tui.channels import Channels
from legion.tui.readmarks import ReadMarks

MAIN = Channel("app", "main")
LEG7 = Channel("app", "legion/LEG-7")


def message(seq: int, channel: Channel, sender: str = "app/main/legion") -> Message:
    return Message(
        f"m{seq}", seq, channel.project, channel.branch, sender, MessageKind.SAY, "hi", (), ""
    )


def test_messages_elsewhere_count_unread_but_the_humans_own_and_the_open_channels() -> None:
    channels = Channels({MAIN}, {MAIN: 0}, ReadMarks(None, 0), MAIN)
    here = channels.arrived([message(1, MAIN), message(2, LEG7), message(3, LEG7, "human")])
    assert [m.seq for m in here] == [1]
    assert channels.unread == {MAIN: 0, LEG7: 1}
    assert channels.channels == {MAIN, LEG7}
    assert not channels.seen(here)  # nothing for the human: nothing to mark read on the bus
    assert channels.marks.last_seen(MAIN) == 1


def test_what_waits_for_the_human_in_the_open_channel_is_seen_and_marked_read() -> None:
    channels = Channels(set(), {}, ReadMarks(None, 0), LEG7)
    assert channels.channels == {LEG7}  # the channel here, listed before anyone spoke
    waiting = [message(4, LEG7), message(5, MAIN)]
    here = channels.waiting(waiting)
    assert channels.for_you == {LEG7: 1, MAIN: 1}
    assert [m.seq for m in here] == [4]
    assert channels.seen(here)  # its delivery is to be marked read
    assert channels.for_you == {LEG7: 0, MAIN: 1}
    assert channels.unread[LEG7] == 0
