"""A session's start as pure code (`legion.sessions.session_spec`): the environment it is
launched with, from the dispatcher's, its CLI's, Legion's own variables, its capability and
its way to the model, decided without touching anything."""

from __future__ import annotations

from pathlib import Path

from legion.plugins import CLAUDE_CODE, CODEX
from legion.relay import CAPABILITY_ENV, SOCKET_ENV
from legion.sessions.session_spec import base_environment, with_model_access, with_relay

DISPATCHER = {
    "PATH": "/usr/bin",
    "HOME": "/home/u",
    "TMUX": "/tmp/tmux-0/default,1,0",  # the dispatcher's pane: not the session's
    CAPABILITY_ENV: "the-controllers-capability",  # whoever starts it: its own, not this one
    "LEGION_STORE": "postgresql://u:secret@db/legion",  # the daemon's credentials
    "LEGION_MODE": "controller",
}


def started(**extra: str) -> dict[str, str]:
    return base_environment(
        DISPATCHER,
        {"DISABLE_AUTOUPDATER": "1"},
        repo=Path("/p/repo"),
        wake=Path("/p/state/wake"),
        host="alpha",
        python_dir=Path("/opt/legion/bin"),
        extra={"LEGION_MODE": "implement", "LEGION_ISSUE_ID": "LEG-1", **extra},
    )


def test_a_session_inherits_the_dispatchers_environment_less_what_is_not_its_own() -> None:
    env = started()
    assert env["HOME"] == "/home/u" and env["DISABLE_AUTOUPDATER"] == "1"
    for gone in ("TMUX", CAPABILITY_ENV, "LEGION_STORE"):
        assert gone not in env, gone
    assert env["LEGION_REPO"] == "/p/repo" and env["LEGION_WAKE"] == "/p/state/wake"
    assert env["LEGION_HOST"] == "alpha"
    assert env["PATH"] == "/opt/legion/bin:/usr/bin"  # this Legion's `legion` first
    assert (env["LEGION_MODE"], env["LEGION_ISSUE_ID"]) == ("implement", "LEG-1")


def test_the_relay_and_the_model_proxy_are_added_to_a_copy() -> None:
    env = started()
    relayed = with_relay(env, "its-own", Path("/p/state/relay.sock"))
    assert relayed[CAPABILITY_ENV] == "its-own" and relayed[SOCKET_ENV] == "/p/state/relay.sock"
    assert CAPABILITY_ENV not in env


def test_a_session_keeps_only_its_own_clis_model_key_and_none_when_proxied() -> None:
    env = started() | {"ANTHROPIC_API_KEY": "sk-ant", "OPENAI_API_KEY": "sk-oa"}
    own = with_model_access(CLAUDE_CODE, env, None, None, proxied=False)
    assert own.get("ANTHROPIC_API_KEY") == "sk-ant" and "OPENAI_API_KEY" not in own
    codex = with_model_access(CODEX, env, None, None, proxied=False)
    assert "ANTHROPIC_API_KEY" not in codex and codex.get("OPENAI_API_KEY") == "sk-oa"
    proxied = with_model_access(CLAUDE_CODE, env, None, "token", proxied=True)
    assert "ANTHROPIC_API_KEY" not in proxied and "OPENAI_API_KEY" not in proxied
    assert env["ANTHROPIC_API_KEY"] == "sk-ant"  # the caller's is left as it was
