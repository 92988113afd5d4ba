"""The Inbox view (F3): every question waiting for the human, across projects, oldest first:
the bus's open questions addressed to them and the issues waiting on the trackers. The
highlighted one is shown in full above the answer line, which answers it."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from rich.console import Group
from textual import on, work
from textual.app import ComposeResult
from textual.widgets import DataTable, Input, Static, TabbedContent, TabPane

from legion.bus.model import Message
from legion.errors import LegionError
from legion.tui.closing import while_open
from legion.tui.commands import Commands
from legion.tui.present import count_text, one_line, shown
from legion.tui.present_inbox import inbox_order, markdown_line, question_markdown, question_text
from legion.tui.sources import TrackerAsk, TrackerInbox
from legion.tui.textline import TextLine

InboxItem = Message | TrackerAsk


def _inbox_key(item: InboxItem) -> str:
    return item.key if isinstance(item, TrackerAsk) else item.id


class InboxView(TabPane):
    """The questions, the one highlighted in full, and the answer line. A bus question is
    answered with `reply` (the app's: `actions.reply`, then the asker's daemon woken); a
    tracker's as `legion feedback` does (`Commands.give_feedback`), in a worker thread."""

    DEFAULT_CSS = """
    #inbox-detail { height: auto; max-height: 40%; padding: 0 1; }
    #inbox-table { height: 1fr; }
    #inbox-troubles {
        height: auto; max-height: 4; padding: 0 1; display: none;
        text-wrap: nowrap; text-overflow: ellipsis;
    }
    """

    def __init__(
        self,
        title: str,
        commands: Commands,
        reply: Callable[[Message, str], bool],
        format_time: Callable[[str], str],
        questions: Sequence[Message] = (),
        *,
        id: str | None = None,
    ) -> None:
        super().__init__(title, id=id)
        self.commands = commands
        self.reply = reply
        self.format_time = format_time
        self.questions = list(questions)  # the bus's, for the human
        self.asks: tuple[TrackerAsk, ...] = ()  # the trackers', as last read
        self.troubles: tuple[str, ...] = ()  # projects whose tracker could not be read: why
        self.items: list[InboxItem] = []
        # Tracker answers given (monotonic clock): a reading begun before one may still list it.
        self._answered: dict[str, float] = {}
        self._answering: set[str] = set()

    def compose(self) -> ComposeResult:
        yield Static("", id="inbox-troubles")
        yield DataTable(id="inbox-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="inbox-detail")
        yield TextLine(placeholder="Answer (Enter sends)", id="answer-input")

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("When", "Channel", "From", "Question")
        self.render_items()

    # -- what there is to answer --------------------------------------------------------------

    def show_questions(self, questions: Sequence[Message]) -> None:
        """The bus's open questions for the human (oldest first), when they changed."""
        if [m.id for m in questions] != [m.id for m in self.questions]:
            self.questions = list(questions)
            self.render_items()

    def asks_read(self, found: TrackerInbox, began: float) -> None:
        """The trackers' questions, read in a reading that began at `began`."""
        # A reading begun after an answer was given lists it no more, or lists it again.
        self._answered = {k: at for k, at in self._answered.items() if at >= began}
        asks = tuple(a for a in found.questions if a.key not in self._answered)
        if asks == self.asks and found.troubles == self.troubles:
            return
        self.asks = asks
        self.troubles = found.troubles
        self.render_items()

    def render_items(self) -> None:
        """The bus's open questions and the trackers', oldest first."""
        table = self.query_one("#inbox-table", DataTable)
        current = self.question()
        self.items = inbox_order(self.questions, self.asks)
        table.clear()
        for item in self.items:
            if isinstance(item, TrackerAsk):
                table.add_row(
                    self.format_time(item.asked_at),
                    shown(item.project),
                    shown(item.identifier),
                    shown(item.title),
                    key=item.key,
                )
                continue
            body = item.body.strip()
            first_line = markdown_line(body.splitlines()[0] if body else "")
            table.add_row(
                self.format_time(item.created_at),
                shown(str(item.channel)),
                shown(f"@{item.sender.rpartition('/')[2]}"),
                first_line,
                key=item.id,
            )
        keys = [_inbox_key(item) for item in self.items]
        if current is not None and _inbox_key(current) in keys:
            table.move_cursor(row=keys.index(_inbox_key(current)))
        count = len(self.items)
        label = "F3 Inbox" + (f" {count_text(count)}" if count else "")
        if self.id is not None:
            self.query_ancestor(TabbedContent).get_tab(self.id).label = label
        troubles = self.query_one("#inbox-troubles", Static)
        troubles.update(shown("\n".join(self.troubles), style="bold"))
        troubles.display = bool(self.troubles)
        self._show_question()

    def question(self) -> InboxItem | None:
        """The highlighted question."""
        table = self.query_one("#inbox-table", DataTable)
        if not self.items or table.row_count == 0:
            return None
        row = min(table.cursor_row, len(self.items) - 1)
        return self.items[row] if row >= 0 else None

    @on(DataTable.RowHighlighted, "#inbox-table")
    def _show_question(self) -> None:
        question = self.question()
        detail = self.query_one("#inbox-detail", Static)
        if question is None:
            detail.update("No open questions for you.")
        elif isinstance(question, TrackerAsk):
            asker = f"{question.project} {question.identifier} {question.title}"
            detail.update(
                Group(
                    shown(f"{asker} asks:", style="bold"),
                    question_markdown(question_text(question.question)),
                )
            )
        else:
            detail.update(
                Group(
                    shown(f"@{question.sender} asks in {question.channel}:", style="bold"),
                    question_markdown(question.body.strip()),
                )
            )

    # -- answering ----------------------------------------------------------------------------

    @on(Input.Submitted, "#answer-input")
    def _answer(self, event: Input.Submitted) -> None:
        event.stop()
        question = self.question()
        if question is None:
            self.notify("no question selected", severity="error")
            return
        if isinstance(question, TrackerAsk):
            if question.key in self._answering:
                self.notify(f"answering {question.identifier} already", severity="warning")
                return
            self._answering.add(question.key)
            self._answer_ask(question, event.value)
            return
        if self.reply(question, event.value):
            event.input.value = ""

    @work(thread=True, group="feedback")
    def _answer_ask(self, ask: TrackerAsk, text: str) -> None:
        # `legion feedback`'s: the tracker may be online, so off the app's thread.
        try:
            issue = self.commands.give_feedback(ask.project, ask.identifier, text)
        except LegionError as exc:
            self.app.call_from_thread(self._ask_refused, ask, one_line(str(exc)))
            return
        self.app.call_from_thread(self._ask_answered, ask, issue, time.monotonic())

    @while_open
    def _ask_refused(self, ask: TrackerAsk, reason: str) -> None:
        self._answering.discard(ask.key)
        self.notify(reason, severity="error", markup=False)

    @while_open
    def _ask_answered(self, ask: TrackerAsk, issue: str, at: float) -> None:
        self._answering.discard(ask.key)
        self._answered[ask.key] = at
        self.asks = tuple(a for a in self.asks if a.key != ask.key)
        self.query_one("#answer-input", Input).value = ""
        self.notify(f"answered {ask.project} {issue}: Legion relays it to the worker")
        self.render_items()
