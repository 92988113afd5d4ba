"""The Gemini runtime's pure parts and its seams (`legion.runtime.gemini`, docs/gemini-cli.md):
what the proxy lets its CLI send and how it meters the answers, a chat's tokens and turn, the
turn loop's argv, a session pointed at the proxy, and the scripted server's reading of a
request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legion.demo.gemini_server import build_response, prompt_and_turn, sse_events
from legion.proxy.metering import UsageMeter
from legion.proxy.routes import GEMINI_API, Forward, Refusal, body_refusal, forward
from legion.runtime.gemini import model_route
from legion.runtime.gemini.runtime import chat_usage, find_chat, summarize_chat
from legion.runtime.gemini.session import Session
from legion.runtime.transcript import Turn

BASE = "https://generativelanguage.googleapis.com"
STREAM = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"


def test_its_cli_sends_a_models_turn_under_its_name_and_a_stream_by_the_path() -> None:
    streamed = forward(GEMINI_API, BASE, "POST", STREAM)
    assert isinstance(streamed, Forward) and streamed.url == BASE + STREAM
    assert streamed.route.streams is True and streamed.route.metered
    plain = forward(GEMINI_API, BASE, "POST", "/v1beta/models/gemini-2.5-pro:generateContent")
    assert isinstance(plain, Forward) and plain.route.streams is False


@pytest.mark.parametrize(
    "target",
    [
        "/v1beta/models/../files:generateContent",
        "/v1beta/models/:generateContent",
        "/v1beta/models/a/b:generateContent",
        "/v1beta/files",
        "/v1beta/models/gemini-2.5-pro:batchGenerateContent",
        "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=json",
        "/v1beta/cachedContents",
    ],
)
def test_nothing_else_of_googles_api_is_reached_with_the_key(target: str) -> None:
    assert isinstance(forward(GEMINI_API, BASE, "POST", target), Refusal)


def test_tools_the_provider_would_run_itself_are_refused() -> None:
    for tool in ({"googleSearch": {}}, {"urlContext": {}}, {"codeExecution": {}}):
        refused = body_refusal(GEMINI_API, {"contents": [], "tools": [tool]})
        assert refused is not None and refused.status == 400, tool
    declared = {"tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}]}
    assert body_refusal(GEMINI_API, declared) is None


def _stream(response: dict[str, object]) -> bytes:
    events = [e for e in sse_events(response) if e.get("type") != "pause"]
    return b"".join(f"data: {json.dumps(e)}\r\n\r\n".encode() for e in events)


@given(st.lists(st.integers(min_value=1, max_value=400), max_size=8))
def test_its_stream_is_metered_from_the_last_usage_whatever_the_splits(cuts: list[int]) -> None:
    from legion.demo.gemini_server import bash, text

    response = build_response("gemini-2.5-pro", [bash("ls"), text("done")], 1200)
    response["usageMetadata"] = {
        "promptTokenCount": 1200,
        "cachedContentTokenCount": 200,
        "candidatesTokenCount": 30,
        "thoughtsTokenCount": 12,
    }
    data = _stream(response)
    meter = UsageMeter(streaming=True)
    start = 0
    for cut in sorted(cuts):
        meter.feed(data[start:cut])
        start = max(start, cut)
    meter.feed(data[start:])
    used = meter.result()
    assert used is not None and used.model == "gemini-2.5-pro"
    assert (used.input_tokens, used.cache_read_tokens, used.output_tokens) == (1000, 200, 42)


def test_a_json_answer_is_metered_too() -> None:
    meter = UsageMeter(streaming=False)
    meter.feed(json.dumps({"candidates": [], "usageMetadata": {"promptTokenCount": 7}}).encode())
    used = meter.result()
    assert used is not None and used.input_tokens == 7 and used.output_tokens == 0


def _record(**fields: object) -> str:
    return json.dumps(fields)


CHAT = [
    _record(sessionId="S", startTime="t0", kind="main"),
    _record(id="u1", type="user", content=[{"text": "go"}]),
    _record(id="g1", type="gemini", timestamp="t1", tokens={"input": 100, "output": 5,
            "cached": 40, "thoughts": 3}, toolCalls=[{"name": "run_shell_command"}]),
    _record(id="g1", type="gemini", timestamp="t1", tokens={"input": 100, "output": 5,
            "cached": 40, "thoughts": 3}, toolCalls=[{"name": "run_shell_command"}]),
    _record(**{"$set": {"lastUpdated": "t1"}}),
    _record(id="u2", type="user", content=[{"functionResponse": {}}]),
    _record(id="g2", type="gemini", timestamp="t2", tokens={"input": 120, "output": 2}),
]  # fmt: skip


def test_a_chats_tokens_are_each_responses_once_with_cached_input_apart() -> None:
    used = chat_usage(CHAT)
    assert [when for when, _ in used] == ["t1", "t2"]
    first, second = used[0][1], used[1][1]
    assert (first.input, first.cache_read, first.output) == (60, 40, 8)
    assert (second.input, second.output) == (120, 2)


def test_a_turn_ends_with_the_models_answer_that_calls_no_tool() -> None:
    assert summarize_chat(CHAT).turn is Turn.ENDED
    assert summarize_chat(CHAT[:4]).turn is Turn.OPEN  # its tool call runs
    assert summarize_chat(CHAT[:2]).turn is Turn.OPEN
    assert summarize_chat([]).turn is Turn.NONE


def test_the_chat_of_a_session_is_its_first_file_of_its_id(tmp_path: Path) -> None:
    sid = "1316621d-bc12-5967-8154-75c5d7df94b6"
    chats = tmp_path / "tmp" / "repo" / "chats"
    chats.mkdir(parents=True)
    (chats / "session-2026-11-29T21-33-1316621d.jsonl").write_text(_record(sessionId=sid) + "\n")
    (chats / "session-2026-11-29T21-34-1316621d.jsonl").write_text(_record(sessionId=sid) + "\n")
    (chats / "session-2026-11-29T21-32-1316621d.jsonl").write_text(_record(sessionId="x") + "\n")
    found = find_chat(tmp_path, sid)
    assert found is not None and found.name == "session-2026-11-29T21-33-1316621d.jsonl"
    assert find_chat(tmp_path, "00000000-0000-0000-0000-000000000000") is None


def test_the_turn_loop_starts_with_legions_id_then_resumes_it(tmp_path: Path) -> None:
    import io

    sid = "1316621d-bc12-5967-8154-75c5d7df94b6"
    session = Session(
        gemini="gemini", session_id=sid, model="gemini-2.5-pro", inbox=None, context=None,
        extra_args=["--debug"], env={"GEMINI_CLI_HOME": str(tmp_path)}, out=io.StringIO(),
    )  # fmt: skip
    first = session.argv("-x is a prompt")
    assert first[:2] == ["gemini", "--model"] and "--yolo" in first and "--debug" in first
    assert first[-3:] == ["--session-id", sid, "--prompt=-x is a prompt"]
    chats = tmp_path / "tmp" / "repo" / "chats"
    chats.mkdir(parents=True)
    (chats / f"session-2026-11-29T21-33-{sid[:8]}.jsonl").write_text(_record(sessionId=sid))
    session._link()
    assert session.started and session.link.resolve().parent == chats
    assert session.argv("more")[-3:] == ["--resume", sid, "--prompt=more"]


def test_a_session_is_pointed_at_the_proxy_with_its_capability_as_its_only_key() -> None:
    env = {"GEMINI_API_KEY": "real", "GOOGLE_API_KEY": "also", "PATH": "/bin"}
    assert model_route.upstream(env) == (BASE, {"x-goog-api-key": "real"})
    assert model_route.upstream({"PATH": "/bin"}) is None
    pointed = model_route.point(env, "http://127.0.0.1:9/gemini", "cap-1")
    assert pointed == {
        "GEMINI_API_KEY": "cap-1",
        "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9/gemini",
        "PATH": "/bin",
    }
    assert model_route.point(env, "http://127.0.0.1:9/gemini", None) == env


def test_the_scripted_server_finds_the_prompt_past_the_clis_context_and_counts_turns() -> None:
    contents = [
        {"role": "user", "parts": [{"text": "<session_context>\nlinux"}, {"text": "plan it"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command"}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command"}}]},
    ]
    assert prompt_and_turn(contents) == ("plan it", 1)
    resumed = [*contents, {"role": "model", "parts": [{"text": "ok"}]},
               {"role": "user", "parts": [{"text": "again"}]}]  # fmt: skip
    assert prompt_and_turn(resumed) == ("again", 0)


def test_a_turn_whose_key_was_refused_ends_the_session_saying_so(tmp_path: Path) -> None:
    from legion.runtime.gemini.runtime import GeminiRuntime, key_refused
    from legion.runtime.gemini.session import turn_error
    from legion.runtime.headless import turn_state_file

    google = '[API Error: {"error":{"code":401,"message":"API key not valid sk-12"}}]'
    proxy = '[API Error: {"type":"error","error":{"type":"authentication_error","message":"x"}}]'
    assert key_refused(google) == "HTTP 401" and key_refused(proxy) == "HTTP 401"
    assert key_refused('[API Error: {"error":{"code":500}}]') is None
    event = {"type": "result", "status": "error", "error": {"message": google}}
    assert turn_error(event) == google and turn_error({"type": "result"}) is None
    # The turn loop's state file says so; the summary carries it, with none of the API's words.
    home = tmp_path / "home"
    chat = home / "tmp" / "repo" / "chats" / "session-2026-11-29T21-33-1316621d.jsonl"
    chat.parent.mkdir(parents=True)
    chat.write_text("\n".join(CHAT) + "\n")
    link = home / "legion" / "S.jsonl"
    link.parent.mkdir()
    link.symlink_to(chat)
    turn_state_file(link).write_text("refused HTTP 401\n")
    summary = GeminiRuntime().summarize(link)
    assert summary is not None and summary.turn is Turn.ENDED
    assert summary.unreachable == "API Error: HTTP 401"
    turn_state_file(link).write_text("idle\n")
    idle = GeminiRuntime().summarize(link)
    assert idle is not None and idle.unreachable is None


def test_a_role_runs_on_gemini_with_its_model_and_arguments(tmp_path: Path) -> None:
    from legion.config.resolve import resolve_settings
    from legion.core.model import Mode
    from legion.errors import ConfigError
    from legion.runtime.gemini.runtime import open_runtime
    from legion.runtime.gemini.settings import GeminiSettings

    config = tmp_path / "config.toml"
    config.write_text(
        'project_id = "00000000-0000-0000-0000-000000000001"\n'
        'gemini_model = "gemini-3-pro"\ngemini_args = ["--debug"]\n'
        '[runtimes]\nreview = "gemini"\n'
    )
    env = {"XDG_CONFIG_HOME": str(tmp_path / "none"), "LEGION_GEMINI_BIN": "/bin/true"}
    settings = resolve_settings(config, env, trusting=True)
    assert settings.runtime_for("review") == "gemini"
    assert settings.runtime_for("implement") == "claude-code"
    runtime = open_runtime(settings, env, tmp_path / "state")
    argv = runtime.command("S", "review mode", resume=False)
    assert argv[argv.index("--model") + 1] == "gemini-3-pro"
    assert "--gemini-arg=--debug" in argv and argv[-2:] == ["--", "review mode"]
    prompt = runtime.worker_prompt("leg-1", Mode.REVIEW)
    assert prompt == "Activate the legion-worker skill and follow it: review mode for LEG-1"
    config.write_text(config.read_text().replace("gemini-3-pro", "../files"))
    with pytest.raises(ConfigError, match="gemini_model"):
        resolve_settings(config, env, trusting=True).section(GeminiSettings)
