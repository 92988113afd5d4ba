"""What the TUI's inbox shows: the bus's questions and the trackers' in one list, oldest first,
and a question's Markdown, its untrusted characters escaped first. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol, TypeVar

from markdown_it import MarkdownIt
from rich.markdown import Markdown
from rich.text import Text

from legion.bus.model import (
    Message,
)
from legion.core.text import for_display


class TrackerLine(Protocol):
    """A question asked on a tracker (`legion.tui.sources.TrackerAsk`)."""

    @property
    def asked_at(self) -> str: ...


Q = TypeVar("Q", bound=TrackerLine)


_LONG_AGO = datetime.min.replace(tzinfo=UTC)


def question_time(at: str) -> datetime:
    """When a question was asked, for ordering (an unreadable time sorts first)."""
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        return _LONG_AGO
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def inbox_order(messages: Sequence[Message], asked: Sequence[Q]) -> list[Message | Q]:
    """The bus's questions and the trackers' in one list, oldest first (stable: each keeps its
    own order among equal times)."""
    both: list[tuple[datetime, int, Message | Q]] = [
        (question_time(m.created_at), n, m) for n, m in enumerate(messages)
    ]
    both += [(question_time(q.asked_at), len(both) + n, q) for n, q in enumerate(asked)]
    return [item for _, _, item in sorted(both, key=lambda found: (found[0], found[1]))]


def question_text(comment: str) -> str:
    """A tracker question's text without its `## Question` heading."""
    lines = comment.strip().splitlines()
    if lines and lines[0].strip().lower().lstrip("#").strip() == "question":
        lines = lines[1:]
    return for_display("\n".join(lines).strip())


_INLINE = MarkdownIt("commonmark", {"html": False}).enable("strikethrough")


class _SafeMarkdown(Markdown):
    """Rich's Markdown with HTML read as text (a tracker's `<div>` would otherwise vanish)
    and links shown with their address (no terminal hyperlink to a place nobody checked)."""

    def __init__(self, markup: str) -> None:
        super().__init__(markup, hyperlinks=False)
        parser = MarkdownIt("commonmark", {"html": False}).enable("strikethrough").enable("table")
        self.parsed = parser.parse(markup)


def question_markdown(text: str) -> Markdown:
    """A question's text rendered as Markdown (headings, emphasis, lists, code), its
    untrusted characters escaped first (`for_display`)."""
    return _SafeMarkdown(for_display(text))


_INLINE_STYLES = {"strong": "bold", "em": "italic", "s": "strike"}

_HEADING = re.compile(r"^ {0,3}#{1,6}(?:\s+|$)")


def markdown_line(line: str) -> Text:
    """One line of Markdown as styled text (emphasis, code, links with their address), for a
    list's cell; escaped first (`for_display`). A heading's marks are dropped."""
    text = Text(no_wrap=True, overflow="ellipsis")
    parsed = _INLINE.parseInline(_HEADING.sub("", for_display(line)))
    tokens = (parsed[0].children or []) if parsed else []
    styles: list[str] = []
    href: list[str] = []
    for token in tokens:
        kind = token.type
        if kind.endswith("_open") and kind[: -len("_open")] in _INLINE_STYLES:
            styles.append(_INLINE_STYLES[kind[: -len("_open")]])
        elif kind.endswith("_close") and kind[: -len("_close")] in _INLINE_STYLES and styles:
            styles.pop()
        elif kind == "link_open":
            href.append(str(token.attrs.get("href", "")))
            styles.append("underline")
        elif kind == "link_close":
            if styles:
                styles.pop()
            if href:
                text.append(f" ({href.pop()})")
        elif kind == "code_inline":
            text.append(token.content, style=" ".join([*styles, "bold"]))
        elif kind in ("softbreak", "hardbreak"):
            text.append(" ")
        else:  # text, an image's alt text
            text.append(token.content, style=" ".join(styles))
    return text
