"""Hostile text: refused where it could deceive, escaped where it is shown."""

from __future__ import annotations

import pytest

from legion.core.text import clean_body, clean_title, for_display
from legion.errors import InputError


@pytest.mark.parametrize("char", ["\u202e", "\u202a", "\u2066", "\u2069", "\u2028", "\u2029"])
def test_titles_refuse_bidi_and_line_separators(char: str) -> None:
    with pytest.raises(InputError) as caught:
        clean_title(f"Fix {char}the thing")
    assert f"U+{ord(char):04X}" in str(caught.value)


def test_undecodable_arguments_are_bad_input_not_a_crash() -> None:
    broken = b"caf\xe9".decode("utf-8", "surrogateescape")
    with pytest.raises(InputError, match="not valid UTF-8"):
        clean_title(broken)
    with pytest.raises(InputError, match="not valid UTF-8"):
        clean_body(broken)


def test_display_escapes_what_would_break_a_line() -> None:
    assert for_display("a\u202eb\u2028c\x1bd") == "a\\u202eb\\u2028c\\x1bd"
    assert for_display("plain — text") == "plain — text"
