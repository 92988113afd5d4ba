"""What the TUI shows, computed from the bus's records: the sidebar's rows, a message as styled
text, `@agent` completion. Pure (no I/O, no clock), so it is tested without a terminal.

Styles are rich style strings; every distinction that colour makes is also made in text (a
glyph, a `[ask]` label, reverse video for what is addressed to the human), so the screen
still says everything under NO_COLOR.

Text Legion did not write (the bus's bodies and names, a tracker's titles and questions, a
transcript, a screen, a log) is shown through `for_display`, as a rich `Text` (`shown`), never
as a string a widget would read as markup.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, TypeVar

from markdown_it import MarkdownIt
from rich.console import Console
from rich.markdown import Markdown
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
from legion.core.decide import Action, Decision
from legion.core.model import Mode, Status
from legion.core.task_list import TaskList
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


# -- the board ----------------------------------------------------------------------------------


class BoardLine(Protocol):
    """An issue on the board (`legion.tui.sources.BoardIssue`)."""

    @property
    def phase(self) -> Status: ...
    @property
    def identifier(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def worker(self) -> str: ...
    @property
    def review(self) -> str: ...
    @property
    def action(self) -> Action: ...
    @property
    def mode(self) -> Mode | None: ...
    @property
    def live(self) -> bool: ...


CURSOR_STYLE = "reverse"  # the board's highlighted issue (also marked with ">")


def board_text(issues: Sequence[BoardLine], cursor: int | None = None) -> Text:
    """The issues under a heading per phase (in the order given), in aligned columns: the
    issue, its worker, its pull request's review, and its title last, where a narrow
    screen cuts it. `cursor`: the index of the highlighted issue (a `>` before it, in
    reverse video)."""
    if not issues:
        return Text('No issues yet: `legion issue create "Title"` adds one.')
    shown_ids = [for_display(i.identifier) for i in issues]
    widths = [max(len(i) for i in shown_ids), max(len(i.worker) for i in issues)]
    review_width = max(len(for_display(i.review)) for i in issues)
    lines: list[Text] = []
    previous: Status | None = None
    for index, issue in enumerate(issues):
        if issue.phase != previous:
            count = sum(1 for other in issues if other.phase == issue.phase)
            lines.append(Text(f"{issue.phase.value} ({count})", style="bold"))
            previous = issue.phase
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append("> " if index == cursor else "  ", style="bold")
        line.append(f"{shown_ids[index]:<{widths[0]}}  ", style="bold")
        line.append(f"{issue.worker:<{widths[1]}}  ", style="dim" if issue.worker == "-" else "")
        line.append(f"{for_display(issue.review):<{review_width}}  ")
        line.append(for_display(issue.title))
        if index == cursor:
            line.stylize(CURSOR_STYLE)
        lines.append(line)
    return Text("\n", no_wrap=True, overflow="ellipsis").join(lines)


def board_line_issues(issues: Sequence[BoardLine]) -> list[int | None]:
    """For each line `board_text` shows, the index of its issue (None: a phase's heading)."""
    found: list[int | None] = []
    previous: Status | None = None
    for index, issue in enumerate(issues):
        if issue.phase != previous:
            found.append(None)
            previous = issue.phase
        found.append(index)
    return found


# The suggestions the daemon carries out as a plain start of the suggested mode's worker
# (`legion.reconcile`'s `dispatch`), which is what `legion dispatch ISSUE MODE` does. The
# others do more than start a worker (clear labels, move the issue, resume a session with a
# prompt of their own), so they are left to the daemon.
DISPATCHABLE: frozenset[Action] = frozenset(
    {
        Action.DISPATCH_ARCHITECT,
        Action.DISPATCH_PLANNER,
        Action.DISPATCH_IMPLEMENTER,
        Action.DISPATCH_REVIEWER,
        Action.RESUME_IMPLEMENTER_FOR_RETRO,
    }
)


@dataclass(frozen=True, slots=True)
class DispatchChoice:
    """What `d` on the board starts: `legion dispatch IDENTIFIER MODE`."""

    identifier: str
    mode: Mode


def dispatch_choice(issue: BoardLine) -> DispatchChoice | str:
    """The worker `d` starts for `issue`: the mode the decision table suggests, when the
    suggestion is to start one and the issue has no live worker; else why not, in a line."""
    name = issue.identifier
    if issue.live:
        return f"{name} has a live worker ({issue.worker}): nothing to dispatch"
    if issue.worker == "unknown":
        return f"{name}: tmux did not answer, so whether it has a worker is unknown"
    if issue.action is Action.SKIP:
        return f"nothing to dispatch for {name} in {issue.phase.value} now (the table says skip)"
    if issue.action not in DISPATCHABLE or issue.mode is None:
        return f"{name}: the next step is {next_step(issue)}, not a dispatch (the daemon's)"
    return DispatchChoice(name, issue.mode)


def next_step(issue: BoardLine) -> str:
    """What the decision table suggests for `issue`, in words (`Decision.words`, as
    `legion state` says it), never the action's internal name."""
    return Decision(issue.action, issue.mode).words


def dispatch_hint(issue: BoardLine) -> str:
    """The board's line about its highlighted issue: what `d` would do."""
    choice = dispatch_choice(issue)
    if isinstance(choice, str):
        return choice
    hint = f"{choice.identifier}: d dispatches {choice.mode.value}"
    words = next_step(issue)
    return hint if words == f"dispatch {choice.mode.value}" else f"{hint} ({words})"


# -- the inbox ----------------------------------------------------------------------------------


class TrackerLine(Protocol):
    """A question asked on a tracker (`legion.tui.sources.TrackerAsk`)."""

    @property
    def asked_at(self) -> str: ...


Q = TypeVar("Q", bound=TrackerLine)
T = TypeVar("T")
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


# -- peeking --------------------------------------------------------------------------------------


def task_line(tasks: TaskList) -> str:
    """A session's task list in a line: `Tasks 2/5, now: Writing the parser`."""
    line = f"Tasks {tasks.progress}"
    return f"{line}, now: {tasks.current}" if tasks.current else line


def by_time(items: Iterable[T], key: Callable[[T], str]) -> list[T]:
    """`items` oldest first by their timestamp (`key`): RFC 3339 times of any precision (the
    action log's seconds, the bus's milliseconds); the order given where two are the same,
    and an unreadable one first."""

    def when(item: T) -> datetime:
        try:
            found = datetime.fromisoformat(key(item).replace("Z", "+00:00"))
        except ValueError:
            return datetime.min.replace(tzinfo=UTC)
        return found if found.tzinfo else found.replace(tzinfo=UTC)

    return sorted(items, key=when)


def last_screen_lines(captured: str, count: int) -> str:
    """The last `count` lines of a captured tmux pane, without the blank rows under the
    cursor (as `legion peek` shows it)."""
    rows = captured.splitlines()
    while rows and not rows[-1].strip():
        rows.pop()
    return "\n".join(rows[-count:])


def transcript_lines(raw_lines: Iterable[str], count: int) -> list[str]:
    """The last `count` things said in a Claude Code transcript or a Codex rollout (JSON
    lines): the user's and the assistant's text, and each tool the assistant called, one line
    each. Lines that are not JSON, or of types this does not know, are skipped (the formats
    change between versions)."""
    said: list[str] = []
    for line in raw_lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        if entry.get("type") in ("user", "assistant"):
            said += _entry_lines(entry)
        elif entry.get("type") == "response_item" and isinstance(entry.get("payload"), dict):
            said += _rollout_item_lines(entry["payload"])
    return said[-count:]


# What Codex adds to the conversation itself, before the prompt: not something anybody said.
_CODEX_CONTEXT = ("<environment_context>", "# AGENTS.md instructions", "<skill>", "<permissions")


def _rollout_item_lines(item: dict[str, object]) -> list[str]:
    """One line per text of a Codex rollout's message, or per function call."""
    if item.get("type") == "function_call":
        try:
            arguments = json.loads(str(item.get("arguments") or "{}"))
        except ValueError:
            arguments = {}
        command = arguments.get("cmd") if isinstance(arguments, dict) else None
        detail = f" {for_display(' '.join(str(command).split()))[:200]}" if command else ""
        return [f"assistant: ({item.get('name', 'tool')}){detail}"]
    role = item.get("role")
    if item.get("type") != "message" or role not in ("user", "assistant"):
        return []
    found = []
    content = item.get("content")
    for block in content if isinstance(content, list) else []:
        text = str(block.get("text", "")) if isinstance(block, dict) else ""
        if text.strip() and not text.lstrip().startswith(_CODEX_CONTEXT):
            found.append(f"{role}: {for_display(' '.join(text.split()))[:500]}")
    return found


def _entry_lines(entry: dict[str, object]) -> list[str]:
    who = str(entry.get("type"))
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    found: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and str(block.get("text", "")).strip():
            first = " ".join(str(block["text"]).split())
            found.append(f"{who}: {for_display(first)[:500]}")
        elif block.get("type") == "tool_use":
            found.append(f"{who}: ({block.get('name', 'tool')})")
    return found
