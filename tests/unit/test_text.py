"""Hostile text: refused where it could deceive, escaped where it is shown."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legion.core.text import clean_body, clean_title, for_display, for_typing
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


def test_for_display_escapes_the_hostile_corpus_and_keeps_lines() -> None:
    from tests.support.hostile import HOSTILE, assert_inert

    shown = for_display(HOSTILE + "\n\tnext line\udcff")
    assert_inert(shown, where="for_display")
    assert shown.endswith("\n\tnext line\\udcff")  # newline and tab kept; a lone surrogate not
    assert for_display(shown) == shown  # escaping twice changes nothing


def test_for_json_escapes_what_json_leaves_raw_and_reads_back_the_same() -> None:
    import json

    from legion.core.text import for_json
    from tests.support.hostile import HOSTILE, assert_json_inert

    data = {"body": HOSTILE + "\u2028\x7f", "note": "→ ü 漢"}
    encoded = for_json(json.dumps(data, ensure_ascii=False))
    assert_json_inert(encoded, where="for_json")
    assert json.loads(encoded) == data
    assert "→ ü 漢" in encoded  # readable UTF-8 stays


def test_errors_and_the_daemons_output_are_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from legion.cli import _say_error
    from legion.cli.common import escaped_output
    from tests.support.hostile import HOSTILE, assert_inert

    _say_error(f"the tracker said: {HOSTILE}")
    with escaped_output():
        print(f"legion daemon: tick failed: {HOSTILE}", file=sys.stderr)
        print(HOSTILE)
    out, err = capsys.readouterr()
    assert_inert(out, where="daemon stdout")
    assert_inert(err, where="stderr", shown=False)
    assert err.startswith("legion: error: the tracker said: x \\x1b[2J")
    assert len(err.splitlines()) == 2  # the error stays one line


@given(st.text())
def test_typed_text_holds_no_key_a_terminal_acts_on(text: str) -> None:
    """What Legion types into a session (a message, an answer, a prompt) is text: no carriage
    return submits part of it early, no ESC drives the CLI, whatever the text held."""
    typed = for_typing(text)
    assert not any(
        (ord(char) < 0x20 and char not in "\n\t") or 0x7F <= ord(char) <= 0x9F for char in typed
    )
    assert for_typing(typed) == typed


def test_a_carriage_return_becomes_a_newline_and_esc_is_written_out() -> None:
    assert for_typing("line one\r\nline two\rthree\x1b[2J\x03") == (
        "line one\nline two\nthree\\x1b[2J\\x03"
    )
