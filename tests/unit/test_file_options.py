"""`legion.core.file_options`: every `--*-file` option of a command line is found, in either
form and wherever it stands, so the daemon never reads a file a session named."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from legion.core.file_options import FileOption, file_options, named_files, reading_stdin

ARGS = st.lists(
    st.sampled_from(["--reason", "x", "-", "--", "--reason-file", "--body-file=y", "LEG-1"]),
    max_size=8,
)


def test_both_forms_are_found_and_stdin_is_not_a_file() -> None:
    argv = ["escalate", "LEG-1", "--reason-file", "/etc/passwd", "--body-file=-"]
    assert file_options(argv) == [
        FileOption(2, "--reason-file", "/etc/passwd", False),
        FileOption(4, "--body-file", "-", True),
    ]
    assert [option.name for option in named_files(argv)] == ["--reason-file"]
    assert reading_stdin(argv, named_files(argv)[0])[3] == "-"


def test_an_option_hidden_behind_a_separator_or_as_a_value_is_still_found() -> None:
    assert named_files(["resume", "--reason", "--", "--prompt-file", "~/.ssh/id_ed25519"])
    assert named_files(["resume", "--prompt", "--prompt-file=~/.ssh/id_ed25519"])


@given(ARGS)
def test_after_reading_stdin_no_file_is_named(argv: list[str]) -> None:
    named = named_files(argv)
    if len(named) == 1:
        assert named_files(reading_stdin(argv, named[0])) == []
