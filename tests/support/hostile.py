"""One hostile corpus for every surface that prints text Legion did not write (issue 24, item
5): what anyone who can comment on Linear or GitHub, or a worker's model, can put in a title,
a body, a comment, a question or an identifier, and what must never reach a terminal raw."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

# Each piece, as an attacker writes it.
CLEAR = "\x1b[2J"  # CSI: erase the screen
TITLE = "\x1b]0;pwned\x07"  # OSC 0: set the window title, BEL-terminated
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: write the clipboard
C1_CSI = "\x9b31m"  # the one-character C1 CSI
BIDI = "\u202eexe.txt"  # right-to-left override: the rest reads backwards
MARKUP = "[red]MARK[/red]"  # rich / Textual markup
LINK = "[link=https://evil.example/]click[/link]"  # a hyperlink (OSC 8) through markup
NUL = "nul\x00byte"
OVERWRITE = "safe\rEVIL"  # carriage return: what follows overwrites the line

PIECES = (CLEAR, TITLE, CLIPBOARD, C1_CSI, BIDI, MARKUP, LINK, NUL, OVERWRITE)
HOSTILE = "x " + " ".join(PIECES) + " y"

# What each piece looks like once escaped: the surface showed it, and showed it inert.
ESCAPED = ("\\x1b[2J", "\\x1b]0;pwned\\x07", "\\x9b31m", "\\u202eexe.txt", "nul\\x00byte")

# What must never be printed raw: C0 controls but newline and tab, DEL, C1 controls, the
# bidirectional overrides and isolates, line and paragraph separators.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def assert_inert(output: str, *, where: str, markup: bool = True, shown: bool = True) -> None:
    """`output` (what a command printed, what a screen shows) holds no raw control, C1 or bidi
    character; with `markup`, the markup pieces are there as text (not interpreted); with
    `shown`, the escaped pieces are there (the surface did print the hostile text)."""
    found = RAW.search(output)
    assert found is None, f"{where}: raw U+{ord(found.group()):04X} in {output!r}"
    if markup:
        for piece in (MARKUP, LINK):
            assert piece in output, f"{where}: {piece!r} not shown as text in {output!r}"
    if shown:
        for piece in ESCAPED:
            assert piece in output, f"{where}: {piece!r} not shown in {output!r}"


def assert_json_inert(output: str, *, where: str) -> Any:
    """JSON output: no raw dangerous character, and the hostile text comes back intact when
    the JSON is read. The parsed data."""
    found = RAW.search(output)
    assert found is None, f"{where}: raw U+{ord(found.group()):04X} in {output!r}"
    data = json.loads(output)
    assert any(HOSTILE in text for text in strings(data)), f"{where}: hostile text lost"
    return data


def strings(data: Any) -> Iterator[str]:
    """Every string in parsed JSON, keys included."""
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield key
            yield from strings(value)
    elif isinstance(data, list):
        for item in data:
            yield from strings(item)
