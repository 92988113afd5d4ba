"""Legion's hooks (`legion.runtime.claude.hooks` + `hook_entry`) in the real Claude Code CLI,
against the scripted model: a message queued while the session works reaches the model at the turn's
end through the Stop hook, and a resumed or compacted session gets its context back through
SessionStart. What the CLI does with each hook answer is in docs/claude-code-cli.md, "Hooks".
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from legion.bus import inbox as inbox_file
from legion.runtime.claude import hooks
from tests.fakes.model_server import FakeModelServer, RecordedRequest, bash, text
from tests.support.claude_env import (
    IDLE_FOOTER,
    ClaudeEnv,
    PrivateTmux,
    find_claude,
    make_claude_env,
    new_session_id,
)

pytestmark = [pytest.mark.e2e]

# The instructions of the CLI's compaction request (2.1.328) contain this sentence.
COMPACTION_PROMPT = "Your task is to create a detailed summary of the conversation"
# The message's text keeps what a shell would touch: it must reach the model as written.
MESSAGE = 'From @reviewer: please also cover the "$HOME" case; `rm -rf` is not the fix.\nThanks'


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as fake:
        yield fake
    assert fake.outbound_attempts() == [], [r.path for r in fake.outbound_attempts()]


@pytest.fixture
def cenv(tmp_path: Path, server: FakeModelServer) -> ClaudeEnv:
    return make_claude_env(tmp_path / "claude", server.base_url, claude=find_claude())


@pytest.fixture
def state(tmp_path: Path) -> Path:
    folder = tmp_path / "state dir's"  # quoted in the hook commands
    folder.mkdir()
    return folder


def session_settings(state: Path) -> str:
    """The one `--settings` Legion passes: its usual settings with the hooks merged in."""
    settings = hooks.merge_settings(
        {"skipDangerousModePermissionPrompt": True},
        hooks.hooks_settings(
            python=sys.executable, inbox=state / "inbox.json", context=state / "context.md"
        ),
    )
    return json.dumps(settings)


def texts(message: dict[str, Any]) -> list[str]:
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"]


def with_text(request: RecordedRequest, needle: str) -> list[tuple[str, str]]:
    """(role, text) of the request's messages whose text holds `needle`."""
    return [(m["role"], t) for m in request.messages for t in texts(m) if needle in t]


def test_a_message_queued_during_a_turn_reaches_the_model_through_the_stop_hook(
    cenv: ClaudeEnv, server: FakeModelServer, state: Path
) -> None:
    inbox = state / "inbox.json"
    # The message arrives while the session works: its Bash tool call queues it.
    queue_it = shlex.join(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from legion.bus.inbox import enqueue; "
            "enqueue(Path(sys.argv[1]), 'm-1', sys.argv[2])",
            str(inbox),
            MESSAGE,
        ]
    )
    server.add_scenario("work on it", [[bash(queue_it)], [text("Work done.")]], name="work")
    server.add_scenario("From @reviewer", [[text("Covering $HOME too.")]], name="message")
    # The user's own Stop hook keeps working beside Legion's.
    user_mark = cenv.root / "user-hook-ran"
    user_hook = {"type": "command", "command": f"touch {shlex.quote(str(user_mark))}"}
    user_settings = {
        "skipDangerousModePermissionPrompt": True,
        "hooks": {"Stop": [{"hooks": [user_hook]}]},
    }
    cenv.settings_path.write_text(json.dumps(user_settings), encoding="utf-8")
    session_id = new_session_id()

    result = cenv.print_mode(
        "work on it", "--settings", session_settings(state), session_id=session_id
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Covering $HOME too."
    assert [r.turn for r in server.requests_for_scenario("work")] == [0, 1]
    [delivery] = server.requests_for_scenario("message")  # delivered once, in the same turn
    assert delivery.headers["x-claude-code-session-id"] == session_id
    # Verbatim, as a user message after the turn's last answer.
    assert delivery.messages[-3]["content"] == [{"type": "text", "text": "Work done."}]
    assert delivery.messages[-2] == {
        "role": "user",
        "content": f"Stop hook feedback:\n{MESSAGE}",
    }
    assert [role for role, _ in with_text(delivery, MESSAGE)] == ["user", "system"]
    queued = json.loads(inbox.read_text(encoding="utf-8"))
    assert queued["messages"] == []
    [delivered] = inbox_file.take_delivered(inbox)
    assert delivered["id"] == "m-1" and delivered["via"] == "Stop"
    assert delivered["session_id"] == session_id
    assert user_mark.exists()


def test_a_resumed_session_gets_its_context_and_queued_messages(
    cenv: ClaudeEnv, server: FakeModelServer, state: Path
) -> None:
    server.add_scenario("first prompt", [[text("First answer.")]], name="first")
    server.add_scenario("carry on", [[text("Carrying on.")]], name="resumed")
    session_id = new_session_id()
    settings = session_settings(state)
    (state / "context.md").write_text("## Active plan\nplan.md, step 3\n", encoding="utf-8")

    first = cenv.print_mode("first prompt", "--settings", settings, session_id=session_id)
    assert first.returncode == 0, first.stderr
    # Startup is not a source Legion answers: the first request has no context.
    [started] = server.requests_for_scenario("first")
    assert with_text(started, "Active plan") == []

    inbox_file.enqueue(state / "inbox.json", "m-2", "From @legion: step 3 is approved.")
    resumed = cenv.print_mode("carry on", "--settings", settings, resume=session_id)

    assert resumed.returncode == 0, resumed.stderr
    [request] = server.requests_for_scenario("resumed")
    # Both as a system message after the prompt.
    assert request.messages[-2]["content"] == "carry on"
    [(role, found)] = with_text(request, "Active plan")
    assert role == "system" and request.messages[-1]["role"] == "system"
    assert "SessionStart hook additional context: ## Active plan\nplan.md, step 3" in found
    assert "UserPromptSubmit hook additional context: From @legion: step 3 is approved." in found
    assert [d["via"] for d in inbox_file.take_delivered(state / "inbox.json")] == [
        "UserPromptSubmit"
    ]


def test_compact_in_a_live_session_reinjects_the_context(
    cenv: ClaudeEnv, server: FakeModelServer, state: Path
) -> None:
    server.add_scenario(
        COMPACTION_PROMPT,
        [[text("<analysis>a</analysis>\n<summary>Summary of the work.</summary>")]],
        name="summary",
    )
    server.add_scenario("start the work", [[text("Started.")]], name="start")
    server.add_scenario("next step", [[text("Next step done.")]], name="next")
    (state / "context.md").write_text("## Current skill\nlegion-worker\n", encoding="utf-8")
    sock_dir = Path(tempfile.mkdtemp(prefix="legion-tmux-"))
    tmux = PrivateTmux(sock_dir / "sock")
    try:
        tmux.new_session(
            "worker",
            cenv.command(
                "--session-id",
                new_session_id(),
                "--dangerously-skip-permissions",
                "--settings",
                session_settings(state),
                "start the work",
            ),
            env=cenv.env,
            cwd=cenv.workspace,
        )
        tmux.wait_for("worker", "Started.", timeout=30)
        for prompt, shown in (("/compact", "Compacted"), ("next step", "Next step done.")):
            tmux.wait_for("worker", IDLE_FOOTER)
            tmux.send_text("worker", prompt)
            tmux.wait_for("worker", prompt)
            tmux.send_keys("worker", "Enter")
            tmux.wait_for("worker", shown, timeout=30)
    finally:
        tmux.kill()
        shutil.rmtree(sock_dir, ignore_errors=True)

    assert len(server.requests_for_scenario("summary")) == 1
    [request] = server.requests_for_scenario("next")
    assert with_text(request, "Summary of the work.")  # the history was compacted
    [(role, found)] = with_text(request, "## Current skill")
    assert role == "system"
    assert "SessionStart hook additional context: ## Current skill\nlegion-worker\n" in found
