"""What the TUI shows, without a terminal: sidebar rows, message text, completion, read marks,
transcript lines."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.text import Text

from legion.bus.model import Agent, AgentRole, AgentStatus, Channel, Message, MessageKind
from legion.core.decide import Action, Decision
from legion.core.model import Mode, Status
from legion.tui.present import (
    AgentRow,
    ArchivedChannelRow,
    ArchivedHeader,
    ChannelRow,
    channels_of,
    complete_mention,
    hanging_lines,
    mention_candidates,
    message_indent,
    message_text,
    one_line,
    row_text,
    short_address,
    sidebar_rows,
)
from legion.tui.present_board import (
    DispatchChoice,
    board_line_issues,
    board_text,
    dispatch_choice,
    dispatch_hint,
)
from legion.tui.present_inbox import inbox_order, markdown_line, question_markdown, question_text
from legion.tui.present_peek import last_screen_lines, transcript_lines
from legion.tui.readmarks import ReadMarks
from legion.tui.sources import BoardIssue, TrackerAsk

MAIN = Channel("app", "main")
LEG7 = Channel("app", "legion/LEG-7")


def agent(n: int, channel: Channel, name: str, status: AgentStatus = AgentStatus.BUSY) -> Agent:
    role = AgentRole.CONTROLLER if name == "legion" else AgentRole.IMPLEMENT
    return Agent(n, channel.project, channel.branch, name, role, "t", None, status, 1, "", "")


def message(
    body: str, kind: MessageKind = MessageKind.SAY, sender: str = "app/main/legion"
) -> Message:
    mentions = ("human",) if "@human" in body else ()
    return Message("m", 1, "app", "main", sender, kind, body, mentions, "2025-01-01T00:00:00.000Z")


def test_the_orchestrators_branch_comes_first_and_archived_agents_last() -> None:
    agents = [
        agent(1, LEG7, "review", AgentStatus.IDLE),
        agent(2, MAIN, "legion"),
        agent(3, LEG7, "implement", AgentStatus.BLOCKED),
        agent(4, LEG7, "retro", AgentStatus.ARCHIVED),
    ]
    rows = sidebar_rows(
        {MAIN, LEG7, Channel("zed", "main")}, agents, {LEG7: 3}, {}, archived_expanded=True
    )
    assert [row.key for row in rows] == [
        "c:app/main",
        "a:2",
        "c:app/legion/LEG-7",
        "a:3",
        "a:1",
        "c:zed/main",
        "archived",
        "ac:app/legion/LEG-7",
        "a:4",
    ]
    assert isinstance(rows[2], ChannelRow) and rows[2].unread == 3
    assert isinstance(rows[6], ArchivedHeader) and rows[6].count == 1
    assert isinstance(rows[7], ArchivedChannelRow)
    closed = sidebar_rows({MAIN}, agents, {}, {}, archived_expanded=False)
    assert closed[-1] == ArchivedHeader(1, False)


def test_each_status_has_its_glyph_and_counts_are_capped() -> None:
    texts = {
        status: row_text(AgentRow(agent(1, MAIN, "x", status), archived=False)).plain
        for status in AgentStatus
    }
    assert texts[AgentStatus.BUSY] == "  * @x"
    assert texts[AgentStatus.BLOCKED] == "  ? @x"
    assert texts[AgentStatus.COMPLETE] == "  o @x"
    assert texts[AgentStatus.FAILED] == "  x @x"
    assert texts[AgentStatus.IDLE] == "  - @x"
    assert row_text(ChannelRow(MAIN, 1500, 2)).plain == "app/main 999+ @2"
    assert row_text(ArchivedHeader(2, False)).plain == "> Archived (2)"


def test_channels_come_from_agents_and_messages_but_not_the_human() -> None:
    human = Agent(0, "", "", "human", AgentRole.HUMAN, "human", None, AgentStatus.IDLE, 0, "", "")
    found = channels_of([human, agent(1, LEG7, "implement")], [message("hi")])
    assert found == {LEG7, MAIN}


def test_a_message_shows_its_kind_in_words_and_marks_what_is_for_the_human() -> None:
    assert message_text(message("hello"), "12:00").plain == "12:00 @legion hello"
    assert message_text(message("ok?", MessageKind.ASK), "").plain == "@legion [ask] ok?"
    assert "[answer]" in message_text(message("yes", MessageKind.ANSWER), "").plain
    assert "[done]" in message_text(message("done", MessageKind.COMPLETE), "").plain
    assert "[system]" in message_text(message("restart", MessageKind.SYSTEM), "").plain
    marked = message_text(message("hi"), "", for_you=True)
    assert marked.plain.startswith("> ") and "reverse" in str(marked.spans[0].style)
    text = message_text(message("ask @human and @implement."), "")
    styled = {text.plain[s.start : s.end]: str(s.style) for s in text.spans}
    assert "reverse" in styled["@human"] and "magenta" in styled["@implement"]


def test_a_body_cannot_break_the_terminal() -> None:
    assert message_text(message("a\x1b[2Jb\u202e"), "").plain == "@legion a\\x1b[2Jb\\u202e"


def test_addresses_are_short_in_their_channel() -> None:
    assert short_address("app/legion/LEG-7/implement", LEG7) == "implement"
    assert short_address("app/main/legion", LEG7) == "main/legion"
    assert short_address("web/main/implement", LEG7) == "web/main/implement"
    assert short_address("human", LEG7) == "human"


def test_mentions_complete_from_the_channel_then_the_project() -> None:
    agents = [agent(1, MAIN, "legion"), agent(2, LEG7, "implement"), agent(3, LEG7, "review")]
    candidates = mention_candidates(LEG7, agents)
    assert candidates == ["legion", "implement", "review", "human"]
    assert mention_candidates(MAIN, agents) == [
        "legion",
        "human",
        "legion/LEG-7/implement",
        "legion/LEG-7/review",
    ]
    assert complete_mention("ask @imp", candidates) == "ask @implement "
    assert complete_mention("@R", candidates) == "@review "
    assert complete_mention("@review", candidates) is None  # already whole
    assert complete_mention("mail@imp", candidates) is None  # not a mention
    assert complete_mention("@imp now", candidates) is None  # not the last word
    assert complete_mention("@", candidates) == "@legion "
    assert complete_mention("@h", candidates) == "@human "


def test_read_marks_start_at_the_baseline_and_never_go_back(tmp_path: Path) -> None:
    path = tmp_path / "state" / "tui.json"
    marks = ReadMarks.load(path, 40)
    assert marks.last_seen(LEG7) == 40
    marks.mark(LEG7, 45)
    marks.mark(LEG7, 42)
    marks.save()
    assert json.loads(path.read_text()) == {"baseline": 40, "seen": {"app/legion/LEG-7": 45}}
    assert path.stat().st_mode & 0o777 == 0o600
    again = ReadMarks.load(path, 99)
    assert (again.last_seen(LEG7), again.last_seen(MAIN)) == (45, 40)
    path.write_text("{not json")
    assert ReadMarks.load(path, 7).last_seen(LEG7) == 7  # a broken file starts afresh


def test_a_transcript_tail_is_what_was_said_and_the_tools_used() -> None:
    lines = [
        json.dumps({"type": "user", "message": {"content": "Add the parser"}}),
        "not json",
        json.dumps({"type": "summary", "summary": "x"}),
        json.dumps(
            {
                "type": "assistant",
                "message": {
                    "content": [
                        {"type": "text", "text": "Writing\n the tests"},
                        {"type": "tool_use", "name": "Bash", "input": {}},
                    ]
                },
            }
        ),
    ]
    assert transcript_lines(lines, 10) == [
        "user: Add the parser",
        "assistant: Writing the tests",
        "assistant: (Bash)",
    ]
    assert transcript_lines(lines, 1) == ["assistant: (Bash)"]


def test_a_codex_rollout_tail_shows_what_was_said_and_run() -> None:
    def item(payload: dict[str, object]) -> str:
        return json.dumps({"timestamp": "t", "type": "response_item", "payload": payload})

    def message(role: str, text: str) -> str:
        kind = "input_text" if role != "assistant" else "output_text"
        return item({"type": "message", "role": role, "content": [{"type": kind, "text": text}]})

    lines = [
        json.dumps({"timestamp": "t", "type": "session_meta", "payload": {"id": "x"}}),
        message("developer", "<skills_instructions>…"),
        message("user", "<environment_context>\n  <cwd>/w</cwd>"),
        message("user", "$legion-worker plan mode for LEG-1"),
        message("user", "<skill>\n<name>legion-worker</name>"),
        item(
            {
                "type": "function_call",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": "ls\n -a"}),
            }
        ),
        item({"type": "function_call_output", "call_id": "c", "output": "..."}),
        message("assistant", "Plan\n posted."),
    ]
    assert transcript_lines(lines, 10) == [
        "user: $legion-worker plan mode for LEG-1",
        "assistant: (exec_command) ls -a",
        "assistant: Plan posted.",
    ]


def test_a_screen_drops_the_blank_rows_under_the_cursor() -> None:
    assert last_screen_lines("a\nb\nc\n\n   \n", 2) == "b\nc"


def test_the_board_groups_issues_under_their_phase() -> None:
    issues = [
        BoardIssue(Status.TODO, "LEG-8", "Flag", "-", "-"),
        BoardIssue(Status.IN_PROGRESS, "LEG-7", "Parser", "implement running", "-"),
        BoardIssue(Status.IN_PROGRESS, "LEG-10", "Lexer", "implement idle", "#4 draft"),
    ]
    assert board_text(issues).plain.splitlines() == [
        "Todo (1)",
        "  LEG-8   -                  -         Flag",
        "In Progress (2)",
        "  LEG-7   implement running  -         Parser",
        "  LEG-10  implement idle     #4 draft  Lexer",
    ]
    assert "No issues yet" in board_text([]).plain


def test_the_board_marks_its_highlighted_issue() -> None:
    issues = [
        BoardIssue(Status.TODO, "LEG-8", "Flag", "-", "-"),
        BoardIssue(Status.IN_PROGRESS, "LEG-7", "Parser", "implement running", "-"),
    ]
    text = board_text(issues, cursor=1)
    assert text.plain.splitlines() == [
        "Todo (1)",
        "  LEG-8  -                  -  Flag",
        "In Progress (1)",
        "> LEG-7  implement running  -  Parser",
    ]
    cursor_line = text.plain.index("> LEG-7")
    assert any("reverse" in str(span.style) and span.start <= cursor_line for span in text.spans)
    assert board_line_issues(issues) == [None, 0, None, 1]


def issue(
    status: Status,
    action: Action,
    mode: Mode | None,
    *,
    worker: str = "-",
    live: bool = False,
) -> BoardIssue:
    return BoardIssue(status, "LEG-7", "Parser", worker, "-", action, mode, live)


def test_d_on_the_board_means_the_suggested_mode_when_it_is_a_plain_start() -> None:
    cases = [
        (Status.BACKLOG, Action.DISPATCH_ARCHITECT, Mode.ARCHITECT),
        (Status.TODO, Action.DISPATCH_PLANNER, Mode.PLAN),
        (Status.IN_PROGRESS, Action.DISPATCH_IMPLEMENTER, Mode.IMPLEMENT),
        (Status.NEEDS_REVIEW, Action.DISPATCH_REVIEWER, Mode.REVIEW),
        (Status.RETRO, Action.RESUME_IMPLEMENTER_FOR_RETRO, Mode.RETRO),
    ]
    for status, action, mode in cases:
        assert dispatch_choice(issue(status, action, mode)) == DispatchChoice("LEG-7", mode)
    hint = dispatch_hint(issue(Status.TODO, Action.DISPATCH_PLANNER, Mode.PLAN))
    assert hint == "LEG-7: d dispatches plan"


def test_d_on_the_board_says_why_not_otherwise() -> None:
    live = issue(
        Status.IN_PROGRESS,
        Action.SKIP,
        None,
        worker="implement running",
        live=True,
    )
    assert (
        dispatch_choice(live) == "LEG-7 has a live worker (implement running): nothing to dispatch"
    )
    unknown = issue(Status.TODO, Action.DISPATCH_PLANNER, Mode.PLAN, worker="unknown")
    assert "unknown" in str(dispatch_choice(unknown))
    done = issue(Status.DONE, Action.SKIP, None)
    assert (
        dispatch_choice(done) == "nothing to dispatch for LEG-7 in Done now (the table says skip)"
    )
    # More than a start: left to the daemon, which clears labels or moves the issue first.
    for action, mode in (
        (Action.TRANSITION_TO_TODO, Mode.PLAN),
        (Action.DISPATCH_FINISHER, Mode.FINISH),
        (Action.RESUME_IMPLEMENTER_FOR_CHANGES, Mode.IMPLEMENT),
        (Action.REMOVE_WORKER_ACTIVE_AND_REDISPATCH, Mode.IMPLEMENT),
        (Action.RELAY_USER_FEEDBACK, Mode.IMPLEMENT),
    ):
        said = dispatch_choice(issue(Status.IN_PROGRESS, action, mode))
        assert isinstance(said, str) and "\n" not in said
        assert Decision(action, mode).words in said and action.value not in said  # in words


def test_the_inbox_merges_bus_and_tracker_questions_oldest_first() -> None:
    early = replace(message("UTC?"), created_at="2025-01-01T12:00:00.000Z")
    late = replace(early, id="m2", created_at="2025-01-01T12:00:05.000Z")
    between = TrackerAsk(
        "app", "LEG-7", "Parser", "## Question\nWhich grammar?", "2025-01-01T12:00:02Z"
    )
    unknown = TrackerAsk("web", "WEB-1", "CSS", "Which?", "")
    assert inbox_order([early, late], [between, unknown]) == [unknown, early, between, late]
    assert question_text(between.question) == "Which grammar?"
    assert question_text("Which grammar?") == "Which grammar?"
    assert one_line("refused:\n  because") == "refused: because"


def test_a_long_message_hangs_under_its_sender() -> None:
    console = Console(width=200, file=io.StringIO())
    text = message_text(
        message("one two three four five six seven eight nine ten\nsecond paragraph"), "12:00"
    )
    indent = message_indent("12:00")
    assert indent == 6 and message_indent("", for_you=True) == 2 and message_indent("") == 2
    lines = hanging_lines(text, 30, indent, console).plain.split("\n")
    assert lines == [
        "12:00 @legion one two three",
        "      four five six seven",
        "      eight nine ten",
        "      second paragraph",
    ]
    # Styles survive the cut: the sender stays bold.
    styled = hanging_lines(text, 30, indent, console)
    assert any(span.style == "bold" for span in styled.spans)
    # A line that fits is left alone; an indent wider than half the width is halved.
    assert hanging_lines(Text("short"), 30, 6, console).plain == "short"
    narrow = hanging_lines(Text("aaaa bbbb cccc dddd"), 8, 20, console).plain.split("\n")
    assert narrow[0] == "aaaa" and all(line.startswith("    ") for line in narrow[1:])


def test_markdown_is_rendered_and_still_escaped() -> None:
    line = markdown_line("## Use **UTC** or `local`? See [docs](https://x.test) <b>x</b>")
    assert line.plain == "Use UTC or local? See docs (https://x.test) <b>x</b>"
    styled = {line.plain[s.start : s.end]: str(s.style) for s in line.spans}
    assert styled["UTC"] == "bold" and "bold" in styled["local"]
    assert markdown_line("a\x1b[2Jb").plain == "a\\x1b[2Jb"
    console = Console(width=60, file=io.StringIO(), force_terminal=False)
    console.print(question_markdown("Which?\n\n- one\n- *two*\n\n<div>hidden?</div>\x1b]0;t\x07"))
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "• one" in shown and "• two" in shown and "*" not in shown
    assert "<div>hidden?</div>\\x1b]0;t\\x07" in shown and "\x1b" not in shown


def test_log_lines_are_ordered_by_time_whatever_the_precision() -> None:
    from legion.tui.present_peek import by_time

    stamps = [
        "2026-11-26T10:00:01Z",
        "2026-11-26T10:00:00.500Z",
        "not a time",
        "2026-11-26T09:59:59Z",
    ]
    assert by_time(stamps, key=lambda s: s) == [
        "not a time",
        "2026-11-26T09:59:59Z",
        "2026-11-26T10:00:00.500Z",
        "2026-11-26T10:00:01Z",
    ]


def test_a_task_list_in_a_line() -> None:
    from legion.core.task_list import TaskList
    from legion.tui.present_peek import task_line

    assert task_line(TaskList(2, 5, "Writing the parser")) == "Tasks 2/5, now: Writing the parser"
    assert task_line(TaskList(5, 5, None)) == "Tasks 5/5"


def test_event_kinds_have_the_short_names_people_type() -> None:
    from legion.bus.model import EventKind

    assert [kind.short_name for kind in EventKind] == [
        "message", "registered", "blocked", "completed", "failed", "archived", "stopped",
        "compaction",
    ]  # fmt: skip


def test_the_board_says_which_host_runs_each_worker_in_a_fleet() -> None:
    from legion.tui.sources import worker_text

    assert worker_text("implement", "running", "build-1", None) == "implement running"
    assert worker_text("implement", "running", "", "build-1") == "implement running"
    assert worker_text("plan", "idle", "build-1", "build-1") == "plan idle on build-1"
    # Another host's, as that host last reported it (dead once that host is lost).
    assert worker_text("plan", "running", "build-2", "build-1") == "plan running on build-2"
    assert worker_text("plan", "dead", "build-2", "build-1") == "plan dead on build-2"


def test_the_board_marks_a_worker_that_cannot_reach_the_model() -> None:
    from legion.tui.sources import state_text, worker_text

    assert worker_text("implement", "idle", "", None, unreachable=True) == (
        "implement idle, cannot reach the model"
    )
    assert worker_text("plan", "idle", "b-2", "b-1", unreachable=True) == (
        "plan idle on b-2, cannot reach the model"
    )
    assert state_text("running", False) == "running"  # the peek's state line, unmarked


def test_the_pr_cell_says_merged_and_closed() -> None:
    from legion.forges.base import PrState, PullRequest
    from legion.tui.sources import review_text

    pr = PullRequest(3, "LEG-1", "t", "", "b", "main", PrState.OPEN, is_draft=False)
    assert review_text(pr, "approved") == "#3 approved"
    assert review_text(replace(pr, is_draft=True), "none") == "#3 draft"
    assert review_text(replace(pr, state=PrState.MERGED), "approved") == "#3 merged"
    assert review_text(None, "none", replace(pr, state=PrState.CLOSED)) == "#3 closed"
    assert review_text(None, "unknown") == "unknown"
    assert review_text(None, "none") == "-"


def test_log_columns_fit_by_cutting_all_but_the_kept_ones() -> None:
    from legion.tui.present import fit_columns

    assert fit_columns([8, 30, 35, 8, 60], 200, keep=(0, 3)) == [8, 30, 35, 8, 60]
    fitted = fit_columns([8, 30, 35, 8, 60], 70, keep=(0, 3), minimum=8)
    assert sum(fitted) == 70 and fitted[0] == 8 and fitted[3] == 8
    assert min(fitted[1], fitted[2], fitted[4]) >= 8
    # No room at all: the kept columns stay whole, the rest at their minimum.
    assert fit_columns([8, 30, 35, 8, 60], 10, keep=(0, 3), minimum=8) == [8, 8, 8, 8, 8]
