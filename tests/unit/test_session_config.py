"""The copy of the user's Legion config a confined session is shown
(`legion.core.session_config`): every setting less what may be a secret, written so that it
reads back as it was."""

from __future__ import annotations

import tomllib
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from legion.core.session_config import toml_text, without_secrets


def test_the_store_urls_password_and_secret_parameters_go() -> None:
    url = "postgresql://alice:pw%40x@db.example:5432/legion?sslmode=require&password=pw2"
    assert without_secrets({"store": url}) == {
        "store": "postgresql://alice@db.example:5432/legion?sslmode=require"
    }


def test_settings_named_or_shaped_like_a_token_go_and_budgets_stay() -> None:
    table = {
        "github_token": "x",
        "api_key": "x",
        "password": "x",
        "token_budget": 100,
        "daily_token_budget": 1000,
        "claude_args": ["--verbose", "sk-ant-api03-abc", "Bearer abc"],
        "statuses": {"todo": "Todo", "secret": "x"},
        "tracker": "ghp_abcdef",
    }
    assert without_secrets(table) == {
        "token_budget": 100,
        "daily_token_budget": 1000,
        "claude_args": ["--verbose"],
        "statuses": {"todo": "Todo"},
    }


values: st.SearchStrategy[Any] = st.recursive(
    st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@given(st.dictionaries(st.text(max_size=10), values, max_size=5))
def test_what_is_written_reads_back_as_it_was(table: dict[str, Any]) -> None:
    assert tomllib.loads(toml_text(table)) == table
