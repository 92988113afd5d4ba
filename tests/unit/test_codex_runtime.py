"""The Codex runtime's pure parts: reading a rollout (turn state, tokens, compactions), the
session link, the turn loop's argv and window lines, and choosing a runtime per role."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legion.config.files import toml_value
from legion.config.resolve import resolve_settings
from legion.core.model import Mode
from legion.core.usage import Usage
from legion.errors import ConfigError
from legion.runtime.codex.runtime import (
    CodexRuntime,
    codex_session_id,
    compactions,
    rollout_usage,
    session_link,
    skill_prompt,
    summarize_rollout,
)
from legion.runtime.codex.session import Session, render_event
from legion.runtime.headless import turn_state_file
from legion.runtime.transcript import Turn

CODEX_ID = "01a208cc-6f6d-75b2-a519-a8de2a4bcf78"


def line(kind: str, payload: dict[str, Any], at: str = "2026-11-23T10:00:00.000Z") -> str:
    return json.dumps({"timestamp": at, "type": kind, "payload": payload})


def event(kind: str, **fields: Any) -> str:
    return line("event_msg", {"type": kind, **fields})


def token_count(last: dict[str, int], total: dict[str, int], at: str = "t") -> str:
    info = {"last_token_usage": last, "total_token_usage": total}
    return line("event_msg", {"type": "token_count", "info": info}, at)


def test_a_turn_in_progress_is_a_task_started_without_its_task_complete() -> None:
    meta = line("session_meta", {"id": CODEX_ID})
    assert summarize_rollout([]).turn is Turn.NONE
    assert summarize_rollout([meta]).turn is Turn.OPEN  # starting: no turn recorded yet
    started = event("task_started", turn_id="a")
    assert summarize_rollout([meta, started]).turn is Turn.OPEN
    done = event("task_complete", turn_id="a")
    assert summarize_rollout([meta, started, done]).turn is Turn.ENDED
    again = event("task_started", turn_id="b")
    assert summarize_rollout([meta, started, done, again]).turn is Turn.OPEN
    aborted = event("turn_aborted", turn_id="b")
    summary = summarize_rollout([meta, started, done, again, aborted, "{torn"])
    assert summary.turn is Turn.ENDED and summary.pending_question is None


def failed(turn: str, message: str, info: object) -> str:
    """A turn's end as Codex records one that failed (seen with 0.169.0)."""
    error = {"message": message, "codex_error_info": info}
    return event("task_complete", turn_id=turn, last_agent_message=None, error=error)


def http(status: int) -> dict[str, Any]:
    return {"http_connection_failed": {"http_status_code": status}}


def test_a_turn_that_could_not_reach_the_model_says_so_until_the_next_begins() -> None:
    said = "unexpected status 401 Unauthorized: Incorrect API key provided: sk-ab***yz, url: u"
    refused = [event("task_started", turn_id="a"), failed("a", said, http(401))]
    # Codex's words, never the server's (which may quote part of the key).
    assert summarize_rollout(refused).unreachable == "unexpected status 401 Unauthorized"
    no_key = failed("a", "Missing environment variable: `K`.", "other")
    assert summarize_rollout([event("task_started", turn_id="a"), no_key]).unreachable == (
        "Missing environment variable: `K`."
    )
    again = [*refused, event("task_started", turn_id="b")]
    assert summarize_rollout(again).unreachable is None  # resent: the session goes on
    done = [*again, event("task_complete", turn_id="b")]
    assert summarize_rollout(done).unreachable is None
    # Other failures are not this: a rate limit, an overloaded server, an aborted turn.
    for other in (failed("a", "unexpected status 429", http(429)), failed("a", "x", "other")):
        assert summarize_rollout([event("task_started", turn_id="a"), other]).unreachable is None
    aborted = [*refused, event("turn_aborted", turn_id="a")]
    assert summarize_rollout(aborted).unreachable is None


def test_tokens_are_each_responses_own_with_cached_input_counted_apart() -> None:
    first = {"input_tokens": 1000, "cached_input_tokens": 600, "output_tokens": 50}
    second = {"input_tokens": 2000, "cached_input_tokens": 0, "output_tokens": 70}
    lines = [
        token_count(first, first, "t1"),
        token_count(first, first, "t1b"),  # a repeat (rate-limit news): not counted twice
        token_count(second, {"input_tokens": 3000}, "t2"),
        event("token_count", info=None),
    ]
    assert rollout_usage(lines) == [
        ("t1", Usage(input=400, output=50, cache_read=600)),
        ("t2", Usage(input=2000, output=70)),
    ]


@given(st.lists(st.integers(min_value=0, max_value=10**6), max_size=20))
def test_a_rollouts_tokens_add_up_to_what_its_responses_reported(inputs: list[int]) -> None:
    total = 0
    lines = []
    for n in inputs:
        total += n
        lines.append(token_count({"input_tokens": n, "output_tokens": 1}, {"input_tokens": total}))
    used = [usage for _, usage in rollout_usage(lines)]
    assert sum(u.input for u in used) == sum(inputs)
    # a response whose running total did not move is taken for a repeat of the last count
    assert len(used) == len([n for i, n in enumerate(inputs) if i == 0 or n > 0])


def test_compactions_are_the_compacted_lines() -> None:
    assert compactions([line("compacted", {"message": "m"}), event("task_started"), "x"]) == 1


def test_the_link_names_the_codex_session_and_a_state_file_beside_it(tmp_path: Path) -> None:
    env = {"CODEX_HOME": str(tmp_path)}
    link = session_link(env, "legion-sid")
    assert link == tmp_path / "legion" / "legion-sid.jsonl"
    assert codex_session_id(link) is None
    rollout = (
        tmp_path
        / "sessions"
        / "2026"
        / "11"
        / "23"
        / f"rollout-2026-11-23T10-00-00-{CODEX_ID}.jsonl"
    )
    rollout.parent.mkdir(parents=True)
    rollout.write_text(event("task_started", turn_id="a") + "\n")
    link.parent.mkdir()
    link.symlink_to(rollout)
    assert codex_session_id(link) == CODEX_ID
    runtime = CodexRuntime()
    summary = runtime.summarize(link)
    assert summary is not None and summary.turn is Turn.OPEN
    # the turn loop says no turn runs (Codex died mid-turn): idle, whatever the rollout says
    turn_state_file(link).write_text("idle\n")
    summary = runtime.summarize(link)
    assert summary is not None and summary.turn is Turn.ENDED
    assert runtime.last_activity(link) == rollout.stat().st_mtime
    assert runtime.summarize(tmp_path / "legion" / "nothing.jsonl") is None
    assert session_link({"HOME": str(tmp_path)}, "s") == tmp_path / ".codex" / "legion" / "s.jsonl"


def test_the_turn_loop_resumes_codex_by_its_own_id(tmp_path: Path) -> None:
    env = {"CODEX_HOME": str(tmp_path)}
    session = Session(
        codex="/bin/codex", session_id="sid", inbox=None, context=None,
        extra_args=["--model", "m"], env=env, out=open("/dev/null", "w"),  # noqa: SIM115
    )  # fmt: skip
    argv = session.argv("-starts with a dash")
    assert argv[:2] == ["/bin/codex", "exec"] and "--json" in argv
    assert "allow_login_shell=false" in argv  # a login shell would lose Legion's PATH
    assert "check_for_update_on_startup=false" in argv  # Legion runs the CLI it pinned
    assert "shell_environment_policy.ignore_default_excludes=false" in argv  # a worker: no keys
    assert argv[-4:] == ["--model", "m", "--", "-starts with a dash"]
    session._codex_id = CODEX_ID
    assert session.argv("p")[-4:] == ["resume", CODEX_ID, "--", "p"]
    # the controller's commands keep the keys: the sessions it starts inherit them
    session.env = {**env, "LEGION_MODE": "controller"}
    assert "shell_environment_policy.ignore_default_excludes=false" not in session.argv("p")


def test_the_runtimes_command_runs_the_turn_loop(tmp_path: Path) -> None:
    codex = tmp_path / "codex"
    codex.write_text("#!/bin/sh\n")
    codex.chmod(0o755)
    runtime = CodexRuntime(settings=None, lookup_env={"PATH": str(tmp_path)})
    argv = runtime.command(
        "sid", "go", resume=True, inbox=tmp_path / "i.json", context=tmp_path / "c.md"
    )
    assert argv[1:3] == ["-m", "legion.runtime.codex.session"]
    assert argv[argv.index("--codex") + 1] == str(codex)
    assert "--resume" in argv and argv[-2:] == ["--", "go"]
    assert argv[argv.index("--inbox") + 1] == str(tmp_path / "i.json")
    assert runtime.worker_prompt("leg-3", Mode.REVIEW) == "$legion-worker review mode for LEG-3"
    assert skill_prompt("legion-controller", "") == "$legion-controller"


def test_window_lines_say_what_codex_did() -> None:
    command = {
        "type": "command_execution",
        "command": "/bin/bash -c 'ls'",
        "exit_code": 0,
        "aggregated_output": "\n".join(f"f{i}" for i in range(10)),
    }
    lines = render_event({"type": "item.completed", "item": command})
    assert lines[0] == "$ /bin/bash -c 'ls'  (exit 0)" and lines[-1] == "  f9" and len(lines) == 7
    message = {"type": "item.completed", "item": {"type": "agent_message", "text": "Done."}}
    assert render_event(message) == ["• Done."]
    usage = {"input_tokens": 10, "cached_input_tokens": 4, "output_tokens": 2}
    assert render_event({"type": "turn.completed", "usage": usage}) == [
        "─ turn done: 10 in (4 cached), 2 out"
    ]
    assert render_event({"type": "turn.failed", "error": {"message": "boom"}}) == ["! boom"]
    refused = "unexpected status 401 Unauthorized: Incorrect API key provided: sk-ab***yz, url: u"
    for failed in (
        {"type": "error", "message": refused},
        {"type": "turn.failed", "error": {"message": refused}},
    ):
        assert render_event(failed) == ["! unexpected status 401 Unauthorized"]  # no key's part
    assert render_event({"type": "thread.started", "thread_id": "x"}) == []


def _settings(tmp_path: Path, env: dict[str, str], text: str = "") -> Any:
    config = tmp_path / "config.toml"
    config.write_text('project_id = "00000000-0000-0000-0000-000000000001"\n' + text)
    # The user's trust is beside the point here (tests/unit/test_config.py): how values parse.
    return resolve_settings(
        config, env | {"XDG_CONFIG_HOME": str(tmp_path / "none")}, trusting=True
    )


def test_a_runtime_is_chosen_per_role(tmp_path: Path) -> None:
    settings = _settings(tmp_path, {}, '[runtimes]\nimplement = "codex"\n')
    assert settings.runtime_for("implement") == "codex"
    assert settings.runtime_for("review") == settings.runtime_for("controller") == "claude-code"
    settings = _settings(tmp_path, {"LEGION_RUNTIME": "codex", "LEGION_RUNTIMES": "review=claude"})
    assert settings.runtime_for("plan") == "codex"
    assert settings.runtime_for("review") == "claude-code"


@pytest.mark.parametrize(
    ("text", "env", "says"),
    [
        ('runtime = "gpt"\n', {}, "key 'runtime' must be one of claude-code, codex"),
        ('[runtimes]\nretro = "codex"\n', {}, "set 'implement'"),
        ('[runtimes]\ncooking = "codex"\n', {}, "unknown role 'cooking'"),
        ("runtimes = 3\n", {}, "must be a table of role = runtime"),
        ("", {"LEGION_RUNTIMES": "implement"}, 'must be "role=runtime" pairs'),
    ],
)
def test_a_bad_runtime_setting_says_where_and_why(
    tmp_path: Path, text: str, env: dict[str, str], says: str
) -> None:
    with pytest.raises(ConfigError, match=says.replace("(", r"\(")):
        _settings(tmp_path, env, text)


def test_an_inline_table_is_written_as_toml() -> None:
    import tomllib

    written = toml_value({"implement": "codex", 'odd "key"': "x"})
    assert tomllib.loads(f"t = {written}")["t"] == {"implement": "codex", 'odd "key"': "x"}
