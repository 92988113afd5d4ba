"""The channels the TUI lists and what the human has not read in each: a channel's unread
messages (after the read mark, not the human's own), those addressed to the human whose
delivery is unread (`@N`), and which channel is open. No Textual and no bus here: the app
reads the bus and writes what this says to write (`seen`'s answer: mark them read)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from legion.bus.model import HUMAN_NAME, Agent, Channel, Message
from legion.tui.present import Row, sidebar_rows
from legion.tui.readmarks import ReadMarks


class Channels:
    def __init__(
        self,
        channels: Iterable[Channel],
        unread: dict[Channel, int],
        marks: ReadMarks,
        selected: Channel | None,
    ) -> None:
        self.channels = set(channels)
        self.unread = unread  # per channel: messages after its read mark, not the human's
        self.for_you: dict[Channel, int] = {}  # per channel: for the human, delivery unread
        self.marks = marks
        self.selected = selected
        self.archived_expanded = False  # the sidebar's Archived section
        if selected is not None:
            # The channel the human stands in is listed from the start, though nobody has
            # spoken there yet: it is where the chat line posts.
            self.channels.add(selected)

    def add(self, channels: Iterable[Channel]) -> None:
        self.channels |= set(channels)

    def arrived(self, messages: Iterable[Message]) -> list[Message]:
        """New messages: each channel listed, counted unread unless it is the open one
        (the human's own never count). Those in the open channel, to be shown."""
        here: list[Message] = []
        for message in messages:
            channel = message.channel
            self.channels.add(channel)
            if channel == self.selected:
                here.append(message)
            elif message.sender != HUMAN_NAME:
                self.unread[channel] = self.unread.get(channel, 0) + 1
        return here

    def seen(self, shown: Sequence[Message]) -> bool:
        """The human has now seen `shown` in the open channel; True when some were
        addressed to them unread, so their deliveries are to be marked read on the bus."""
        if self.selected is None:
            return False
        if shown:
            self.marks.mark(self.selected, shown[-1].seq)
        self.unread[self.selected] = 0
        if self.for_you.get(self.selected):
            self.for_you[self.selected] = 0
            return True
        return False

    def waiting(self, unread_for_you: Iterable[Message]) -> list[Message]:
        """The messages addressed to the human, delivery unread, counted by channel; those in
        the open channel (shown already, so read: `seen` them)."""
        counts: dict[Channel, int] = {}
        here: list[Message] = []
        for message in unread_for_you:
            counts[message.channel] = counts.get(message.channel, 0) + 1
            if message.channel == self.selected:
                here.append(message)
        self.for_you = counts
        return here

    def rows(self, agents: Sequence[Agent]) -> list[Row]:
        """The sidebar's rows."""
        return sidebar_rows(
            self.channels,
            agents,
            self.unread,
            self.for_you,
            archived_expanded=self.archived_expanded,
        )
