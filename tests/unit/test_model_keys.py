"""Which model keys a session of each CLI is kept from (`legion.proxy.model_key_variables`,
the rule in `legion.core.model_keys`): another CLI's always, another provider's always (a Codex
on a provider other than `openai` has no use for `OPENAI_API_KEY`), its own when the daemon's
proxy holds it. Found by the demo on mixed runtimes, where a Claude Code controller held Codex's
key and a Codex implementer Claude's."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from legion.core.model_keys import withheld_keys
from legion.demo.codex_config import API_KEY_ENV, codex_config_toml
from legion.plugins import CLAUDE_CODE, CODEX, GEMINI
from legion.proxy import model_key_variables
from legion.runtime.claude.paths import CREDENTIAL_VARIABLES as CLAUDE_CREDENTIALS
from legion.runtime.codex.provider import OPENAI_KEY_VARIABLES
from legion.runtime.gemini.model_route import KEY_VARIABLES as GEMINI_KEY_VARIABLES

OPENAI_KEYS = set(OPENAI_KEY_VARIABLES)
GEMINI_KEYS = set(GEMINI_KEY_VARIABLES)


def test_each_cli_is_kept_from_the_others_key(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(codex_config_toml("http://127.0.0.1:9"))
    env = {"CODEX_HOME": str(tmp_path)}
    every = model_key_variables(env)
    assert every == {*CLAUDE_CREDENTIALS, *OPENAI_KEYS, API_KEY_ENV, *GEMINI_KEYS}
    assert model_key_variables(env, besides=CLAUDE_CODE) == {
        *OPENAI_KEYS,
        API_KEY_ENV,
        *GEMINI_KEYS,
    }
    # Its provider is not `openai`: OpenAI's key is not its own.
    assert model_key_variables(env, besides=CODEX) == {
        *CLAUDE_CREDENTIALS,
        *OPENAI_KEYS,
        *GEMINI_KEYS,
    }
    assert model_key_variables(env, besides=GEMINI) == {
        *CLAUDE_CREDENTIALS,
        *OPENAI_KEYS,
        API_KEY_ENV,
    }
    for runtime in (CLAUDE_CODE, CODEX, GEMINI):
        assert model_key_variables(env, besides=runtime, proxied=True) == every


def test_a_codex_on_openai_keeps_openais_key_unless_the_proxy_holds_it(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('model = "gpt-5"\n')
    env = {"CODEX_HOME": str(tmp_path)}
    assert model_key_variables(env, besides=CODEX) == {*CLAUDE_CREDENTIALS, *GEMINI_KEYS}
    assert model_key_variables(env, besides=CODEX, proxied=True) == {
        *CLAUDE_CREDENTIALS,
        *OPENAI_KEYS,
        *GEMINI_KEYS,
    }


def test_a_codex_home_that_cannot_be_read_names_what_is_known(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("this is [not toml")
    env = {"CODEX_HOME": str(tmp_path)}
    assert model_key_variables(env) == {*CLAUDE_CREDENTIALS, *OPENAI_KEYS, *GEMINI_KEYS}
    assert model_key_variables(env, besides=CLAUDE_CODE) == OPENAI_KEYS | GEMINI_KEYS


names = st.sets(st.sampled_from(["A", "B", "C", "D"]))


@given(every=names, own=names, proxied=st.booleans())
def test_only_a_sessions_own_key_is_ever_left_and_never_when_proxied(
    every: set[str], own: set[str], proxied: bool
) -> None:
    withheld = withheld_keys(every, own, proxied=proxied)
    assert withheld <= every
    assert every - withheld <= (set() if proxied else own)
