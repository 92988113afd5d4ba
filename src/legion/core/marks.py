"""What Legion writes into text it shares with people, and how it reads it back: the invisible
marker on every comment it writes, and the shape of a pull request's link. Pure; trackers and
forges both use it."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urlsplit

from legion.core.text import for_display

# How the path of a pull request's page ends: /OWNER/REPO/pull/N (a trailing slash allowed).
PULL_REQUEST_PATH = re.compile(r"/([^/]+)/([^/]+)/pull/([1-9][0-9]{0,8})/?\Z")


# Who Legion's own comments are by (its questions to a human, its notes on an issue).
LEGION_AUTHOR = "legion"


def pull_request_links(urls: Iterable[str]) -> tuple[str, ...]:
    """The URLs among `urls` that look like a pull request's page
    (`https://HOST/OWNER/REPO/pull/N`), each once, in their order."""
    found: dict[str, None] = {}
    for url in (url.strip() for url in urls):
        try:
            parts = urlsplit(url)
        except ValueError:  # not a URL at all (an unclosed IPv6 host)
            continue
        if (
            parts.scheme in ("http", "https")
            and parts.hostname
            and PULL_REQUEST_PATH.search(parts.path)
        ):
            found.setdefault(url)
    return tuple(found)


# Every comment Legion writes carries this invisible marker (an HTML comment: Markdown renderers
# on Linear and GitHub hide it), naming the writer.
_MARKER = re.compile(r"\n*<!-- legion:([A-Za-z0-9_.:-]{1,64}) -->\s*$")


def mark(body: str, author: str) -> str:
    """`body` with Legion's marker for `author` appended."""
    safe = re.sub(r"[^A-Za-z0-9_.:-]", "-", author)[:64] or "legion"
    return f"{body.rstrip()}\n\n<!-- legion:{safe} -->"


class Unmarked(NamedTuple):
    """A comment's body as people read it, and what Legion's markers in it said."""

    body: str  # without either marker
    author: str | None  # who of Legion wrote it, None when Legion did not
    asked: LegionQuestion | None  # the question Legion asked for itself in it, if any


def unmark(body: str) -> Unmarked:
    """`body` without Legion's markers, and what they say."""
    match = _MARKER.search(body)
    if match is None:
        return Unmarked(body, None, None)
    text = body[: match.start()]
    question = _QUESTION.search(text)
    if question is None:
        return Unmarked(text, match.group(1), None)
    figures = (field.split("=", 1) for field in question.group(2).split())
    asked = LegionQuestion(question.group(1), tuple((k, int(v)) for k, v in figures))
    rest = (text[: question.start()].rstrip() + text[question.end() :]).rstrip()
    return Unmarked(rest, match.group(1), asked)


# A question Legion asks a human for itself (its token budget, a worker that keeps dying) says
# so in a second invisible marker, with the figures it will need back, so that what the issue's
# comments mean is read from data, never parsed back from the English around it. Only a comment
# Legion marked as its own can carry one.
# Read only where Legion puts it, last before its own marker: a comment of Legion's may quote
# words it did not write (a worker's question, a check's name, a command's output), and a
# marker hidden in them must not pass for Legion's own question.
_QUESTION = re.compile(
    r"\n*<!-- legion-asked:([a-z_]{1,32})((?: [a-z_]{1,32}=[0-9]{1,20})*) -->\s*\Z"
)


@dataclass(frozen=True)
class LegionQuestion:
    """A question Legion asked for itself: its kind and the figures it carried."""

    kind: str
    figures: tuple[tuple[str, int], ...] = ()

    def figure(self, name: str) -> int | None:
        return dict(self.figures).get(name)


def question_mark(kind: str, **figures: int) -> str:
    """The marker for Legion's own question of `kind`, carrying `figures` (put at the end of
    the body, before Legion's own marker)."""
    fields = "".join(f" {name}={value}" for name, value in figures.items())
    return f"<!-- legion-asked:{kind}{fields} -->"


def defanged(text: str) -> str:
    """`text`, written by a session (whose words may be a stranger's), with every HTML comment
    opener made visible text (`&lt;!--`, which Markdown shows as written): no marker of
    Legion's (its authorship, a question it asked for itself) can be forged in it."""
    return text.replace("<!--", "&lt;!--")


def quoted_span(text: str, limit: int) -> str:
    """`text` that someone else wrote (a child's title, a task a model named), as one inline
    code span in a comment Legion writes: on one line and at most `limit` characters, its
    controls shown as escapes, no backtick to end the span early and no marker to forge. In a
    code span neither GitHub nor Linear makes a mention (`@someone`), a reference (`#12`), a
    link or a heading: the text is only shown."""
    line = " ".join(for_display(text).split())
    # Zero-width characters, direction marks and Unicode tags (which carry text a model reads
    # and a person does not see): shown as escapes, never passed on under Legion's name.
    line = "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) == "Cf" else c for c in line)
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    inside = defanged(line).replace("`", "'")
    return f"`{inside}`"


# A closing word and what it closes, as GitHub and Linear read a pull request's body: "Fixes
# #12", "closes: acme/widgets#3", "Resolves ENG-12", "**Fixing** [ENG-4](…)", "Implements
# ENG-2, ENG-5 and ENG-6", "fixed https://…/issues/4". Between the word and each reference:
# emphasis, a colon, brackets, commas, "and", any spaces (new lines and no-break ones too).
_CLOSING_WORD = (
    r"\b(?:clos(?:e|es|ed|ing)|fix(?:es|ed|ing)?|resolv(?:e|es|ed|ing)"
    r"|complet(?:e|es|ed|ing)|implement(?:s|ed|ing)?)\b"
)
_REFERENCE = r"(?:[\w.-]+/[\w.-]+)?#[0-9]+|https?://[^\s)\]>]+|[A-Za-z][A-Za-z0-9]{0,9}-[0-9]+"
_BETWEEN = r"(?:[\s*_~`:,\[\]()<>]|&|\band\b)*"
_CLOSING = re.compile(rf"{_CLOSING_WORD}((?:{_BETWEEN}(?:{_REFERENCE}))+)", re.IGNORECASE)
_ONE_REFERENCE = re.compile(_REFERENCE)


def inert_closing(text: str, own: str) -> str:
    """A pull request's body a session wrote, closing nothing but its own issue `own`: every
    other reference a closing word governs gets "(not linked)" before it, so GitHub and Linear
    close and link nothing on its word (a merge would otherwise close the issues it names)."""

    def each(reference: re.Match[str]) -> str:
        found = reference.group(0)
        return found if found.upper() == own.upper() else f"(not linked) {found}"

    def kept(match: re.Match[str]) -> str:
        word, tail = match.group(0)[: match.start(1) - match.start(0)], match.group(1)
        inert = _ONE_REFERENCE.sub(each, tail)
        glued = _ONE_REFERENCE.match(tail) is not None and inert != tail  # "Fixes#3"
        return word + (" " if glued else "") + inert

    return _CLOSING.sub(kept, text)


def foreign_references(title: str, own: str) -> list[str]:
    """The issues of `own`'s project (its key) other than `own` that `title` names: what a
    tracker links a pull request to by its title alone."""
    key = own.rsplit("-", 1)[0]
    named = re.findall(rf"(?<![A-Za-z0-9]){re.escape(key)}-[0-9]+(?![0-9])", title, re.I)
    return [name for name in named if name.upper() != own.upper()]
