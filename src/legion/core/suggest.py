"""What a name nobody knows was likely meant to be: the closest known name (`difflib`), for a
"did you mean" in the one line that refuses it. Pure."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# How alike a name must be to a known one to be offered (difflib's ratio): a letter left out,
# doubled or swapped in a word of five or more is well above it; an unrelated word is below.
CUTOFF = 0.75


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known name `word` most likely meant, or None when none is close."""
    found = difflib.get_close_matches(word, list(known), n=1, cutoff=CUTOFF)
    return found[0] if found else None


def did_you_mean(word: str, known: Iterable[str], *, quote: str = '"') -> str:
    """`: did you mean "name"?` for the closest known name, or "" when none is close."""
    match = closest(word, known)
    return "" if match is None else f": did you mean {quote}{match}{quote}?"
