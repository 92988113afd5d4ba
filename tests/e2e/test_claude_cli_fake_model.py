"""The real Claude Code CLI driven by the scripted fake model server (no traffic off 127.0.0.1).

Needs the pinned CLI (`bash scripts/install-claude.sh`) and tmux.  What these tests rely on
is written down in docs/claude-code-cli.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_server import (
    FakeModelServer,
    RecordedRequest,
    Scenario,
    Script,
    ask_user_question,
    bash,
    read_request_log,
    text,
    tool_result_text,
    tool_use,
)
from tests.support.claude_env import (
    CURSOR,
    IDLE_FOOTER,
    QUESTION_FOOTER,
    REPO_ROOT,
    ClaudeEnv,
    PrivateTmux,
    encode_project_dir,
    find_claude,
    make_claude_env,
    new_session_id,
)
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e]


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    return find_claude()


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as fake:
        yield fake
    # Every test: the CLI tried to reach no host but the fake server.
    assert fake.outbound_attempts() == [], [r.path for r in fake.outbound_attempts()]


@pytest.fixture
def cenv(tmp_path: Path, server: FakeModelServer, claude_bin: Path) -> ClaudeEnv:
    return make_claude_env(tmp_path / "claude", server.base_url, claude=claude_bin)


@pytest.fixture
def tmux() -> Iterator[PrivateTmux]:
    # A short directory: unix socket paths are limited to ~107 bytes.
    sock_dir = Path(tempfile.mkdtemp(prefix="legion-tmux-"))
    server = PrivateTmux(sock_dir / "sock")
    yield server
    server.kill()
    shutil.rmtree(sock_dir, ignore_errors=True)


def transcript_entries(cenv: ClaudeEnv, session_id: str) -> list[dict[str, Any]]:
    path = cenv.transcript_path(session_id)
    assert path.exists(), sorted(str(p) for p in (cenv.config_dir / "projects").rglob("*"))
    return cenv.read_transcript(session_id)


def content_blocks(entries: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    blocks = []
    for entry in entries:
        if entry.get("type") not in ("user", "assistant"):
            continue
        content = entry["message"].get("content")
        if isinstance(content, list):
            blocks += [b for b in content if isinstance(b, dict) and b.get("type") == kind]
    return blocks


def start_interactive(
    tmux: PrivateTmux, cenv: ClaudeEnv, session_id: str, prompt: str, name: str = "worker"
) -> None:
    tmux.new_session(
        name,
        cenv.command("--session-id", session_id, "--dangerously-skip-permissions", prompt),
        env=cenv.env,
        cwd=cenv.workspace,
    )


# --------------------------------------------------------------------------------------------
# Print mode
# --------------------------------------------------------------------------------------------


def test_print_mode_prints_the_scripted_text(cenv: ClaudeEnv, server: FakeModelServer) -> None:
    server.add_scenario("say hi", [[text("Hello from the fake model!")]], name="hi")
    session_id = new_session_id()

    result = cenv.print_mode("say hi", session_id=session_id)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Hello from the fake model!"
    request = server.last_request("hi")
    assert request is not None
    assert request.query == {"beta": ["true"]}
    assert request.body["stream"] is True
    assert request.headers["x-claude-code-session-id"] == session_id
    assert request.headers["x-api-key"] == "<redacted>"
    assert request.headers["user-agent"].startswith("claude-cli/")
    assert request.turn == 0


def test_bash_tool_use_writes_a_file_and_the_transcript_shows_it(
    cenv: ClaudeEnv, server: FakeModelServer
) -> None:
    server.add_scenario(
        "make the file",
        [
            [text("Creating it."), bash("printf made > made.txt", "Create made.txt")],
            [text("The file is made.")],
        ],
        name="file",
    )
    session_id = new_session_id()

    result = cenv.print_mode("please make the file", session_id=session_id)

    assert result.returncode == 0, result.stderr
    assert "The file is made." in result.stdout
    assert (cenv.workspace / "made.txt").read_text() == "made"
    # The second request carries the tool_result for the first turn's tool_use.
    turns = server.requests_for_scenario("file")
    assert [r.turn for r in turns] == [0, 1]
    [tool_result] = turns[1].tool_results()
    tool_use_id = turns[0].response["content"][1]["id"]
    assert tool_result["tool_use_id"] == tool_use_id
    assert tool_result.get("is_error") in (None, False)

    entries = transcript_entries(cenv, session_id)
    assert cenv.transcript_path(session_id).parent.name == encode_project_dir(cenv.workspace)
    [tool_use] = content_blocks(entries, "tool_use")
    assert tool_use["name"] == "Bash"
    assert tool_use["input"]["command"] == "printf made > made.txt"
    [result_block] = content_blocks(entries, "tool_result")
    assert result_block["tool_use_id"] == tool_use["id"] == tool_use_id
    assert {e["sessionId"] for e in entries if e.get("type") in ("user", "assistant")} == {
        session_id
    }


def test_resume_appends_to_the_same_transcript(cenv: ClaudeEnv, server: FakeModelServer) -> None:
    server.add_scenario("first question", [[text("first answer")]], name="first")
    server.add_scenario("second question", [[text("second answer")]], name="second")
    session_id = new_session_id()

    first = cenv.print_mode("first question", session_id=session_id)
    assert first.returncode == 0, first.stderr
    path = cenv.transcript_path(session_id)
    lines_before = len(cenv.read_transcript(session_id))

    second = cenv.print_mode("second question", resume=session_id)

    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "second answer"
    assert sorted(p.name for p in path.parent.glob("*.jsonl")) == [path.name]
    entries = cenv.read_transcript(session_id)
    assert len(entries) > lines_before
    prompts = [
        e["message"]["content"]
        for e in entries
        if e.get("type") == "user" and isinstance(e["message"]["content"], str)
    ]
    assert prompts == ["first question", "second question"]
    # The resumed request re-sends the whole history: turn 0 of "second" follows the first turn.
    resumed = server.last_request("second")
    assert resumed is not None and resumed.turn == 0
    roles = [m["role"] for m in resumed.messages]
    assert roles.count("assistant") == 1
    # Reusing a session id for a *new* session is refused.
    again = cenv.print_mode("first question", session_id=session_id)
    assert again.returncode != 0
    assert "already in use" in again.stdout + again.stderr


def test_standalone_server_process_serves_the_cli(tmp_path: Path, claude_bin: Path) -> None:
    script = Script([Scenario("ping", [[text("pong from another process")]], name="ping")])
    script_file = script.dump(tmp_path / "script.json")
    log = tmp_path / "requests.jsonl"
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "legion.demo.model_server",
            "--port",
            "0",
            "--script",
            str(script_file),
            "--log",
            str(log),
            "--port-file",
            str(port_file),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 45
        while not port_file.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "server did not write its port"
            time.sleep(0.05)
        base_url = f"http://127.0.0.1:{port_file.read_text()}"
        with urllib.request.urlopen(base_url + "/") as reply:
            assert reply.status == 200
        count = urllib.request.Request(
            base_url + "/v1/messages/count_tokens",
            data=json.dumps({"messages": [{"role": "user", "content": "hello"}]}).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(count) as reply:
            assert json.load(reply)["input_tokens"] > 0
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(base_url + "/v1/nope")
        assert missing.value.code == 404
        assert json.load(missing.value)["error"]["type"] == "not_found_error"

        cenv = make_claude_env(tmp_path / "claude", base_url, claude=claude_bin)
        result = cenv.print_mode("ping", session_id=new_session_id())
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "pong from another process"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    recorded = read_request_log(log)
    assert [r.kind for r in recorded if r.path == "/v1/messages"] == ["scripted"]
    assert [r.kind for r in recorded if r.kind == "outbound"] == []
    assert {r.path for r in recorded} >= {"/", "/v1/messages/count_tokens", "/v1/nope"}


# --------------------------------------------------------------------------------------------
# Interactive CLI in tmux
# --------------------------------------------------------------------------------------------


def test_interactive_cli_runs_a_scripted_turn_without_any_keypress(
    cenv: ClaudeEnv, server: FakeModelServer, tmux: PrivateTmux
) -> None:
    server.add_scenario(
        "start working",
        [[bash("touch started.txt", "Touch a file")], [text("Working on it now.")]],
        name="start",
    )
    session_id = new_session_id()

    start_interactive(tmux, cenv, session_id, "start working on the task")

    screen = tmux.wait_for("worker", "Working on it now.", timeout=40)
    # Back at the input prompt, idle: no "esc to interrupt" in the footer.
    screen = tmux.wait_for("worker", IDLE_FOOTER)
    assert "esc to interrupt" not in screen.splitlines()[-1]
    assert (cenv.workspace / "started.txt").exists()
    assert [r.turn for r in server.requests_for_scenario("start")] == [0, 1]
    entries = transcript_entries(cenv, session_id)
    assert content_blocks(entries, "tool_use")[0]["name"] == "Bash"
    assert tmux.pane_dead("worker") == (False, None)

    # A follow-up prompt typed into the pane is a new human prompt.
    server.add_scenario("and then", [[text("Follow-up done.")]], name="followup")
    tmux.send_text("worker", "and then finish")
    tmux.wait_for("worker", "and then finish")
    tmux.send_keys("worker", "Enter")
    tmux.wait_for("worker", "Follow-up done.", timeout=30)
    assert server.last_request("followup") is not None


def _wait_question(tmux: PrivateTmux, question: str) -> str:
    screen = tmux.wait_for("worker", QUESTION_FOOTER, timeout=40)
    assert question in screen
    return screen


def _answer_text(request: RecordedRequest) -> str:
    [result] = request.tool_results()
    return tool_result_text(result)


def test_ask_user_question_is_answered_with_an_option_number_key(
    cenv: ClaudeEnv, server: FakeModelServer, tmux: PrivateTmux
) -> None:
    server.add_scenario(
        "choose a fruit",
        [
            [ask_user_question("Pick a fruit?", ["Apple", "Banana", "Cherry"], header="Fruit")],
            [text("Banana it is.")],
        ],
        name="ask",
    )
    session_id = new_session_id()
    start_interactive(tmux, cenv, session_id, "choose a fruit for me")

    screen = _wait_question(tmux, "Pick a fruit?")
    assert "1. Apple" in screen and "2. Banana" in screen and "3. Cherry" in screen
    assert "4. Type something." in screen
    tmux.send_keys("worker", "2")  # single-select: the number key selects and submits

    answered = server.wait_for_turn("ask", 1, timeout=30)
    assert '"Pick a fruit?"="Banana"' in _answer_text(answered)
    tmux.wait_for("worker", "Banana it is.", timeout=30)

    def results() -> list[Any]:
        return [
            e["toolUseResult"]
            for e in transcript_entries(cenv, session_id)
            if isinstance(e.get("toolUseResult"), dict) and "answers" in e["toolUseResult"]
        ]

    # The CLI writes its transcript after it draws: on a loaded machine, a moment later.
    recorded = wait_until("the answer in the transcript", results)
    assert recorded[0]["answers"] == {"Pick a fruit?": "Banana"}


def test_ask_user_question_is_answered_with_free_text(
    cenv: ClaudeEnv, server: FakeModelServer, tmux: PrivateTmux
) -> None:
    server.add_scenario(
        "name the thing",
        [
            [ask_user_question("What name should I use?", ["Alice", "Bob"], header="Name")],
            [text("Noted the name.")],
        ],
        name="ask",
    )
    start_interactive(tmux, cenv, new_session_id(), "name the thing please")

    _wait_question(tmux, "What name should I use?")
    tmux.send_keys("worker", "3")  # the "Type something." row (options + 1)
    tmux.wait_for("worker", f"{CURSOR} 3. Type something.")
    tmux.send_text("worker", "Zoe the zebra")
    tmux.wait_for("worker", "3. Zoe the zebra")
    tmux.send_keys("worker", "Enter")

    answered = server.wait_for_turn("ask", 1, timeout=30)
    assert '"What name should I use?"="Zoe the zebra"' in _answer_text(answered)
    tmux.wait_for("worker", "Noted the name.", timeout=30)


def test_ask_user_question_with_two_questions_and_multi_select(
    cenv: ClaudeEnv, server: FakeModelServer, tmux: PrivateTmux
) -> None:
    questions = {
        "questions": [
            {
                "question": "Which color?",
                "header": "Color",
                "options": [
                    {"label": "Red", "description": "warm"},
                    {"label": "Blue", "description": "cool"},
                ],
                "multiSelect": False,
            },
            {
                "question": "Which toppings?",
                "header": "Toppings",
                "options": [
                    {"label": "Cheese", "description": "c"},
                    {"label": "Ham", "description": "h"},
                    {"label": "Olives", "description": "o"},
                ],
                "multiSelect": True,
            },
        ]
    }
    server.add_scenario(
        "two things",
        [[tool_use("AskUserQuestion", questions)], [text("Got both answers.")]],
        name="ask",
    )
    start_interactive(tmux, cenv, new_session_id(), "ask me two things")

    _wait_question(tmux, "Which color?")
    tmux.send_keys("worker", "2")  # Blue; moves on to the next question
    tmux.wait_for("worker", "Which toppings?")
    tmux.send_keys("worker", "1")  # multi-select: number keys toggle [✔]
    tmux.wait_for("worker", "[✔] Cheese")
    tmux.send_keys("worker", "3")
    tmux.wait_for("worker", "[✔] Olives")
    tmux.send_keys("worker", "Tab")  # to the Submit tab: "Review your answers"
    tmux.wait_for("worker", "Review your answers")
    tmux.send_keys("worker", "1")  # "1. Submit answers"

    answered = server.wait_for_turn("ask", 1, timeout=30)
    answer = _answer_text(answered)
    assert '"Which color?"="Blue"' in answer
    assert '"Which toppings?"="Cheese, Olives"' in answer
    tmux.wait_for("worker", "Got both answers.", timeout=30)


def test_environment_has_no_leaks_from_the_caller(
    tmp_path: Path, server: FakeModelServer, claude_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://example.invalid")
    monkeypatch.setenv("HTTPS_PROXY", "http://example.invalid:3128")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "/nonexistent")
    cenv = make_claude_env(tmp_path / "claude", server.base_url, claude=claude_bin)
    assert cenv.env["ANTHROPIC_BASE_URL"] == server.base_url
    assert cenv.env["HTTPS_PROXY"] == server.base_url
    assert cenv.env["CLAUDE_CONFIG_DIR"] == str(cenv.config_dir)
    if os.geteuid() == 0:
        assert cenv.env["IS_SANDBOX"] == "1"
    config = cenv.global_config()
    assert config["hasCompletedOnboarding"] is True
    assert config["customApiKeyResponses"]["approved"] == [cenv.api_key[-20:]]
    assert config["projects"][os.path.realpath(cenv.workspace)]["hasTrustDialogAccepted"]
    settings = json.loads(cenv.settings_path.read_text())
    assert settings["skipDangerousModePermissionPrompt"] is True
