"""What the human posts on the bus: a message in the open channel (the chat line) and an
answer to a question (the inbox), through `legion.bus.actions` as `legion say` and
`legion reply` do; each post is then handed over as after them (`Commands.hand_over`: the
project's daemon told, or with none the message delivered now), in a worker thread, since a
delivery may wait on a session."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from textual.app import App

from legion.bus import Bus, actions
from legion.bus.model import Agent, Channel, Message, Posted
from legion.errors import LegionError
from legion.tui.attempt import attempt
from legion.tui.commands import Commands
from legion.tui.present import one_line


class Posting:
    """`bus` is the app's own connection (posts are made on the app's thread); a hand-over
    runs in a worker thread with a connection of its own (`open_bus`). `changed` is called
    after the bus was written (the watcher reads it)."""

    def __init__(
        self,
        app: App[Any],
        bus: Bus,
        human: Agent,
        open_bus: Callable[[], Bus],
        commands: Commands,
        changed: Callable[[], None],
    ) -> None:
        self.app = app
        self.bus = bus
        self.human = human
        self.open_bus = open_bus
        self.commands = commands
        self.changed = changed

    def say(self, channel: Channel | None, text: str) -> bool:
        """Post `text` in `channel` (the open one); False when refused (said why)."""
        if channel is None:
            self.app.notify("no channel selected", severity="error")
            return False
        posted = attempt(self.app, lambda: actions.say(self.bus, self.human, channel, text))
        if posted is None:
            return False
        self.changed()
        self._hand_over(posted)
        return True

    def reply(self, question: Message, text: str) -> bool:
        """Answer a bus question (`actions.reply`); False when refused (said why)."""
        posted = attempt(self.app, lambda: actions.reply(self.bus, self.human, question.id, text))
        if posted is None:
            return False
        self.app.notify(f"answered @{question.sender}")
        self.changed()
        self._hand_over(posted)
        return True

    def _hand_over(self, posted: Posted) -> None:
        self.app.run_worker(
            functools.partial(self._hand_over_now, posted), thread=True, group="wake"
        )

    def _hand_over_now(self, posted: Posted) -> None:
        """Hand the post over, then say what became of it as `legion say` does: whom it wakes
        and, for each addressee, delivered, at the end of its turn, or waiting."""
        from legion.services.messaging import hand_over_said, wakes_said

        if not posted.created:
            return  # the same post again: handed over the first time
        bus = self.open_bus()
        try:
            delivery = self.commands.hand_over(bus, posted)
        except LegionError as exc:
            # A daemon that is not told delivers at its next tick.
            lines = [f"{wakes_said(posted)}; not handed over now ({one_line(str(exc))})"]
        else:
            lines = [wakes_said(posted), *hand_over_said(posted, delivery)]
        finally:
            bus.close()
        self.app.call_from_thread(self.app.notify, "\n".join(lines))
