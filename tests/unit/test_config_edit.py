"""`legion config set`'s edit of a config file: one key changed, the rest of the file kept."""

from __future__ import annotations

import tomllib

import pytest

from legion.config.files import check_config_key, config_value, with_config_value
from legion.config.settings import SPEC_BY_NAME
from legion.errors import InputError

FILE = """# Legion project settings.
project_id = "c694b4c4-59f1-4f58-8527-a15cf59543e2"
issue_key = "LEG"  # the prefix
tick = 60

[statuses]
todo = "Todo"
"""


def test_a_present_key_is_replaced_in_place_and_comments_kept() -> None:
    text = with_config_value(FILE, "tick", 30)
    assert "tick = 30\n" in text and "tick = 60" not in text
    assert text.startswith("# Legion project settings.\n")
    assert 'issue_key = "LEG"  # the prefix' in text
    assert tomllib.loads(text)["statuses"] == {"todo": "Todo"}


def test_a_new_key_goes_after_the_top_level_keys() -> None:
    text = with_config_value(FILE, "base_branch", "main")
    table = tomllib.loads(text)
    assert table["base_branch"] == "main" and table["statuses"] == {"todo": "Todo"}
    assert text.index("base_branch") < text.index("[statuses]")
    assert with_config_value("", "tick", 5.5) == "tick = 5.5\n"


def test_a_table_is_written_inline_in_place_of_its_section() -> None:
    text = with_config_value(FILE, "statuses", {"todo": "Open"})
    assert "[statuses]" not in text
    assert tomllib.loads(text)["statuses"] == {"todo": "Open"}


def test_a_value_over_several_lines_is_refused_not_mangled() -> None:
    text = 'labels = [\n  "a",\n  "b",\n]\n'
    with pytest.raises(InputError, match="by hand"):
        with_config_value(text, "labels", ["c"])


def test_a_value_is_toml_when_the_setting_takes_it_else_a_string() -> None:
    assert config_value(SPEC_BY_NAME["wip_limit"], "3") == 3
    assert config_value(SPEC_BY_NAME["base_branch"], "main") == "main"
    assert config_value(SPEC_BY_NAME["base_branch"], "123") == "123"
    assert config_value(SPEC_BY_NAME["labels"], '["docs", "bug"]') == ["docs", "bug"]
    with pytest.raises(InputError, match=r"^tick "):
        config_value(SPEC_BY_NAME["tick"], "soon")


def test_keys_are_checked_as_loading_checks_them() -> None:
    with pytest.raises(InputError, match="did you mean 'wip_limit'"):
        check_config_key("wip_limt", repo=True)
    with pytest.raises(InputError, match="--user"):
        check_config_key("store", repo=True)
    with pytest.raises(InputError, match="legion init"):
        check_config_key("project_id", repo=True)
    assert check_config_key("tick", repo=False).name == "tick"
