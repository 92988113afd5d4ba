"""What Legion writes into text it shares with people, and how it reads it back: the invisible
marker on every comment it writes, and the shape of a pull request's link. Pure; trackers and
forges both use it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

# How the path of a pull request's page ends: /OWNER/REPO/pull/N (a trailing slash allowed).
PULL_REQUEST_PATH = re.compile(r"/([^/]+)/([^/]+)/pull/([1-9][0-9]{0,8})/?\Z")


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


def unmark(body: str) -> tuple[str, str | None]:
    """(the body without the marker, the author it names or None when there is none)."""
    match = _MARKER.search(body)
    if match is None:
        return body, None
    return body[: match.start()], match.group(1)
