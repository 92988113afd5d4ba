"""What the TUI shows, computed from the bus's records: the sidebar's rows, a message as styled
text, `@agent` completion, the keys' help. Pure (no I/O, no clock), so it is tested without a
terminal; so are the board's, the inbox's and peek's (`present_board`, `present_inbox`,
`present_peek`).

Styles are rich style strings; every distinction that colour makes is also made in text (a
glyph, a `[ask]` label, reverse video for what is addressed to the human), so the screen
still says everything under NO_COLOR.

Text Legion did not write (the bus's bodies and names, a tracker's titles and questions, a
transcript, a screen, a log) is shown through `for_display`, as a rich `Text` (`shown`), never
as a string a widget would read as markup.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from rich.console import Console
from rich.table import Table
from rich.text import Text

from legion.bus.model import (
    HUMAN_NAME,
    ORCHESTRATOR_NAME,
    Agent,
    AgentStatus,
    Channel,
    Message,
    MessageKind,
)
from legion.core.text import for_display

# The seed's glyphs, and "-" for an idle agent (waiting for a prompt: nothing to see).
GLYPHS: dict[AgentStatus, str] = {
    AgentStatus.BUSY: "*",
    AgentStatus.BLOCKED: "?",
    AgentStatus.COMPLETE: "o",
    AgentStatus.FAILED: "x",
    AgentStatus.IDLE: "-",
    AgentStatus.ARCHIVED: ".",
    AgentStatus.STOPPED: "=",
}
GLYPH_STYLES: dict[AgentStatus, str] = {
    AgentStatus.BUSY: "bold green",
    AgentStatus.BLOCKED: "bold yellow",
    AgentStatus.COMPLETE: "cyan",
    AgentStatus.FAILED: "bold red",
    AgentStatus.IDLE: "dim",
    AgentStatus.ARCHIVED: "dim",
    AgentStatus.STOPPED: "dim",
}
# A label for each kind but plain talk, and its colour.
KIND_LABELS: dict[MessageKind, tuple[str, str]] = {
    MessageKind.ASK: ("[ask]", "bold yellow"),
    MessageKind.ANSWER: ("[answer]", "bold green"),
    MessageKind.COMPLETE: ("[done]", "bold cyan"),
    MessageKind.SYSTEM: ("[system]", "dim"),
}
MENTION_STYLE = "bold magenta"
HUMAN_MENTION_STYLE = "bold reverse"  # addressed to you: reverse video shows without colour
UNREAD_CAP = 999  # counted up to this; more shows as "999+"

# A mention as the bus reads one (legion.bus.address), for highlighting only: resolving is
# the bus's job.
_MENTION = re.compile(r"(?<![A-Za-z0-9_.+@/-])@[A-Za-z0-9][A-Za-z0-9._/-]*")
_TRAILING = "._/-"


# -- the sidebar ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChannelRow:
    channel: Channel
    unread: int  # messages after the human last looked at the channel (not the human's own)
    for_you: int  # of those, addressed to the human and not read

    @property
    def key(self) -> str:
        return f"c:{self.channel}"


@dataclass(frozen=True, slots=True)
class AgentRow:
    agent: Agent
    archived: bool  # listed under "Archived" (beneath its channel's name there)

    @property
    def key(self) -> str:
        return f"a:{self.agent.id}"


@dataclass(frozen=True, slots=True)
class ArchivedHeader:
    count: int
    expanded: bool

    key = "archived"


@dataclass(frozen=True, slots=True)
class ArchivedChannelRow:
    """A channel's name over its archived agents, in the Archived section."""

    channel: Channel

    @property
    def key(self) -> str:
        return f"ac:{self.channel}"


Row = ChannelRow | AgentRow | ArchivedHeader | ArchivedChannelRow


def channels_of(agents: Iterable[Agent], messages: Iterable[Message]) -> set[Channel]:
    """Every channel an agent is in or a message was posted in (the human is in none)."""
    found = {agent.channel for agent in agents if agent.project}
    found.update(message.channel for message in messages)
    return found


def _agent_order(agent: Agent) -> tuple[bool, str]:
    return (agent.name != ORCHESTRATOR_NAME, agent.name)  # the orchestrator first


def sidebar_rows(
    channels: Iterable[Channel],
    agents: Sequence[Agent],
    unread: Mapping[Channel, int],
    for_you: Mapping[Channel, int],
    *,
    archived_expanded: bool,
) -> list[Row]:
    """Channels, each with its agents beneath; then the archived agents in a section of their
    own, listed only when it is expanded."""
    live: dict[Channel, list[Agent]] = {}
    archived: list[Agent] = []
    for agent in agents:
        if agent.status is AgentStatus.ARCHIVED:
            archived.append(agent)
        else:
            live.setdefault(agent.channel, []).append(agent)
    # By project; in each, the orchestrator's branch (the base) first, then by name.
    base = {a.channel for a in agents if a.name == ORCHESTRATOR_NAME}
    rows: list[Row] = []
    for channel in sorted(
        set(channels) | live.keys(), key=lambda c: (c.project, c not in base, c.branch)
    ):
        rows.append(ChannelRow(channel, unread.get(channel, 0), for_you.get(channel, 0)))
        rows += [
            AgentRow(a, archived=False) for a in sorted(live.get(channel, []), key=_agent_order)
        ]
    if archived:
        rows.append(ArchivedHeader(len(archived), archived_expanded))
        if archived_expanded:
            previous = None
            for agent in sorted(archived, key=lambda a: (a.project, a.branch, a.name)):
                if agent.channel != previous:
                    rows.append(ArchivedChannelRow(agent.channel))
                    previous = agent.channel
                rows.append(AgentRow(agent, archived=True))
    return rows


def shown(text: str, style: str = "") -> Text:
    """Text Legion did not write, for any widget: escaped (`for_display`: newlines and tabs
    kept), and a `Text`, so `[red]` or `[link=…]` in it is shown, not obeyed."""
    return Text(for_display(text), style=style)


def count_text(count: int) -> str:
    return f"{UNREAD_CAP}+" if count > UNREAD_CAP else str(count)


def row_text(row: Row) -> Text:
    """The sidebar's line for a row (one line: a long name is cut with an ellipsis)."""
    text = Text(no_wrap=True, overflow="ellipsis")
    if isinstance(row, ChannelRow):
        text.append(for_display(str(row.channel)), style="bold")
        if row.unread:
            text.append(f" {count_text(row.unread)}", style="bold cyan")
        if row.for_you:
            text.append(f" @{count_text(row.for_you)}", style=HUMAN_MENTION_STYLE)
    elif isinstance(row, AgentRow):
        agent = row.agent
        text.append("    " if row.archived else "  ")
        text.append(GLYPHS[agent.status], style=GLYPH_STYLES[agent.status])
        text.append(for_display(f" @{agent.name}"))
    elif isinstance(row, ArchivedChannelRow):
        text.append(for_display(f"  {row.channel}"), style="dim")
    else:
        text.append(f"{'v' if row.expanded else '>'} Archived ({row.count})", style="dim bold")
    return text


# -- messages -------------------------------------------------------------------------------------


def short_address(address: str, channel: Channel) -> str:
    """An address as written in `channel`: the name alone on the same branch, branch/name in
    the same project, the whole address elsewhere."""
    if address.startswith(f"{channel}/"):
        return address.removeprefix(f"{channel}/")
    return address.removeprefix(f"{channel.project}/")


def clock_time(created_at: str) -> str:
    """A message's time as the local wall clock, HH:MM:SS ("" when unreadable)."""
    try:
        return datetime.fromisoformat(created_at).astimezone().strftime("%H:%M:%S")
    except ValueError:
        return ""


def addresses_human(message: Message) -> bool:
    return HUMAN_NAME in message.mentions


def body_text(body: str) -> Text:
    """The body with each mention highlighted (`@human` in reverse video)."""
    shown = for_display(body).expandtabs(4)
    text = Text(shown)
    for match in _MENTION.finditer(shown):
        mention = match.group().rstrip(_TRAILING)
        style = HUMAN_MENTION_STYLE if mention == f"@{HUMAN_NAME}" else MENTION_STYLE
        text.stylize(style, match.start(), match.start() + len(mention))
    return text


def message_text(message: Message, when: str, *, for_you: bool = False) -> Text:
    """One message: its time, its sender (short in its channel), its kind's label, its body.
    `for_you` (addressed to the human): a `>` mark in reverse video before it."""
    text = Text()
    if for_you:
        text.append(">", style=HUMAN_MENTION_STYLE)
        text.append(" ")
    if when:
        text.append(f"{when} ", style="dim")
    sender = short_address(message.sender, message.channel)
    sender_style = HUMAN_MENTION_STYLE if message.sender == HUMAN_NAME else "bold"
    text.append(for_display(f"@{sender}"), style=sender_style)
    label = KIND_LABELS.get(message.kind)
    if label is not None:
        text.append(f" {label[0]}", style=label[1])
    text.append(" ")
    text.append_text(body_text(message.body))
    if message.kind is MessageKind.SYSTEM:
        text.stylize("italic")
    return text


def message_indent(when: str, *, for_you: bool = False) -> int:
    """How far a message's continuation lines are indented: under its sender, past the mark
    and the time (2 at least, so a continuation never reads as a message of its own)."""
    return max(2, (2 if for_you else 0) + (len(when) + 1 if when else 0))


def hanging_lines(text: Text, width: int, indent: int, console: Console) -> Text:
    """`text` wrapped to `width` columns, its continuation lines (and the lines of each
    further paragraph) indented by `indent`: a message's body reads as one block beside its
    time. `console` only measures (wrapping needs one); nothing is printed."""
    width = max(1, width)
    indent = max(0, min(indent, width // 2))
    lines: list[Text] = []
    for n, paragraph in enumerate(text.split("\n", allow_blank=True)):
        rest = paragraph
        if n == 0:
            wrapped = paragraph.wrap(console, width)
            head = wrapped[0] if wrapped else Text()
            lines.append(head.copy())
            rest = paragraph[len(head.plain) :]
            rest = rest[len(rest.plain) - len(rest.plain.lstrip(" ")) :]
            if not rest.plain:
                continue
        for line in rest.wrap(console, width - indent):
            lines.append(Text(" " * indent) + line)
    for line in lines:
        line.rstrip()
    return Text("\n").join(lines)


# -- completion -----------------------------------------------------------------------------------


def mention_candidates(channel: Channel, agents: Iterable[Agent]) -> list[str]:
    """What `@` can complete to in `channel`: its agents by name, `human` (on every channel),
    then the project's agents on other branches as branch/name; `legion` (the orchestrator)
    whichever branch it is on."""
    here: list[str] = []
    elsewhere: list[str] = []
    for agent in sorted(agents, key=_agent_order):
        if agent.project != channel.project:
            continue
        if agent.name == ORCHESTRATOR_NAME or agent.channel == channel:
            here.append(agent.name)
        else:
            elsewhere.append(f"{agent.branch}/{agent.name}")
    return list(dict.fromkeys([*here, HUMAN_NAME, *elsewhere]))


def complete_mention(value: str, candidates: Sequence[str]) -> str | None:
    """`value` with its last word completed, when that word is an unfinished `@mention` that
    a candidate begins with (the first one, in the candidates' order); None otherwise."""
    start = value.rfind("@")
    if start < 0 or (start > 0 and not value[start - 1].isspace()):
        return None
    typed = value[start + 1 :]
    if any(char.isspace() for char in typed):
        return None
    for candidate in candidates:
        if candidate.lower().startswith(typed.lower()) and len(candidate) > len(typed):
            return f"{value[:start]}@{candidate} "
    return None


# -- keys ---------------------------------------------------------------------------------------

# Every key, as the help screen (`?`, F1) lists it and docs/tui.md's table says it.
KEYS: tuple[tuple[str, str, str], ...] = (
    ("F2 … F6", "anywhere", "Chat, Inbox, Board, Peek, Log (F2: to the chat line)"),
    ("?", "anywhere but a text line", "this help"),
    ("F1", "anywhere", "this help"),
    ("Tab / Shift+Tab", "anywhere", "next / previous area (in the chat line Tab only completes)"),
    ("Escape", "anywhere", "to the sidebar"),
    (
        "↑ ↓, Enter",
        "sidebar",
        "move; open the channel (an agent's: its channel), or Archived; "
        "Enter on the open channel: to its chat line",
    ),
    ("o", "sidebar", "attach: the highlighted agent's live session here, read-write (C-b d back)"),
    ("a", "sidebar", "archive the highlighted agent (asks first: y/n)"),
    ("k / K", "sidebar", "kill the highlighted agent (K: even mid-turn); asks first: y/n"),
    ("Enter", "chat line", "post into the channel"),
    ("Tab or →", "chat line", "take the suggested @agent (or @human)"),
    ("↑ PgUp Home, wheel", "messages, at the top", "load the page of older messages"),
    ("Enter", "answer line", "answer the highlighted question"),
    ("↑ ↓, click", "board", "move the highlighted issue"),
    ("d", "board", "dispatch the worker the decision table suggests"),
    ("y / n, Escape", "a y/n question", "yes / no (any other key: no)"),
    ("Ctrl+R", "anywhere", "read the shown view again now (the inbox: the trackers too)"),
    ("Ctrl+Q", "anywhere", "quit"),
    ("Ctrl+P", "anywhere", "Textual's command palette (themes, keys)"),
)


def keys_table() -> Table:
    """The help screen: every key, where it works, what it does."""
    table = Table(box=None, show_edge=False, pad_edge=False, expand=True)
    table.add_column("key", style="bold", no_wrap=True)
    table.add_column("where", style="dim", ratio=1)
    table.add_column("does", ratio=2)
    for row in KEYS:
        table.add_row(*row)
    return table


def one_line(text: str) -> str:
    """An error as one notification line."""
    return " ".join(text.split())


# -- the log --------------------------------------------------------------------------------------


def fit_columns(
    natural: Sequence[int], room: int, keep: Collection[int], minimum: int = 6
) -> list[int]:
    """Widths for columns whose content is `natural` cells wide, to fit `room` cells: the
    columns at the indexes in `keep` whole; the others cut, the widest first, down to
    `minimum` (or their natural width, if less). What cannot fit then is past the edge."""
    widths = list(natural)
    excess = sum(widths) - room
    while excess > 0:
        cuttable = [i for i, w in enumerate(widths) if i not in keep and w > minimum]
        if not cuttable:
            break
        widest = max(cuttable, key=lambda i: (widths[i], i))
        widths[widest] -= 1
        excess -= 1
    return widths


def cell(text: str) -> Text:
    """A table cell of text Legion did not write: escaped, on one line, cut with `…` where
    its column is narrower."""
    return Text(" ".join(for_display(text).split()), no_wrap=True, overflow="ellipsis")
