"""The Chat view (F2): the open channel's title, its messages (newest at the bottom, older
ones loaded as one scrolls above the first, each drawn hanging under its sender, marked when
it is for the human) and the chat line, which completes `@mentions`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.events import Focus, MouseScrollUp, Resize
from textual.suggester import Suggester
from textual.widgets import RichLog, Static, TabPane

from legion.bus.model import Agent, AgentStatus, Channel, Message
from legion.tui.present import (
    addresses_human,
    complete_mention,
    hanging_lines,
    mention_candidates,
    message_indent,
    message_text,
    shown,
)
from legion.tui.textline import TextLine

HISTORY = 200  # messages loaded when a channel opens, and each time one scrolls back


class MentionSuggester(Suggester):
    """Completes an `@mention` from the selected channel's agents (Tab or Right accepts)."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.candidates: list[str] = []

    async def get_suggestion(self, value: str) -> str | None:
        return complete_mention(value, self.candidates)


class ChatInput(TextLine):
    """The chat line: Tab takes the suggested completion, and only that. It never moves the
    focus: a Tab that found nothing to complete would otherwise send the rest of the
    sentence to the sidebar, where plain letters act on agents."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("tab", "complete", "Complete @", show=False, priority=True),
    ]

    # Empty and not focused, the line says how to get into it (the TUI opens in the sidebar).
    TYPING = "Message (@ completes with Tab)"
    WAITING = "F2 to write here (@ completes with Tab)"

    def action_complete(self) -> None:
        if self.cursor_at_end and self._suggestion:
            self.action_cursor_right()  # takes the suggestion

    def on_focus(self, event: Focus) -> None:
        super().on_focus(event)
        self.placeholder = self.TYPING

    def on_blur(self) -> None:
        self.placeholder = self.WAITING


class MessageLog(RichLog):
    """A channel's messages: the newest `HISTORY` at first, older ones loaded as one scrolls
    above the first. Only what is loaded is rendered (RichLog keeps rendered lines and
    paints only those in view), so a channel of 10,000 messages opens as fast as one of 200."""

    def __init__(self, render: Callable[[Message, int], Text], **kwargs: object) -> None:
        super().__init__(wrap=True, min_width=20, auto_scroll=False, **kwargs)  # type: ignore[arg-type]
        self.render_message = render  # a message as lines of at most the width given
        self.shown: list[Message] = []
        self.complete = True  # whether the first shown message is the channel's first
        self.on_top: Callable[[], None] = lambda: None
        self._width = 0  # the last width the log had on screen
        self._wrapped_at = 0  # the width its lines were last wrapped to

    def _line_width(self) -> int:
        """The width to wrap to: 0 before the log was ever on screen. A log in a hidden view
        has no width: its messages are wrapped to the width it had on screen (not to a few
        columns), and again if it is shown at another."""
        width = self.scrollable_content_region.width
        if width > 0:
            self._width = width
        return self._width

    def _write(self, message: Message, *, scroll_end: bool) -> None:
        width = self._line_width()
        if not width:
            return  # kept in `shown`: written when the log first has a width (`_rewrap`)
        self._wrapped_at = width
        self.write(self.render_message(message, width), width=width, scroll_end=scroll_end)

    def show(self, messages: Sequence[Message], *, complete: bool) -> None:
        """Replace what is shown, and stay at the newest message."""
        self.shown = list(messages)
        self.complete = complete
        self._rerender(at_end=True)

    def append(self, messages: Iterable[Message]) -> None:
        """New messages at the bottom; followed only if the reader is at the bottom already
        (reading history is not interrupted)."""
        follow = self.is_vertical_scroll_end or self.max_scroll_y == 0
        for message in messages:
            self.shown.append(message)
            self._write(message, scroll_end=follow)

    def prepend(self, older: Sequence[Message], *, complete: bool) -> None:
        """Older messages above, keeping the ones in view where they are."""
        before = len(self.lines)
        top = self.scroll_y
        self.shown[:0] = older
        self.complete = complete
        self._rerender(at_end=False)
        self.scroll_to(y=top + len(self.lines) - before, animate=False, immediate=True)

    def _rerender(self, *, at_end: bool) -> None:
        self.clear()
        last = len(self.shown) - 1
        for n, message in enumerate(self.shown):
            # Scrolled with the last write: writes wait until the widget has a size.
            self._write(message, scroll_end=at_end and n == last)

    def _rewrap(self) -> None:
        # Lines are wrapped when written: a new width needs them written again.
        width = self.scrollable_content_region.width
        if width > 0 and width != self._wrapped_at and self.shown:
            self._rerender(at_end=self.is_vertical_scroll_end or self.max_scroll_y == 0)

    def on_resize(self, event: Resize) -> None:
        # Also sent when a hidden view is shown again at another size. (RichLog's own
        # handler runs too: Textual calls each class's.)
        self._rewrap()

    # One more step up at the top (key or wheel) loads the page before. Not on reaching the
    # top: a scroll animation passes through it, and the reader may only be looking there.
    def _ask_older(self) -> None:
        if self.scroll_y <= 0 and not self.complete:
            self.on_top()

    def action_scroll_up(self) -> None:
        self._ask_older()
        super().action_scroll_up()

    def action_page_up(self) -> None:
        self._ask_older()
        super().action_page_up()

    def action_scroll_home(self) -> None:
        self._ask_older()
        super().action_scroll_home()

    def _on_mouse_scroll_up(self, event: MouseScrollUp) -> None:
        # Textual calls each class's handler in turn: Widget's scrolls, this one only asks.
        self._ask_older()


class ChatView(TabPane):
    """The channel's title, its messages and the chat line. Which channel is open, and what
    the chat line sends, the app decides (it keeps the channels).

    `read(channel, last)`: the channel's newest `last` messages, oldest first (the app's
    bus). `format_time` turns a message's `created_at` into what is shown; `for_you(message)`:
    whether it waits for the human (in the inbox), besides naming them."""

    DEFAULT_CSS = """
    #chat-title { height: auto; max-height: 4; padding: 0 1; text-style: bold; }
    MessageLog { height: 1fr; padding: 0 1; }
    """

    def __init__(
        self,
        title: str,
        read: Callable[[Channel, int], list[Message]],
        format_time: Callable[[str], str],
        for_you: Callable[[Message], bool],
        *,
        history: int = HISTORY,
        id: str | None = None,
    ) -> None:
        super().__init__(title, id=id)
        self.read = read
        self.format_time = format_time
        self.for_you = for_you
        self.history = history
        self.channel: Channel | None = None
        self.suggester = MentionSuggester()

    def compose(self) -> ComposeResult:
        yield Static("", id="chat-title")
        yield MessageLog(self.render_message, id="messages")
        yield ChatInput(
            placeholder=ChatInput.WAITING,
            suggester=self.suggester,
            id="chat-input",
        )

    def show_channel(self, channel: Channel | None, agents: Sequence[Agent]) -> None:
        """The title (the channel, how many agents it has) and the names the chat line
        completes, for `channel` among `agents`."""
        title = self.query_one("#chat-title", Static)
        if channel is None:
            title.update("No channels yet: agents appear here when Legion starts them.")
            return
        live = [a for a in agents if a.status is not AgentStatus.ARCHIVED]
        self.suggester.candidates = mention_candidates(channel, live)
        here = [a for a in live if a.channel == channel]
        title.update(shown(f"{channel}  ({len(here)} agent{'' if len(here) == 1 else 's'})"))

    def on_mount(self) -> None:
        self.query_one(MessageLog).on_top = self._load_older

    def render_message(self, message: Message, width: int) -> Text:
        """`message` as lines of at most `width`, hanging under its sender."""
        for_you = addresses_human(message) or self.for_you(message)
        when = self.format_time(message.created_at)
        text = message_text(message, when, for_you=for_you)
        return hanging_lines(text, width, message_indent(when, for_you=for_you), self.app.console)

    def open(self, channel: Channel, agents: Sequence[Agent]) -> list[Message]:
        """Show `channel`'s newest messages (those returned) and its title."""
        self.channel = channel
        found = self.read(channel, self.history)
        self.query_one(MessageLog).show(found, complete=len(found) < self.history)
        self.show_channel(channel, agents)
        return found

    def _load_older(self) -> None:
        log = self.query_one(MessageLog)
        if self.channel is None or log.complete or not log.shown:
            return
        # The bus reads "the newest N", so older pages are read as a longer newest-N.
        wanted = len(log.shown) + self.history
        found = self.read(self.channel, wanted)
        first = log.shown[0].seq
        older = [m for m in found if m.seq < first]
        log.prepend(older, complete=len(found) < wanted)
