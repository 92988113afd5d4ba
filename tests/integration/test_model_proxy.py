"""The daemon's model proxy (`legion.proxy.server`) between a client and the scripted model
server, both real HTTP servers on 127.0.0.1: a session's capability stands in for the key, an
unknown or revoked one is refused before anything reaches the model, the stream comes back
as the model sent it, and its usage lands in the ledger by issue and phase."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from legion.backends import open_backends
from legion.config import load_project
from legion.core.budget import Limits, Spent
from legion.proxy.budget import Allowances
from legion.proxy.ledger import Spender, UsageLedger
from legion.proxy.limits import HoldRecord, why_held
from legion.proxy.metering import UsageMeter
from legion.proxy.questions import AskedQuestions
from legion.proxy.server import ModelProxy
from legion.proxy.upstreams import upstreams_from
from legion.relay.capabilities import Capabilities
from legion.runtime.transcript import question_from_input
from legion.store.actionlog import ActionLog
from legion.store.sqlite import SqliteStore
from tests.fakes.model_server import FakeModelServer, Scenario, ask_user_question, text

REQUEST = {
    "model": "claude-opus-5-5",
    "max_tokens": 100,
    "stream": True,
    "messages": [{"role": "user", "content": "hello"}],
}


@pytest.fixture
def db_path(project: Path) -> Path:
    return open_backends(load_project(project)).db.path


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer([Scenario("hello", [[text("hi there")]])]) as server:
        yield server


def start_proxy(db_path: Path, env: dict[str, str], **options: Any) -> ModelProxy:
    proxy = ModelProxy(upstreams_from(env), lambda: SqliteStore(db_path, create=False), **options)
    proxy.start()
    return proxy


def ask(proxy: ModelProxy, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{proxy.url}/v1/messages?beta=true", json=REQUEST, headers=headers)


def test_a_capability_stands_in_for_the_key_and_the_usage_is_recorded(
    db_path: Path, model: FakeModelServer
) -> None:
    capabilities = Capabilities(SqliteStore(db_path))
    token = capabilities.mint("LEG-1", mode="plan", session_id="sid-1")
    proxy = start_proxy(db_path, {"ANTHROPIC_BASE_URL": model.base_url, "ANTHROPIC_API_KEY": "k"})
    try:
        refused = ask(proxy, {"x-api-key": "not-a-capability"})
        assert refused.status_code == 401
        assert refused.json()["error"]["type"] == "authentication_error"
        assert model.requests == []  # nothing reached the model
        answered = ask(proxy, {"authorization": f"Bearer {token}"})
        assert answered.status_code == 200
        assert "event: message_start" in answered.text and "content_block_delta" in answered.text
        meter = UsageMeter(streaming=True)
        meter.feed(answered.content)
        sent = meter.result()
        assert sent is not None and sent.input_tokens > 0 and sent.output_tokens > 0
        [row] = UsageLedger(SqliteStore(db_path)).rows()
        assert (row.issue, row.mode, row.model, row.responses) == ("LEG-1", "plan", sent.model, 1)
        assert (row.used.input, row.used.output) == (sent.input_tokens, sent.output_tokens)
        capabilities.revoke_session("sid-1")  # the worker is retired
        assert ask(proxy, {"authorization": f"Bearer {token}"}).status_code == 401
        assert len(model.requests) == 1
    finally:
        proxy.stop()


def test_a_question_the_model_asks_is_kept_for_the_session_that_asked(db_path: Path) -> None:
    """Claude Code may show a question before its transcript has it: the proxy keeps each
    session's last one as it passes (`legion.proxy.questions`)."""
    question = ask_user_question("Which greeting?", ["Hello", "Hi"])
    scenarios = [
        Scenario("hello", [[text("Let me ask."), question]]),
        Scenario("go on", [[text("Going on.")]]),
    ]
    with FakeModelServer(scenarios) as model:
        token = Capabilities(SqliteStore(db_path)).mint("LEG-1", mode="plan", session_id="sid-q")
        env = {"ANTHROPIC_BASE_URL": model.base_url, "ANTHROPIC_API_KEY": "k"}
        proxy = start_proxy(db_path, env)
        # A main-loop request: it offers tools (one with none is a side request).
        request = REQUEST | {"tools": [{"name": "AskUserQuestion", "input_schema": {}}]}
        as_session = {"x-api-key": token}
        try:
            answered = httpx.post(f"{proxy.url}/v1/messages", json=request, headers=as_session)
            assert answered.status_code == 200 and "AskUserQuestion" in answered.text
            asked = AskedQuestions(SqliteStore(db_path)).last("sid-q")
            assert asked is not None and asked.tool_use_id.startswith("toolu_")
            (item,) = question_from_input(asked.tool_use_id, asked.input).items
            assert (item.question, item.options) == ("Which greeting?", ("Hello", "Hi"))
            assert AskedQuestions(SqliteStore(db_path)).last("another session") is None
            # A side request of the CLI (no tools: a title) says nothing of the question...
            side = httpx.post(f"{proxy.url}/v1/messages", json=REQUEST, headers=as_session)
            assert side.status_code == 200
            assert AskedQuestions(SqliteStore(db_path)).last("sid-q") == asked
            # ...the session's next turn does: answered (or left), it is forgotten.
            next_turn = request | {"messages": [{"role": "user", "content": "go on"}]}
            again = httpx.post(f"{proxy.url}/v1/messages", json=next_turn, headers=as_session)
            assert again.status_code == 200
            assert AskedQuestions(SqliteStore(db_path)).last("sid-q") is None
        finally:
            proxy.stop()


def test_without_a_credential_of_its_own_the_proxy_passes_the_sessions_through_and_meters(
    db_path: Path, model: FakeModelServer
) -> None:
    proxy = start_proxy(db_path, {"ANTHROPIC_BASE_URL": model.base_url})
    try:
        answered = ask(proxy, {"x-api-key": "the-sessions-own", "x-claude-code-session-id": "s-9"})
        assert answered.status_code == 200
        [row] = UsageLedger(SqliteStore(db_path)).rows()
        assert (row.issue, row.mode) == ("", "controller")  # a session Legion has no record of
    finally:
        proxy.stop()


def test_an_unreachable_model_is_a_502_with_the_apis_error_shape(db_path: Path) -> None:
    token = Capabilities(SqliteStore(db_path)).mint("LEG-1", mode="plan", session_id="sid-1")
    env = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "ANTHROPIC_API_KEY": "k"}
    proxy = start_proxy(db_path, env)
    try:
        failed = ask(proxy, {"authorization": f"Bearer {token}"})
        assert failed.status_code == 502
        assert json.loads(failed.text)["error"]["type"] == "api_error"
        assert "k" not in failed.json()["error"]["message"].split()
    finally:
        proxy.stop()


def test_the_apis_refusal_of_the_daemons_key_reaches_the_session_in_the_proxys_words(
    db_path: Path, model: FakeModelServer
) -> None:
    """A provider's "wrong key" answer quotes part of the key it was sent (OpenAI's does; the
    scripted server does too): the session gets the status and error type, never that text."""
    token = Capabilities(SqliteStore(db_path)).mint("LEG-1", mode="plan", session_id="sid-1")
    key = "sk-daemon-secret-0123456789abcdef"
    env = {"ANTHROPIC_BASE_URL": model.base_url, "ANTHROPIC_API_KEY": key}
    proxy = start_proxy(db_path, env)
    model.refuse_next(401)
    try:
        refused = ask(proxy, {"authorization": f"Bearer {token}"})
    finally:
        proxy.stop()
    sent = model.snapshot()[-1].response
    assert key[:7] in json.dumps(sent) and key[-4:] in json.dumps(sent)  # what the API said
    assert refused.status_code == 401
    assert refused.json()["error"]["type"] == "authentication_error"
    assert key[:7] not in refused.text and key[-4:] not in refused.text
    assert "refused the credential" in refused.json()["error"]["message"]


def test_the_daemon_serves_the_proxy_on_the_same_port_and_status_says_who_holds_the_key(
    project: Path, tmp_path: Path, model: FakeModelServer
) -> None:
    """The real daemon (in this process; no Claude Code CLI, so the controller's start fails):
    while it runs, its proxy answers (a stranger is refused) and `legion status` says the
    daemon holds the key; started again, it listens where it did; stopped, it says so."""
    from legion.daemon import Daemon, DaemonConfig
    from legion.proxy import read_access
    from tests.support.cli import run_legion

    tmux_dir = Path(tempfile.mkdtemp(prefix="lgm-"))
    env = dict(os.environ) | {
        "LEGION_TMUX_SOCKET": str(tmux_dir / "sock"),
        "LEGION_TMUX_CONFIG": "/dev/null",
        "LEGION_CLAUDE_BIN": str(tmp_path / "no-such-claude"),
        "ANTHROPIC_BASE_URL": model.base_url,
        "ANTHROPIC_API_KEY": "sk-the-daemons-own",
    }
    loaded = load_project(project, env=env)
    urls: list[str] = []

    def look(backends: object) -> bool:
        access = read_access(loaded.state_dir)
        assert access is not None and access.holds_credential
        urls.append(access.url)
        refused = httpx.post(f"{access.url}/v1/messages", json=REQUEST, headers={"x-api-key": "x"})
        assert refused.status_code == 401
        status = run_legion("status", "--json", cwd=project, env=env)
        assert json.loads(status.stdout)["model_proxy"] == {
            "url": access.url,
            "holds_credential": True,
            "credential_held_for": ["claude-code"],
        }
        assert "the daemon holds the key" in run_legion("status", cwd=project, env=env).stdout
        return True

    try:
        for _ in range(2):
            Daemon(loaded, DaemonConfig(tick=0.2, run_for=20.0, stop_when=look), env).run()
    finally:
        subprocess.run(
            ["tmux", "-S", str(tmux_dir / "sock"), "kill-server"], capture_output=True, check=False
        )
        shutil.rmtree(tmux_dir, ignore_errors=True)
    assert len(urls) == 2 and urls[0] == urls[1]
    stopped = run_legion("status", cwd=project, env=env).stdout
    assert "no daemon runs its proxy, so no session starts" in stopped
    assert (
        json.loads(run_legion("status", "--json", cwd=project, env=env).stdout)["model_proxy"]
        is None
    )


def test_a_spent_budget_refuses_the_next_request_before_it_reaches_the_model(
    db_path: Path, model: FakeModelServer
) -> None:
    """The issue's budget: the request that finds it spent is refused with a message the CLI
    shows (402, not retried), the daemon is told whose it was, and an allowance a human's
    answer gave lets the session go on; the day's budget stops the controller too."""
    capabilities = Capabilities(SqliteStore(db_path))
    token = capabilities.mint("LEG-1", mode="implement", session_id="sid-1")
    told: list[tuple[Spender, Spent]] = []
    env = {"ANTHROPIC_BASE_URL": model.base_url, "ANTHROPIC_API_KEY": "k"}
    limits = Limits(token_budget=10)  # the first answer alone uses more
    proxy = start_proxy(db_path, env, limits=limits, refused=lambda *r: told.append(r))
    as_worker = {"authorization": f"Bearer {token}"}
    try:
        assert ask(proxy, as_worker).status_code == 200
        used = UsageLedger(SqliteStore(db_path)).total(issue="LEG-1")
        assert used >= 10
        refused = ask(proxy, as_worker)
        assert refused.status_code == 402
        error = refused.json()["error"]
        assert error["type"] == "billing_error"
        assert f"LEG-1's token budget is spent ({used:,} of 10 tokens)" in error["message"]
        assert len(model.message_requests()) == 1  # the refused one never reached the model
        [(spender, spent)] = told
        assert (spender.session_id, spender.issue, spent.issue, spent.used) == (
            "sid-1",
            "LEG-1",
            "LEG-1",
            used,
        )
        Allowances(SqliteStore(db_path)).set("LEG-1", used + 10)  # a human said "go on"
        assert ask(proxy, as_worker).status_code == 200
    finally:
        proxy.stop()
    daily = start_proxy(db_path, env, limits=Limits(daily_token_budget=10))
    controller = capabilities.mint(None, mode="controller", session_id="ctl")
    try:
        refused = ask(daily, {"authorization": f"Bearer {controller}"})
        assert refused.status_code == 402
        assert "the daily token budget is spent" in refused.json()["error"]["message"]
        assert why_held(SqliteStore(db_path), Limits(daily_token_budget=10)) is not None
    finally:
        daily.stop()


def test_a_429_holds_every_sessions_requests_until_the_reset_then_all_are_answered(
    db_path: Path, model: FakeModelServer
) -> None:
    """The provider's rate limit is the swarm's: the first request gets a 429 with a reset,
    every request waits it out (none sees the error), dispatch is held meanwhile with one line
    in the log, and the hold ends by itself."""
    token = Capabilities(SqliteStore(db_path)).mint("LEG-1", mode="plan", session_id="sid-1")
    env = {"ANTHROPIC_BASE_URL": model.base_url, "ANTHROPIC_API_KEY": "k"}
    proxy = start_proxy(db_path, env)
    model.refuse_next(429, 1, {"retry-after": "1.5"})
    answers: list[int] = []

    def one() -> None:
        answers.append(ask(proxy, {"authorization": f"Bearer {token}"}).status_code)

    try:
        started = time.monotonic()
        first = threading.Thread(target=one)
        first.start()
        deadline = time.monotonic() + 45
        while why_held(SqliteStore(db_path), Limits()) is None:
            assert time.monotonic() < deadline, "no hold was recorded"
            time.sleep(0.02)
        held = why_held(SqliteStore(db_path), Limits())
        assert held is not None and "rate limited (429)" in held
        others = [threading.Thread(target=one) for _ in range(3)]
        for thread in others:
            thread.start()
        for thread in [first, *others]:
            thread.join(20)
        waited = time.monotonic() - started
    finally:
        proxy.stop()
    assert answers == [200] * 4
    assert waited >= 1.4
    kinds = [request.kind for request in model.snapshot()]
    assert kinds.count("refused") == 1 and len(kinds) == 5
    # None of the held requests went before the reset.
    refused_at = next(r.time for r in model.snapshot() if r.kind == "refused")
    assert all(r.time >= refused_at + 1.4 for r in model.snapshot() if r.kind != "refused")
    assert why_held(SqliteStore(db_path), Limits()) is None
    assert HoldRecord(SqliteStore(db_path)).active() is None
    logged = [e.action for e in ActionLog(SqliteStore(db_path)).tail(100)]
    assert logged.count("model_hold") == 1 and logged.count("model_resume") == 1


def test_a_529_without_a_reset_backs_off_and_goes_on(db_path: Path, model: FakeModelServer) -> None:
    token = Capabilities(SqliteStore(db_path)).mint("LEG-1", mode="plan", session_id="sid-1")
    env = {"ANTHROPIC_BASE_URL": model.base_url, "ANTHROPIC_API_KEY": "k"}
    proxy = start_proxy(db_path, env)
    model.refuse_next(529, 2)  # backoffs of 1 s, then 2 s
    try:
        started = time.monotonic()
        assert ask(proxy, {"authorization": f"Bearer {token}"}).status_code == 200
        assert time.monotonic() - started >= 2.9
    finally:
        proxy.stop()
