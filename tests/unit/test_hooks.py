"""Legion's Claude Code hooks: the settings that install them, their answers, the inbox file
and the entry point the CLI runs (the real CLI is in tests/e2e/test_claude_hooks.py)."""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legion.bus import inbox as inbox_file
from legion.bus.inbox import Inbox, InboxMessage
from legion.runtime.claude import hook_entry, hooks
from legion.runtime.claude.hooks import HookEvent

PY = "/opt/py thon's/bin/python3"


def command_argv(settings: dict[str, Any], event: str) -> list[str]:
    [entry] = settings["hooks"][event]
    [hook] = entry["hooks"]
    assert hook["type"] == "command"
    return shlex.split(hook["command"])


# --------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------


def test_settings_install_stop_prompt_and_session_start_hooks() -> None:
    inbox = Path("/state/a b/in'box.json")
    context = Path("/state/a b/$HOME `x`.md")
    settings = hooks.hooks_settings(python=PY, inbox=inbox, context=context)

    assert set(settings) == {"hooks"}
    assert list(settings["hooks"]) == ["Stop", "UserPromptSubmit", "SessionStart"]
    for event in ("Stop", "UserPromptSubmit", "SessionStart"):
        assert command_argv(settings, event) == [
            PY,
            "-P",
            "-m",
            "legion.runtime.claude.hook_entry",
            event,
            "--inbox",
            str(inbox),
            "--context",
            str(context),
        ]
        [entry] = settings["hooks"][event]
        assert entry["hooks"][0]["timeout"] == hooks.HOOK_TIMEOUT_S
    # Only SessionStart has a matcher: the sources Legion answers.
    assert settings["hooks"]["SessionStart"][0]["matcher"] == "resume|compact"
    assert "matcher" not in settings["hooks"]["Stop"][0]
    assert "matcher" not in settings["hooks"]["UserPromptSubmit"][0]
    json.dumps(settings)  # what goes to --settings


def test_settings_default_to_this_python_and_the_environment_paths() -> None:
    settings = hooks.hooks_settings(events=[HookEvent.STOP, "PreCompact"])
    assert list(settings["hooks"]) == ["Stop", "PreCompact"]
    assert command_argv(settings, "Stop") == [
        sys.executable,
        "-P",
        "-m",
        "legion.runtime.claude.hook_entry",
        "Stop",
    ]
    assert hooks.hooks_settings(session_start_sources=())["hooks"].keys() == {
        "Stop",
        "UserPromptSubmit",
    }
    with pytest.raises(ValueError):
        hooks.hooks_settings(events=["NoSuchEvent"])


def test_merge_settings_concatenates_hooks_and_changes_neither_argument() -> None:
    base = {
        "skipDangerousModePermissionPrompt": True,
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "mine"}]}]},
    }
    extra = hooks.hooks_settings(python=PY)
    before = json.dumps(base), json.dumps(extra)

    merged = hooks.merge_settings(base, extra)

    assert merged["skipDangerousModePermissionPrompt"] is True
    assert [e["hooks"][0]["command"] for e in merged["hooks"]["Stop"]] == [
        "mine",
        extra["hooks"]["Stop"][0]["hooks"][0]["command"],
    ]
    assert merged["hooks"]["SessionStart"] == extra["hooks"]["SessionStart"]
    assert (json.dumps(base), json.dumps(extra)) == before
    assert hooks.merge_settings({"a": 1}, extra) == {"a": 1, **extra}


# --------------------------------------------------------------------------------------------
# The inbox format
# --------------------------------------------------------------------------------------------


def test_inbox_round_trips_and_keeps_keys_it_does_not_know() -> None:
    inbox = Inbox(
        messages=(InboxMessage("m-1", "héllo\nthere"),),
        delivered=({"id": "m-0", "via": "Stop", "at": 1.0, "session_id": "s"},),
        stop_prompt="p",
        stop_streak=2,
        extra={"version": 1},
    )
    assert inbox_file.parse_inbox(inbox_file.dump_inbox(inbox)) == inbox
    assert inbox_file.parse_inbox("") == Inbox()
    assert inbox_file.parse_inbox('{"messages": [{"id": "x", "text": "t"}]}').messages == (
        InboxMessage("x", "t"),
    )


@pytest.mark.parametrize("text", ["{", "[]", '{"messages": [{"id": "x"}]}', '{"messages": ["t"]}'])
def test_a_malformed_inbox_is_an_error(text: str) -> None:
    with pytest.raises(inbox_file.InboxError):
        inbox_file.parse_inbox(text)


def test_a_message_id_is_queued_once() -> None:
    inbox = inbox_file.with_message(Inbox(), "m-1", "one")
    assert inbox is not None
    assert inbox_file.with_message(inbox, "m-1", "again") is None
    delivered = Inbox(delivered=({"id": "m-1"},))
    assert inbox_file.with_message(delivered, "m-1", "again") is None


# --------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------

TWO = Inbox(messages=(InboxMessage("a", "first"), InboxMessage("b", "second\nline")))


def stop_input(active: bool, prompt: str = "p-1") -> dict[str, Any]:
    return {
        "hook_event_name": "Stop",
        "session_id": "s-1",
        "prompt_id": prompt,
        "stop_hook_active": active,
    }


def test_stop_blocks_with_every_queued_message_and_empties_the_inbox() -> None:
    answer, after = hooks.answer_stop(stop_input(False), TWO, cap=8, now=5.0)

    assert answer == {"decision": "block", "reason": "first\n\nsecond\nline"}
    assert after is not None and after.messages == ()
    assert after.delivered == (
        {"id": "a", "via": "Stop", "at": 5.0, "session_id": "s-1"},
        {"id": "b", "via": "Stop", "at": 5.0, "session_id": "s-1"},
    )


def test_stop_with_nothing_queued_lets_the_session_stop() -> None:
    assert hooks.answer_stop(stop_input(False), Inbox(), cap=8, now=0) == (None, None)
    # After a block (by any hook) the streak is kept, even with nothing to say.
    answer, after = hooks.answer_stop(stop_input(True), Inbox(), cap=8, now=0)
    assert answer is None and after is not None and after.stop_streak == 1


def test_stop_leaves_messages_queued_once_the_cli_would_override_the_block() -> None:
    inbox = TWO
    blocks = 0
    for call in range(5):  # the first Stop of the turn, then one after each block
        answer, after = hooks.answer_stop(stop_input(call > 0), inbox, cap=3, now=0)
        if answer is not None:
            blocks += 1
            assert after is not None
            inbox = replace_messages(after, TWO.messages)  # more arrived meanwhile
        elif after is not None:
            inbox = after
    assert blocks == 3
    assert inbox.messages == TWO.messages  # still queued, for the idle wake-up
    # A new turn starts the count again.
    answer, _ = hooks.answer_stop(stop_input(False, "p-2"), inbox, cap=3, now=0)
    assert answer is not None


def replace_messages(inbox: Inbox, messages: tuple[InboxMessage, ...]) -> Inbox:
    return Inbox(messages, inbox.delivered, inbox.stop_prompt, inbox.stop_streak, inbox.extra)


def test_stop_after_another_turns_block_counts_one() -> None:
    inbox = Inbox(messages=TWO.messages, stop_prompt="old", stop_streak=7)
    answer, after = hooks.answer_stop(stop_input(True, "new"), inbox, cap=2, now=0)
    assert answer is not None and after is not None and after.stop_streak == 1


def test_stop_block_cap_comes_from_the_cli_variable() -> None:
    assert hooks.stop_block_cap({}) == 8
    assert hooks.stop_block_cap({"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "3"}) == 3
    assert hooks.stop_block_cap({"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "x"}) == 8
    assert hooks.stop_block_cap({"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "0"}) == 8


def test_user_prompt_gets_the_queued_messages_as_context() -> None:
    answer, after = hooks.answer_user_prompt({"session_id": "s"}, TWO, now=1.0)
    assert answer == {
        "hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit",
            "additionalContext": "first\n\nsecond\nline",
        }
    }
    assert after is not None and after.messages == ()
    assert [d["via"] for d in after.delivered] == ["UserPromptSubmit"] * 2
    assert hooks.answer_user_prompt({}, Inbox(), now=1.0) == (None, None)


@pytest.mark.parametrize(
    ("source", "context", "expected"),
    [
        ("resume", "## Plan\nstep 3", "## Plan\nstep 3"),
        ("compact", "ctx", "ctx"),
        ("startup", "ctx", None),
        ("clear", "ctx", None),
        ("resume", None, None),
        ("resume", " \n", None),
    ],
)
def test_session_start_context(source: str, context: str | None, expected: str | None) -> None:
    answer = hooks.answer_session_start({"source": source}, context)
    if expected is None:
        assert answer is None
    else:
        assert answer == {
            "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": expected}
        }


@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("enqueue"), st.integers(0, 6)),
            st.tuples(st.just("stop"), st.booleans()),
            st.tuples(st.just("prompt"), st.just(False)),
        ),
        max_size=30,
    )
)
def test_every_message_reaches_the_model_exactly_once_or_stays_queued(
    steps: list[tuple[str, Any]],
) -> None:
    inbox = Inbox()
    shown: list[str] = []
    for kind, value in steps:
        if kind == "enqueue":
            inbox = inbox_file.with_message(inbox, f"m-{value}", f"text {value}") or inbox
            continue
        if kind == "stop":
            answer, after = hooks.answer_stop(stop_input(value), inbox, cap=2, now=0)
            if answer is not None:
                shown += answer["reason"].split("\n\n")
        else:
            answer, after = hooks.answer_user_prompt({}, inbox, now=0)
            if answer is not None:
                shown += answer["hookSpecificOutput"]["additionalContext"].split("\n\n")
        inbox = after or inbox
    queued = [m.text for m in inbox.messages]
    enqueued = {f"text {v}" for k, v in steps if k == "enqueue"}
    assert sorted(shown + queued) == sorted(enqueued)
    assert sorted(d["id"] for d in inbox.delivered) == sorted(
        "m-" + t.removeprefix("text ") for t in shown
    )


# --------------------------------------------------------------------------------------------
# The inbox file
# --------------------------------------------------------------------------------------------


def test_enqueue_and_take_delivered_under_the_lock(tmp_path: Path) -> None:
    inbox = tmp_path / "state" / "inbox.json"
    threads = [
        threading.Thread(target=inbox_file.enqueue, args=(inbox, f"m-{i}", f"text {i}"))
        for i in range(20)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert inbox_file.enqueue(inbox, "m-3", "again") is False
    queued = inbox_file.parse_inbox(inbox.read_text(encoding="utf-8"))
    assert sorted(m.id for m in queued.messages) == sorted(f"m-{i}" for i in range(20))
    assert inbox.stat().st_mode & 0o777 == 0o600
    assert inbox_file.take_delivered(inbox) == []


def test_take_queued_hands_messages_to_another_path_once(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox.json"
    assert inbox_file.take_queued(inbox, "typed") == []
    assert not inbox.exists()
    inbox_file.enqueue(inbox, "m-1", "one")
    inbox_file.enqueue(inbox, "m-2", "two")

    assert inbox_file.take_queued(inbox, "typed", "s-1") == [
        InboxMessage("m-1", "one"),
        InboxMessage("m-2", "two"),
    ]
    assert inbox_file.take_queued(inbox, "typed") == []
    # The hooks have nothing left to hand over.
    assert run_entry(["Stop", "--inbox", str(inbox)], stop_input(False)) == (0, "", "")
    assert [(d["id"], d["via"], d["session_id"]) for d in inbox_file.take_delivered(inbox)] == [
        ("m-1", "typed", "s-1"),
        ("m-2", "typed", "s-1"),
    ]


# --------------------------------------------------------------------------------------------
# The entry point
# --------------------------------------------------------------------------------------------


def run_entry(
    argv: list[str], hook_input: Any, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = hook_entry.main(
        argv,
        stdin=io.StringIO(hook_input if isinstance(hook_input, str) else json.dumps(hook_input)),
        stdout=stdout,
        stderr=stderr,
        env=env or {},
    )
    return code, stdout.getvalue(), stderr.getvalue()


def test_entry_stop_blocks_once_then_allows(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox.json"
    inbox_file.enqueue(inbox, "m-1", "hello")

    code, out, err = run_entry(["Stop", "--inbox", str(inbox)], stop_input(False))
    assert (code, err) == (0, "")
    assert json.loads(out) == {"decision": "block", "reason": "hello"}

    assert run_entry(["Stop", "--inbox", str(inbox)], stop_input(True)) == (0, "", "")
    assert [d["id"] for d in inbox_file.take_delivered(inbox)] == ["m-1"]


def test_entry_finds_its_files_in_the_environment(tmp_path: Path) -> None:
    inbox, context = tmp_path / "inbox.json", tmp_path / "context.md"
    inbox_file.enqueue(inbox, "m-1", "queued")
    context.write_text("the plan", encoding="utf-8")
    env = {hooks.INBOX_ENV: str(inbox), hooks.CONTEXT_ENV: str(context)}

    code, out, _ = run_entry(["UserPromptSubmit"], {"prompt": "hi"}, env)
    assert code == 0
    assert json.loads(out)["hookSpecificOutput"]["additionalContext"] == "queued"
    code, out, _ = run_entry(["SessionStart"], {"source": "compact"}, env)
    assert json.loads(out)["hookSpecificOutput"]["additionalContext"] == "the plan"


def test_entry_without_files_or_input_says_nothing(tmp_path: Path) -> None:
    missing = str(tmp_path / "none.json")
    for event in ("Stop", "UserPromptSubmit", "SessionStart", "PreCompact"):
        assert run_entry([event], {}) == (0, "", "")
        assert run_entry([event, "--inbox", missing, "--context", missing], "not json") == (
            0,
            "",
            "",
        )
    assert not (tmp_path / "none.json").exists()


@pytest.mark.parametrize("argv", [[], ["Nope"], ["Stop", "--bogus"]])
def test_entry_bad_arguments_never_exit_2(argv: list[str]) -> None:
    # Status 2 from a Stop hook would block the session with stderr as the reason.
    code, out, err = run_entry(argv, {})
    assert code == 1 and out == "" and err.startswith("legion hook: ")


def test_entry_leaves_a_malformed_inbox_alone(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox.json"
    inbox.write_text("{broken", encoding="utf-8")
    code, out, err = run_entry(["Stop", "--inbox", str(inbox)], stop_input(False))
    assert code == 1 and out == "" and "not JSON" in err
    assert inbox.read_text(encoding="utf-8") == "{broken"


def test_generated_command_runs_through_sh_from_a_workspace_that_shadows_legion(
    tmp_path: Path,
) -> None:
    """The CLI runs the command with `/bin/sh -c` in the session's cwd: quoting holds, and a
    `legion` package in the workspace is not the one imported."""
    state = tmp_path / "st ate's $dir"
    inbox = state / "inbox.json"
    inbox_file.enqueue(inbox, "m-1", "it's `here` $HOME")
    workspace = tmp_path / "ws"
    (workspace / "legion" / "runtime").mkdir(parents=True)
    for init in ("legion/__init__.py", "legion/runtime/__init__.py"):
        (workspace / init).write_text("raise SystemExit(2)\n", encoding="utf-8")
    [entry] = hooks.hooks_settings(inbox=inbox)["hooks"]["Stop"]

    done = subprocess.run(
        ["/bin/sh", "-c", entry["hooks"][0]["command"]],
        input=json.dumps(stop_input(False)),
        capture_output=True,
        text=True,
        cwd=workspace,
        timeout=30,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"decision": "block", "reason": "it's `here` $HOME"}


def test_the_hook_commands_old_path_still_answers(tmp_path: Path) -> None:
    """A session started before the hooks moved into `legion.runtime.claude` still runs
    `-m legion.runtime.hook_entry` until it is restarted or resumed: it answers the same."""
    inbox = tmp_path / "inbox.json"
    inbox_file.enqueue(inbox, "m-1", "hello")
    old = [sys.executable, "-P", "-m", "legion.runtime.hook_entry", "Stop", "--inbox", str(inbox)]

    done = subprocess.run(
        old,
        input=json.dumps(stop_input(False)),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=30,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"decision": "block", "reason": "hello"}


def test_a_turn_that_ends_wakes_the_daemon_and_one_that_goes_on_does_not(tmp_path: Path) -> None:
    """The Stop hook pokes the daemon's wake-up pipe (`LEGION_WAKE`) once the turn is over: a
    finished worker is closed then, not at the daemon's next retry. A turn that goes on with
    queued messages is not over."""
    fifo = tmp_path / "daemon.wake"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        inbox = tmp_path / "inbox.json"
        inbox_file.enqueue(inbox, "m-1", "hello")
        env = {"LEGION_WAKE": str(fifo)}
        code, out, _ = run_entry(["Stop", "--inbox", str(inbox)], stop_input(False), env)
        assert code == 0 and json.loads(out)["decision"] == "block"
        assert os.read(reader, 16) == b""  # nothing written (and no writer holds it open)
        assert run_entry(["Stop", "--inbox", str(inbox)], stop_input(True), env)[0] == 0
        assert os.read(reader, 16) == b"!"
        # No daemon listening (no reader): the hook neither blocks nor fails.
        os.close(reader)
        reader = -1
        assert run_entry(["Stop"], stop_input(True), env) == (0, "", "")
    finally:
        if reader >= 0:
            os.close(reader)
