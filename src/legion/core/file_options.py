"""The `--*-file` options of a `legion` command line (`--reason-file`, `--prompt-file`,
`--body-file`, ...): what a command the daemon runs for a session may not carry, since the
daemon would read the file outside the session's sandbox (issue 35: `legion escalate …
--reason-file ~/.aws/credentials` posted the daemon's view of the file). The session's own
`legion` reads the file, in its sandbox, and sends its text as standard input (`-`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# Every option Legion names `--<what>-file` reads a file (`-`: standard input).
_FILE_OPTION = re.compile(r"--[a-z0-9][a-z0-9-]*-file")
STDIN = "-"


@dataclass(frozen=True, slots=True)
class FileOption:
    at: int  # where the option is in the command line
    name: str  # "--reason-file"
    value: str | None  # the file it names ("-": standard input); None: missing
    joined: bool  # given as `--name=value`, in one argument


def file_options(argv: Sequence[str]) -> list[FileOption]:
    """Every `--*-file` option in `argv`. Every argument is looked at, `--` and option values
    included: a value that only looks like a file option is taken for one (and refused), never
    the other way round."""
    found = []
    at = 0
    while at < len(argv):
        name, joined, value = argv[at].partition("=")
        if _FILE_OPTION.fullmatch(name):
            if joined:
                found.append(FileOption(at, name, value, True))
            else:
                following = argv[at + 1] if at + 1 < len(argv) else None
                found.append(FileOption(at, name, following, False))
        at += 1
    return found


def named_files(argv: Sequence[str]) -> list[FileOption]:
    """The file options of `argv` that name a file, not standard input."""
    return [option for option in file_options(argv) if option.value != STDIN]


def reading_stdin(argv: Sequence[str], option: FileOption) -> list[str]:
    """`argv` with `option` reading standard input instead of its file."""
    changed = list(argv)
    if option.joined:
        changed[option.at] = f"{option.name}={STDIN}"
    elif option.value is None:
        changed.append(STDIN)
    else:
        changed[option.at + 1] = STDIN
    return changed


def refusal(option: FileOption) -> str:
    """Why a command line that names a file is not run by the daemon, in one line."""
    return (
        f"the daemon reads no file for a session: {option.name} {option.value} was refused "
        f"(give {option.name} - and the text on standard input)"
    )
