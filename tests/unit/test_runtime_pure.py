"""The pure parts of the worker runtime: Claude Code's paths, transcript reading, worker state."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legion.core.liveness import SessionState
from legion.errors import TmuxUnavailable
from legion.runtime.claude.paths import (
    base36,
    config_dir,
    encode_project_dir,
    java_string_hash,
    newest_activity,
    transcript_path,
)
from legion.runtime.claude.transcript import summarize
from legion.runtime.tmux import Tmux, Window, literal, process_alive, process_args
from legion.runtime.transcript import Turn, prompt_fingerprint, read_tail, records_prompt
from legion.sessions.observer import classify
from legion.sessions.start_watch import start_failure


def test_java_string_hash_matches_known_values() -> None:
    # Values of Java's "…".hashCode()
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Hello, World!") == 1498789909
    assert java_string_hash("polygenelubricants") == -2147483648
    assert java_string_hash("😀") == 1772899  # two UTF-16 code units: 0xD83D, 0xDE00


def test_base36() -> None:
    assert base36(0) == "0"
    assert base36(35) == "z"
    assert base36(36) == "10"
    assert base36(2147483648) == "zik0zk"


def test_encoding_of_short_and_long_paths() -> None:
    assert encode_project_dir("/home/sami/legion/default") == "-home-sami-legion-default"
    assert encode_project_dir("/home/sami/.dotfiles") == "-home-sami--dotfiles"
    assert encode_project_dir("/tmp/a b/ünï") == "-tmp-a-b--n-"
    long = "/" + "x" * 250
    encoded = encode_project_dir(long)
    assert encoded.startswith("-" + "x" * 199 + "-")
    assert encoded == "-" + "x" * 199 + "-" + base36(abs(java_string_hash(long)))


@given(st.text(min_size=1, max_size=400))
def test_encoded_names_are_safe_folder_names(path: str) -> None:
    encoded = encode_project_dir(path)
    assert "/" not in encoded and encoded.isascii()
    assert len(encoded) <= 200 + 1 + 7


def test_config_locations() -> None:
    assert config_dir({"HOME": "/h"}) == Path("/h/.claude")
    assert config_dir({"HOME": "/h", "CLAUDE_CONFIG_DIR": "/c"}) == Path("/c")


def test_transcript_path_resolves_symlinks(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    path = transcript_path(tmp_path / "cfg", link, "abc")
    assert (
        path
        == tmp_path / "cfg" / "projects" / encode_project_dir(str(real.resolve())) / "abc.jsonl"
    )


def test_newest_activity_counts_subagents(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    assert newest_activity(transcript) is None
    transcript.write_text("{}\n")
    os.utime(transcript, (1000, 1000))
    assert newest_activity(transcript) == 1000
    subagents = tmp_path / "s" / "subagents"
    subagents.mkdir(parents=True)
    (subagents / "agent-1.jsonl").write_text("{}\n")
    os.utime(subagents / "agent-1.jsonl", (2000, 2000))
    (subagents / "notes.txt").write_text("x")
    os.utime(subagents / "notes.txt", (3000, 3000))
    assert newest_activity(transcript) == 2000


def line(kind: str, **fields: object) -> str:
    return json.dumps({"type": kind, **fields})


def assistant(*blocks: dict[str, object], stop: str | None = None) -> str:
    return line(
        "assistant", message={"role": "assistant", "content": list(blocks), "stop_reason": stop}
    )


def user(content: object) -> str:
    return line("user", message={"role": "user", "content": content})


QUESTION = {
    "type": "tool_use",
    "id": "toolu_q",
    "name": "AskUserQuestion",
    "input": {
        "questions": [
            {
                "question": "Which fruit?",
                "header": "Fruit",
                "options": [{"label": "Apple", "description": "red"}, {"label": "Pear"}],
                "multiSelect": False,
            }
        ]
    },
}


def test_summary_of_a_pending_question() -> None:
    summary = summarize(
        [
            user("go"),
            assistant({"type": "text", "text": "hm"}),
            assistant(QUESTION, stop="tool_use"),
        ]
    )
    assert summary.pending_question is not None
    assert summary.pending_question.text == "Which fruit?"
    assert summary.pending_question.items[0].options == ("Apple", "Pear")
    assert classify(True, summary) is SessionState.BLOCKED


def test_an_answered_question_is_not_pending() -> None:
    answer = user([{"type": "tool_result", "tool_use_id": "toolu_q", "content": "Apple"}])
    summary = summarize(
        [
            user("go"),
            assistant(QUESTION),
            answer,
            assistant({"type": "text", "text": "ok"}, stop="end_turn"),
        ]
    )
    assert summary.pending_question is None
    assert summary.turn is Turn.ENDED
    assert classify(True, summary) is SessionState.IDLE


def test_a_later_tool_use_supersedes_an_unanswered_question() -> None:
    other = {"type": "tool_use", "id": "toolu_b", "name": "Bash", "input": {"command": "ls"}}
    summary = summarize([assistant(QUESTION), assistant(other)])
    assert summary.pending_question is None
    assert classify(True, summary) is SessionState.RUNNING


def test_turn_states() -> None:
    assert summarize([]).turn is Turn.NONE
    assert summarize([user("go")]).turn is Turn.OPEN
    ended = [
        user("go"),
        assistant({"type": "text", "text": "x"}),
        line("system", subtype="turn_duration"),
    ]
    assert summarize(ended).turn is Turn.ENDED
    assert summarize([*ended, user("again")]).turn is Turn.OPEN


def test_tolerant_of_garbage_unknown_types_and_a_torn_last_line() -> None:
    lines = [
        "not json at all",
        "[1, 2, 3]",
        line("file-history-snapshot", snapshot={}),
        line("some-future-type", data=1),
        line("assistant", message="not a dict"),
        user("go"),
        assistant(QUESTION),
        '{"type": "user", "message": {"content": [{"type": "tool_res',  # torn mid-write
    ]
    summary = summarize(lines)
    assert summary.pending_question is not None
    assert summary.entries == 3


def test_read_tail_drops_the_cut_first_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(f'{{"n": {n}}}\n' for n in range(1000)))
    tail = read_tail(path, max_bytes=100)
    assert tail[-1] == '{"n": 999}'
    assert all(entry.startswith('{"n": ') for entry in tail)
    assert read_tail(tmp_path / "missing.jsonl") == []


def test_a_prompt_counts_as_taken_only_once_a_line_records_it(tmp_path: Path) -> None:
    typed = "/legion-controller wake: needs judgment: LEG-2:triage (auto mode: handle\n  it)"
    fingerprint = prompt_fingerprint(typed)
    path = tmp_path / "t.jsonl"
    # The last turn's tail, written after the prompt was typed: growth, but not the prompt.
    path.write_text(json.dumps({"type": "assistant", "message": {"content": "Done."}}) + "\n")
    tail = {"type": "system", "subtype": "turn_duration", "durationMs": 3000}
    with path.open("a") as out:
        out.write(json.dumps(tail) + "\n")
    assert not records_prompt(path, 0, fingerprint)
    mark = path.stat().st_size
    # Claude Code records a slash command's arguments apart from its name, reflowed.
    args = "wake: needs judgment: LEG-2:triage (auto mode: handle it)"
    user = {"type": "user", "message": {"content": [{"type": "text", "text": args}]}}
    line = json.dumps(user)
    with path.open("a") as out:
        out.write(line[:20])  # still being written: not yet
    assert not records_prompt(path, mark, fingerprint)
    with path.open("a") as out:
        out.write(line[20:] + "\n")
    assert records_prompt(path, mark, fingerprint)
    assert not records_prompt(path, path.stat().st_size, fingerprint)  # only past the mark
    assert not records_prompt(tmp_path / "none.jsonl", 0, fingerprint)


def test_a_transcript_without_a_conversation_is_set_aside_not_resumed(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from legion.runtime.claude.transcript import summarize_file
    from legion.sessions.supervisor import _resumable

    runtime = SimpleNamespace(summarize=summarize_file)
    path = tmp_path / "sid.jsonl"
    assert not _resumable(runtime, path)  # type: ignore[arg-type]  # none: a new session
    # What a CLI writes before its first prompt: no conversation to resume.
    path.write_text('{"type":"mode","mode":"normal"}\n{"type":"permission-mode"}\n')
    assert not _resumable(runtime, path)  # type: ignore[arg-type]
    assert not path.exists() and (tmp_path / "sid.jsonl.no-conversation").exists()
    path.write_text('{"type":"user","message":{"role":"user","content":"go"}}\n')
    assert _resumable(runtime, path)  # type: ignore[arg-type]
    assert path.exists()


def test_classify_dead_and_starting() -> None:
    assert classify(False, None) is SessionState.DEAD
    assert classify(True, None) is SessionState.RUNNING


TRUST_SCREEN = """ Accessing workspace:
 /tmp/exp6nf8gjlz/workspace
 Quick safety check: Is this a project you created or one you trust? (Like your own code,
 folder first.
 Claude Code'll be able to read, edit, and execute files here.
 Security guide
 \u276f No, exit
   Yes, I trust this folder
 Enter to confirm · Esc to cancel
"""

KEY_SCREEN = """  Detected a custom API key in your environment
  ANTHROPIC_API_KEY: sk-ant-...ret-0123456789abcdef
  Do you want to use this API key?
    Yes
  \u276f No (recommended)
  Enter to confirm · Esc to cancel
"""

BYPASS_SCREEN = """  WARNING: Claude Code running in Bypass Permissions mode
  In Bypass Permissions mode, Claude Code will not ask for your approval before running
  \u276f No, exit
    Yes, I accept
  Enter to confirm · Esc to cancel
"""


def test_first_run_dialogs_are_answered_yes() -> None:
    from legion.runtime.claude.runtime import first_run_dialog_keys

    assert first_run_dialog_keys(TRUST_SCREEN) == ("Yes, I trust this folder", ["Down", "Enter"])
    assert first_run_dialog_keys(KEY_SCREEN) == ("Yes", ["Up", "Enter"])
    assert first_run_dialog_keys(BYPASS_SCREEN) == ("Yes, I accept", ["Down", "Enter"])
    moved = TRUST_SCREEN.replace("\u276f No, exit", "  No, exit").replace(
        "   Yes, I", " \u276f Yes, I"
    )
    assert first_run_dialog_keys(moved) == ("Yes, I trust this folder", ["Enter"])
    assert first_run_dialog_keys("\u276f /legion-worker plan mode for LEG-1\n● working") is None


# -- tmux answers: definite "nothing there" versus unknown -----------------------------------------


def _answer(returncode: int, stdout: str = "", stderr: str = "") -> Any:
    import subprocess

    return subprocess.CompletedProcess(["tmux"], returncode, stdout, stderr)


@pytest.mark.parametrize(
    "stderr",
    [
        "no server running on /tmp/lgt-x/sock",
        "error connecting to /tmp/lgt-x/sock (No such file or directory)",
        "can't find session: legion-1234",
        "session not found: legion-1234",
    ],
)
def test_tmux_saying_there_is_nothing_means_no_windows(
    stderr: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Tmux, "_list", lambda self, session: _answer(1, stderr=stderr))
    assert Tmux().list_windows("legion-1234") == []
    assert Tmux().find_window("legion-1234", "main") is None


@pytest.mark.parametrize(
    "stderr",
    ["lost server", "server exited unexpectedly", "", "error connecting to /s (Permission denied)"],
)
def test_any_other_tmux_failure_is_unknown(stderr: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Tmux, "_list", lambda self, session: _answer(1, stderr=stderr))
    with pytest.raises(TmuxUnavailable):
        Tmux().list_windows("legion-1234")
    with pytest.raises(TmuxUnavailable):
        Tmux().find_window("legion-1234", "main")


def test_a_server_going_is_asked_again_until_it_says_it_has_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `legion stop --all` closes the last session, then looks at what runs (and marks the
    # agents stopped): asked as the server exits, tmux says "server exited unexpectedly".
    answers = [_answer(1, stderr="server exited unexpectedly"), _answer(1, stderr="lost server")]
    answers.append(_answer(1, stderr="no server running on /tmp/lgt-x/sock"))
    monkeypatch.setattr(Tmux, "run", lambda self, *args, check=True: answers.pop(0))
    assert Tmux().list_windows("legion-1234") == []
    assert answers == []


def test_a_server_that_stopped_answering_is_asked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Not going: lost from the first answer, so the look reports unknown at once (a daemon's
    # tick looks several times, and must not wait a second on each).
    asked: list[tuple[str, ...]] = []

    def run(self: Tmux, *args: str, check: bool = True) -> Any:
        asked.append(args)
        return _answer(1, stderr="lost server")

    monkeypatch.setattr(Tmux, "run", run)
    with pytest.raises(TmuxUnavailable):
        Tmux().list_windows("legion-1234")
    assert len(asked) == 1


def test_windows_are_parsed_with_their_tag(monkeypatch: pytest.MonkeyPatch) -> None:
    out = "@1\tlegion\t0\t101\tpython3\t\n@2\tleg-1-plan\t1\t102\tclaude\tsid-1\n@3\told\t0\t\tsh\n"
    monkeypatch.setattr(Tmux, "_list", lambda self, session: _answer(0, stdout=out))
    assert Tmux().list_windows("s") == [
        Window("@1", "legion", False, 101, "python3", ""),
        Window("@2", "leg-1-plan", True, 102, "claude", "sid-1"),
        Window("@3", "old", False, None, "sh", ""),
    ]


def test_literal_escapes_only_a_final_semicolon() -> None:
    assert literal("echo hi;") == "echo hi\\;"
    assert literal("a\\;") == "a\\\\;"
    assert literal(";") == "\\;"
    assert literal("a;b") == "a;b"
    assert literal("") == ""


def test_start_failure_names_the_last_words_and_the_exit() -> None:
    screen = "\n\nclaude: fatal: bad flag\n\nPane is dead (status 3, Mon Nov 23 04:18:00 2026)\n"
    assert start_failure(screen) == (
        "the worker exited as it started (exit status 3): claude: fatal: bad flag"
    )
    assert start_failure("Pane is dead (signal 9, Mon)\n") == (
        "the worker exited as it started (signal 9): (no output)"
    )
    assert start_failure("") == "the worker exited as it started: (no output)"


def test_a_reaped_process_is_not_alive() -> None:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not process_alive(child.pid)
    assert process_args(child.pid) is None
    assert process_alive(os.getpid())
    assert "python" in (process_args(os.getpid()) or "")


# -- the one --settings of a session -------------------------------------------------------------


def _settings_of(argv: list[str]) -> dict[str, Any]:
    assert argv.count("--settings") == 1, argv
    parsed = json.loads(argv[argv.index("--settings") + 1])
    assert isinstance(parsed, dict)
    return parsed


@pytest.fixture
def fixed_claude(monkeypatch: pytest.MonkeyPatch) -> None:
    from legion.runtime.claude.runtime import ClaudeRuntime

    monkeypatch.setattr(ClaudeRuntime, "executable", lambda self: "/bin/claude")


@pytest.mark.usefixtures("fixed_claude")
@pytest.mark.parametrize("mode", ["bypass", "default", "acceptEdits"])
def test_every_permission_mode_passes_the_hooks_in_one_settings_flag(
    mode: str, tmp_path: Path
) -> None:
    from legion.runtime.claude.runtime import ClaudeRuntime
    from legion.runtime.claude.runtime import hook_settings as legion_hooks

    inbox, context = tmp_path / "in.json", tmp_path / "c.md"
    hook_settings = legion_hooks(inbox, context)
    argv = ClaudeRuntime(permission_mode=mode).command(
        "sid", "go", resume=False, inbox=inbox, context=context
    )
    settings = _settings_of(argv)
    assert settings["hooks"] == hook_settings["hooks"]
    assert settings.get("skipDangerousModePermissionPrompt") is (True if mode == "bypass" else None)
    assert argv[-2:] == ["--", "go"]


@pytest.mark.usefixtures("fixed_claude")
def test_a_settings_flag_in_claude_args_is_merged_not_left_to_replace_legions(
    tmp_path: Path,
) -> None:
    from legion.runtime.claude.runtime import ClaudeRuntime
    from legion.runtime.claude.runtime import hook_settings as legion_hooks

    user_hook = {"hooks": [{"type": "command", "command": "echo mine"}]}
    user_file = tmp_path / "mine.json"
    user_file.write_text(json.dumps({"model": "x", "hooks": {"Stop": [user_hook]}}))
    runtime = ClaudeRuntime(
        extra_args=("--verbose", "--settings", str(user_file), '--settings={"theme": "dark"}')
    )
    hook_settings = legion_hooks(tmp_path / "in.json", None)
    argv = runtime.command("sid", "", resume=True, inbox=tmp_path / "in.json")
    settings = _settings_of(argv)
    assert settings["model"] == "x" and settings["theme"] == "dark"
    assert settings["skipDangerousModePermissionPrompt"] is True
    assert settings["hooks"]["Stop"] == [user_hook, *hook_settings["hooks"]["Stop"]]
    assert "--verbose" in argv and not any(a.startswith("--settings=") for a in argv)


def test_a_session_never_updates_the_pinned_cli() -> None:
    from legion.runtime.claude.runtime import ClaudeRuntime

    # The variable the pinned CLI reads (not `autoUpdates: false` in its config, which it would
    # move into settings.json, Legion's and read-only in the session's home).
    assert ClaudeRuntime().environment({})["DISABLE_AUTOUPDATER"] == "1"


@pytest.mark.usefixtures("fixed_claude")
@pytest.mark.parametrize("given", [("--settings",), ("--settings", "[1]"), ("--settings=/nope",)])
def test_an_unusable_settings_flag_in_claude_args_is_a_config_error(
    given: tuple[str, ...],
) -> None:
    from legion.errors import ConfigError
    from legion.runtime.claude.runtime import ClaudeRuntime

    with pytest.raises(ConfigError, match="claude_args"):
        ClaudeRuntime(extra_args=given).command("sid", "go", resume=False)


def not_logged_in(text: str = "Not logged in · Please run /login", **fields: object) -> str:
    """The entry the pinned CLI writes when it cannot reach the model (seen with 2.1.328)."""
    return line(
        "assistant",
        message={
            "role": "assistant",
            "model": "<synthetic>",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "stop_sequence",
        },
        isApiErrorMessage=True,
        **fields,
    )


def test_a_cli_that_cannot_reach_the_model_says_so_in_its_summary() -> None:
    said = summarize([user("plan"), not_logged_in(error="authentication_failed")])
    assert said.unreachable == "Not logged in · Please run /login"
    assert summarize([user("x"), not_logged_in("Invalid API key · Please run /login")]).unreachable
    # Another API error (the CLI retries those, or a person resends) is not this.
    overloaded = not_logged_in("API Error: 529 overloaded", error="overloaded")
    assert summarize([user("x"), overloaded]).unreachable is None
    # Fixed and resent: the session goes on.
    again = [user("plan"), not_logged_in(), user("plan"), assistant({"type": "text", "text": "ok"})]
    assert summarize(again).unreachable is None
