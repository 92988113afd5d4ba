"""The real Codex CLI (the pinned version, `legion.runtime.codex.binary`) driven offline by the
scripted Responses-API server.  What these tests rely on is written down in docs/codex-cli.md.

They run `codex exec --json` (no tmux needed) in a private HOME and CODEX_HOME whose
config.toml points a custom model provider at the server on 127.0.0.1, with HTTP(S)_PROXY at the
server too, so any attempt to reach another host is recorded (and refused) as outbound.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from legion.demo.offline import base_environment
from tests.fakes.responses_server import (
    API_KEY_ENV,
    SHELL_TOOL,
    FakeResponsesServer,
    codex_config_toml,
    exec_command,
    item_text,
    output_text,
    text,
)
from tests.support.codex_env import find_codex

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="session")
def codex() -> Path:
    return find_codex()


@pytest.fixture
def server() -> Iterator[FakeResponsesServer]:
    with FakeResponsesServer() as fake:
        yield fake
    # Every test: Codex reached no host but the fake server, and only paths it serves.
    assert fake.outbound_attempts() == [], [r.path for r in fake.outbound_attempts()]
    assert fake.unknown_requests() == [], [r.path for r in fake.unknown_requests()]


@dataclass
class CodexEnv:
    home: Path
    codex_home: Path
    workspace: Path
    codex: Path
    env: dict[str, str]

    def exec(self, *args: str, timeout: float = 60) -> tuple[list[dict[str, Any]], str]:
        """`codex exec --json ... ARGS`: the JSONL events it printed, and its stderr."""
        result = subprocess.run(
            [str(self.codex), "exec", "--json", "--skip-git-repo-check",
             "--dangerously-bypass-approvals-and-sandbox", *args],
            cwd=self.workspace, env=self.env, capture_output=True, text=True,
            timeout=timeout, stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
        return events, result.stderr

    def rollouts(self) -> list[Path]:
        return sorted((self.codex_home / "sessions").rglob("rollout-*.jsonl"))

    def rollout(self, thread_id: str) -> list[dict[str, Any]]:
        [path] = [p for p in self.rollouts() if p.stem.endswith(thread_id)]
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def cx(tmp_path: Path, server: FakeResponsesServer, codex: Path) -> CodexEnv:
    home, codex_home, workspace = tmp_path / "home", tmp_path / "codex-home", tmp_path / "ws"
    for directory in (home, codex_home, workspace):
        directory.mkdir()
    notify = tmp_path / "notify.sh"
    notify.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> {tmp_path / "notify.log"}\n')
    notify.chmod(0o755)
    (codex_home / "config.toml").write_text(
        codex_config_toml(server.base_url, notify=[str(notify)])
    )
    env = {k: v for k, v in base_environment().items() if not k.startswith(("OPENAI_", "CODEX_"))}
    proxy = server.base_url
    env |= {
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        API_KEY_ENV: "sk-legion-fake-not-a-secret",
        "HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "https_proxy": proxy, "http_proxy": proxy,
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    }  # fmt: skip
    return CodexEnv(home, codex_home, workspace, codex, env)


def of_type(events: Sequence[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type") == kind]


def items(events: Sequence[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["item"] for e in of_type(events, "item.completed") if e["item"]["type"] == kind]


def notifications(cx: CodexEnv) -> list[dict[str, Any]]:
    log = cx.home.parent / "notify.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


# --------------------------------------------------------------------------------------------


def test_a_turn_runs_a_shell_command_and_the_rollout_records_it(
    cx: CodexEnv, server: FakeResponsesServer
) -> None:
    server.add_scenario(
        "make the file",
        [[text("Creating it."), exec_command("echo hi > file")], [text("The file is made.")]],
        name="file",
    )

    events, _ = cx.exec("please make the file")

    assert (cx.workspace / "file").read_text() == "hi\n"
    [started] = of_type(events, "thread.started")
    thread_id = started["thread_id"]
    assert [m["text"] for m in items(events, "agent_message")] == [
        "Creating it.",
        "The file is made.",
    ]
    [command] = items(events, "command_execution")
    assert command["exit_code"] == 0 and "echo hi > file" in command["command"]
    [completed] = of_type(events, "turn.completed")

    # The requests: the shell tool is offered, the second carries the command's output.
    first, second = server.requests_for_scenario("file")
    assert (first.turn, second.turn) == (0, 1)
    assert SHELL_TOOL in first.tool_names()
    assert first.body["stream"] is True
    assert first.session_id == thread_id
    assert first.headers["authorization"] == "<redacted>"
    [result] = second.tool_results()
    assert result["call_id"] == first.response["output"][1]["call_id"]
    assert "Process exited with code 0" in output_text(result)

    # The rollout: named after the thread id, which its session_meta carries; token usage.
    lines = cx.rollout(thread_id)
    assert lines[0]["type"] == "session_meta"
    assert lines[0]["payload"]["id"] == thread_id
    assert lines[0]["payload"]["cwd"] == str(cx.workspace)
    payloads = [line["payload"] for line in lines if line["type"] == "event_msg"]
    kinds = [p["type"] for p in payloads]
    assert kinds.index("task_started") < kinds.index("task_complete")
    [complete] = [p for p in payloads if p["type"] == "task_complete"]
    assert complete["last_agent_message"] == "The file is made."
    usage = [p["info"] for p in payloads if p["type"] == "token_count" and p.get("info")][-1]
    total = usage["total_token_usage"]
    turn_usage = completed["usage"]
    assert total["input_tokens"] == turn_usage["input_tokens"] > 0
    assert total["output_tokens"] == turn_usage["output_tokens"] > 0
    expected_input = sum(r.response["usage"]["input_tokens"] for r in (first, second))
    assert total["input_tokens"] == expected_input
    calls = [
        line["payload"]
        for line in lines
        if line["type"] == "response_item" and line["payload"]["type"] == "function_call"
    ]
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [
        (SHELL_TOOL, {"cmd": "echo hi > file"})
    ]

    # notify: once per turn, with the thread id and the last message.
    [note] = notifications(cx)
    assert note["type"] == "agent-turn-complete"
    assert note["thread-id"] == thread_id
    assert note["input-messages"] == ["please make the file"]
    assert note["last-assistant-message"] == "The file is made."


def test_resume_by_id_continues_the_same_session(cx: CodexEnv, server: FakeResponsesServer) -> None:
    server.add_scenario("first question", [[text("first answer")]], name="first")
    server.add_scenario("second question", [[text("second answer")]], name="second")

    first_events, _ = cx.exec("first question")
    [started] = of_type(first_events, "thread.started")
    thread_id = started["thread_id"]

    events, _ = cx.exec("resume", thread_id, "second question")

    assert of_type(events, "thread.started") == [{"type": "thread.started", "thread_id": thread_id}]
    assert [m["text"] for m in items(events, "agent_message")] == ["second answer"]
    resumed = server.last_request("second")
    assert resumed is not None and resumed.turn == 0
    assert resumed.session_id == thread_id
    # The resumed request re-sends the first turn's history.
    assert resumed.user_prompts() == ["first question", "second question"]
    texts = [(i.get("role"), item_text(i)) for i in resumed.input if i.get("type") == "message"]
    assert ("assistant", "first answer") in texts
    assert texts.index(("assistant", "first answer")) < texts.index(("user", "second question"))
    # One rollout file, appended to.
    assert len(cx.rollouts()) == 1
    lines = cx.rollout(thread_id)
    completes = [
        line["payload"]["last_agent_message"]
        for line in lines
        if line["type"] == "event_msg" and line["payload"]["type"] == "task_complete"
    ]
    assert completes == ["first answer", "second answer"]
    assert [n["thread-id"] for n in notifications(cx)] == [thread_id, thread_id]


def test_agents_md_reaches_the_model_as_context_not_as_the_prompt(
    cx: CodexEnv, server: FakeResponsesServer
) -> None:
    (cx.workspace / "AGENTS.md").write_text("LEGION-SKILL-MARKER: always say hi.\n")
    server.add_scenario("hello there", [[text("hi")]], name="hello")

    cx.exec("hello there")

    request = server.last_request("hello")
    assert request is not None and request.prompt == "hello there"
    [agents] = [
        item_text(i)
        for i in request.input
        if i.get("role") == "user" and "LEGION-SKILL-MARKER" in item_text(i)
    ]
    assert agents.startswith(f"# AGENTS.md instructions for {cx.workspace}")
