"""What the human has read, written where each mark lives: how far each channel was read
(the TUI's own `ReadMarks`, on disk within a second of a change: one write for a burst), and
a message addressed to the human marked read on the bus once the open channel showed it.
Which messages count as unread where is `legion.tui.channels` (no bus there); this reads the
first counts and writes what it says."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from textual.app import App

from legion.bus import Bus
from legion.bus.model import HUMAN_NAME, Agent, Channel, Message
from legion.tui.attempt import attempt
from legion.tui.channels import Channels
from legion.tui.readmarks import ReadMarks

MARKS_SAVED_AFTER_S = 1.0  # read marks are written at most this often
COUNTED = 1000  # the newest messages after a read mark counted at start


def unread_counts(bus: Bus, marks: ReadMarks, channels: Iterable[Channel]) -> dict[Channel, int]:
    """Per channel, the messages after its read mark that the human did not write."""
    counts: dict[Channel, int] = {}
    for channel in channels:
        newer = bus.messages(channel=channel, since=marks.last_seen(channel), last=COUNTED)
        counts[channel] = sum(1 for m in newer if m.sender != HUMAN_NAME)
    return counts


class Reads:
    """`bus` is the app's own connection (reads are marked on the app's thread)."""

    def __init__(
        self, app: App[Any], bus: Bus, human: Agent, channels: Channels, marks: ReadMarks
    ) -> None:
        self.app = app
        self.bus = bus
        self.human = human
        self.channels = channels
        self.marks = marks
        self._save_due = False

    def seen(self, shown: Sequence[Message]) -> None:
        """The human has now seen `shown` in the open channel."""
        if self.channels.seen(shown):
            attempt(self.app, lambda: self.bus.mark_read(self.human.id, (m.id for m in shown)))
        if shown:
            self._save_soon()

    def waiting(self, unread_for_you: Sequence[Message]) -> None:
        """What is addressed to the human and unread, counted by channel; what of it the open
        channel shows already is read."""
        here = self.channels.waiting(unread_for_you)
        if here:
            self.seen(here)

    def save(self) -> None:
        """The read marks on disk now (the app closes)."""
        self.marks.save()

    def _save_soon(self) -> None:
        if not self._save_due:
            self._save_due = True
            self.app.set_timer(MARKS_SAVED_AFTER_S, self._save)

    def _save(self) -> None:
        self._save_due = False
        self.marks.save()
