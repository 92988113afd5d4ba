"""Which model keys a session of each CLI is kept from (`legion.proxy.model_key_variables`):
another CLI's always, its own when the daemon's proxy holds it. Found by the demo on mixed
runtimes, where a Claude Code controller held Codex's key and a Codex implementer Claude's."""

from __future__ import annotations

from pathlib import Path

from legion.demo.responses_server import API_KEY_ENV, codex_config_toml
from legion.plugins import CLAUDE_CODE, CODEX
from legion.proxy import CLAUDE_CREDENTIALS, model_key_variables


def test_each_cli_is_kept_from_the_others_key(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(codex_config_toml("http://127.0.0.1:9"))
    env = {"CODEX_HOME": str(tmp_path)}
    every = model_key_variables(env)
    assert every == {*CLAUDE_CREDENTIALS, API_KEY_ENV}
    assert model_key_variables(env, besides=CLAUDE_CODE) == {API_KEY_ENV}
    assert model_key_variables(env, besides=CODEX) == set(CLAUDE_CREDENTIALS)


def test_a_codex_home_that_cannot_be_read_names_only_claudes(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("this is [not toml")
    env = {"CODEX_HOME": str(tmp_path)}
    assert model_key_variables(env) == set(CLAUDE_CREDENTIALS)
    assert model_key_variables(env, besides=CLAUDE_CODE) == set()
