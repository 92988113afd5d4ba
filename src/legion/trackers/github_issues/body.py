"""What Legion reads from and writes into a GitHub issue's body, where GitHub's published
schema has no field for it: the `Parent: KEY-N (#N)` line of a sub-issue and the
`Blocked by #N` lines of its blockers (pure text)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_PARENT_LINE = re.compile(
    r"^Parent:[ \t]*(?:[A-Za-z][A-Za-z0-9]{0,9}-([1-9][0-9]{0,8})|#([1-9][0-9]{0,8}))\b.*$",
    re.MULTILINE | re.IGNORECASE,
)


_BLOCKED_LINE = re.compile(
    r"^[ \t]*Blocked[ \t]+by:?[ \t]*(?:[A-Za-z][A-Za-z0-9]{0,9}-([1-9][0-9]{0,8})"
    r"(?:[ \t]*\(#[1-9][0-9]{0,8}\))?|#([1-9][0-9]{0,8}))[ \t]*$",
    re.MULTILINE | re.IGNORECASE,
)


def inert_relations(body: str) -> str:
    """`body` with each line that would read as a relation (`Parent:`, `Blocked by`) quoted
    (`> `): a relation is set by the arguments Legion checks (`--parent`, `--blocked-by`),
    never by the words of a body, which a session steered by a stranger may write."""

    def quoted(match: re.Match[str]) -> str:
        return "> " + match.group(0)

    return _BLOCKED_LINE.sub(quoted, _PARENT_LINE.sub(quoted, body))


def blocker_numbers(body: str) -> list[int]:
    """The issue numbers the body's `Blocked by #N` lines name, each once, in order."""
    found = (int(m.group(1) or m.group(2)) for m in _BLOCKED_LINE.finditer(body))
    return list(dict.fromkeys(found))


def _blocker_line(line: str) -> int | None:
    match = _BLOCKED_LINE.fullmatch(line)
    return None if match is None else int(match.group(1) or match.group(2))


def split_blockers(body: str) -> str:
    """The body without the run of `Blocked by` lines that ends it (where Legion writes them);
    such a line within a person's text stays."""
    lines = body.rstrip().split("\n")
    end = len(lines)
    while end > 0 and _blocker_line(lines[end - 1]) is not None:
        end -= 1
    return body if end == len(lines) else "\n".join(lines[:end]).rstrip()


def with_blockers(body: str, add: Sequence[int], remove: Iterable[int] = ()) -> str:
    """`body` with a `Blocked by #N` line for each of `add` it lacks, before a final `Parent:`
    line, and without any line naming one of `remove`."""
    text = split_parent(body)[0]
    parent_tail = body[len(text) :] if text != body else ""
    dropped = set(remove)
    kept = [line for line in text.split("\n") if _blocker_line(line) not in dropped]
    core = "\n".join(kept)
    present = set(blocker_numbers(core))
    tail_text = split_blockers(core)
    tail_lines = [line.strip() for line in core[len(tail_text) :].split("\n") if line.strip()]
    tail_lines += [f"Blocked by #{n}" for n in dict.fromkeys(add) if n not in present]
    parent_line = parent_tail.strip()
    if not tail_lines:
        if not parent_line:
            return tail_text
        return f"{tail_text.rstrip()}\n\n{parent_line}" if tail_text.strip() else parent_line
    block = "\n".join(tail_lines) + (f"\n{parent_line}" if parent_line else "")
    return f"{tail_text.rstrip()}\n\n{block}" if tail_text.strip() else block


def split_parent(body: str) -> tuple[str, int | None]:
    """(the body without a final "Parent:" line, the parent's number from the last such line)."""
    matches = list(_PARENT_LINE.finditer(body))
    if not matches:
        return body, None
    last = matches[-1]
    number = int(last.group(1) or last.group(2))
    if body[last.end() :].strip():
        return body, number  # a person's line within the text: the text stays whole
    return body[: last.start()].rstrip(), number


def with_parent(body: str, key: str, number: int) -> str:
    line = f"Parent: {key}-{number} (#{number})"
    return f"{body.rstrip()}\n\n{line}" if body.strip() else line
