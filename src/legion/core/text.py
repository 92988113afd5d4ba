"""Validation of user-supplied text: titles, bodies, comments, branch names. Pure."""

from __future__ import annotations

import re

from legion.errors import InputError

MAX_TITLE_CHARS = 256
MAX_BODY_CHARS = 65_536  # GitHub's limit for issue and PR bodies; Linear's is larger

# C0 controls except tab and newline, DEL, and C1 controls: they corrupt terminals and logs.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


# Bidirectional overrides and isolates can make a title read differently from what it is
# ("Trojan Source"); line and paragraph separators break one-item-per-line output.
_INVISIBLE_FORMAT = re.compile("[\u202a-\u202e\u2066-\u2069\u2028\u2029]")
# What Python makes of bytes that are not UTF-8 in arguments (surrogateescape).
_UNDECODABLE = re.compile("[\ud800-\udfff]")


def _reject_controls(what: str, text: str) -> None:
    if _UNDECODABLE.search(text):
        raise InputError(f"{what} is not valid UTF-8")
    match = _CONTROL.search(text)
    if match is not None:
        raise InputError(
            f"{what} contains a control character (U+{ord(match.group()):04X}) at position "
            f"{match.start()}; remove it"
        )


def _reject_invisible_format(what: str, text: str) -> None:
    match = _INVISIBLE_FORMAT.search(text)
    if match is not None:
        raise InputError(
            f"{what} contains a bidirectional or line-separator character "
            f"(U+{ord(match.group()):04X}) at position {match.start()}; remove it"
        )


def for_display(text: str) -> str:
    """`text` as it may reach a terminal: every control character but newline and tab (ESC,
    BEL, CR, NUL, the C1 controls such as CSI U+009B), every bidirectional override and line
    separator, and every lone surrogate shown as an escape (`\\x1b`, `\\u202e`, `\\udc80`).

    The one escaping of text Legion did not write (a tracker's, a forge's, the bus's, a
    transcript's, a log's) wherever it is printed: such text can hold `ESC[2J`, an OSC title
    or clipboard write, or a reordering of what follows. Idempotent: what it returns holds
    none of those characters, so escaping twice changes nothing."""
    return _UNDECODABLE.sub(
        lambda m: f"\\u{ord(m.group()):04x}",
        _INVISIBLE_FORMAT.sub(
            lambda m: f"\\u{ord(m.group()):04x}",
            _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text),
        ),
    )


def for_typing(text: str) -> str:
    """`text` as it may be typed into a session's terminal: a carriage return (which submits
    the prompt, so that what follows would be typed as the next one) a newline, and every other
    control character (ESC, which drives the CLI's keys; NUL; the C1 controls), bidirectional
    override and lone surrogate written out as `for_display` writes them: what a message,
    an answer or a prompt says reaches the session as text it can read, never as keys.
    Idempotent."""
    return for_display(text.replace("\r\n", "\n").replace("\r", "\n"))


# What `json.dumps(..., ensure_ascii=False)` leaves raw that a terminal acts on: it escapes
# only U+0000-U+001F. Inside JSON these characters can only be in strings, where `\\uXXXX`
# means the same character.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")


def for_json(encoded: str) -> str:
    """JSON text (from `json.dumps(..., ensure_ascii=False)`) with every character a terminal
    would act on written as a `\\uXXXX` escape: the same JSON, safe to print."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", encoded)


def clean_title(text: str) -> str:
    title = text.strip()
    if not title:
        raise InputError("the title is empty")
    if "\n" in title or "\r" in title:
        raise InputError("the title must be a single line")
    _reject_controls("the title", title)
    _reject_invisible_format("the title", title)
    if len(title) > MAX_TITLE_CHARS:
        raise InputError(f"the title is {len(title)} characters long (at most {MAX_TITLE_CHARS})")
    return title


def clean_body(text: str, what: str = "the body") -> str:
    body = text.replace("\r\n", "\n")
    if len(body) > MAX_BODY_CHARS:
        raise InputError(f"{what} is {len(body):,} characters long (at most {MAX_BODY_CHARS:,})")
    _reject_controls(what, body)
    return body


def clean_comment(text: str) -> str:
    body = clean_body(text, "the comment")
    if not body.strip():
        raise InputError("the comment is empty")
    return body


# A conservative subset of git-check-ref-format: no option-looking or path-escaping names.
_BRANCH = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)(?!.*@\{)[A-Za-z0-9._/\-]+(?<![./])$")


def clean_branch(name: str) -> str:
    branch = name.strip()
    if not _BRANCH.fullmatch(branch) or branch.endswith(".lock") or len(branch) > 200:
        raise InputError(f"invalid branch name {name!r}")
    return branch


def url_without_secrets(url: str) -> str:
    """`url` as it may be shown: without what may hold a secret (`user:password@`, the query,
    the fragment)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(not a valid URL)"
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


# How much of a CI log `legion pr checks --log` shows: its end, where a failure is told.
LOG_TAIL_LINES = 200
LOG_TAIL_BYTES = 64 * 1024


def log_tail(text: str, *, cut: bool = False) -> tuple[str, bool]:
    """The end of a log as Legion shows it: its last `LOG_TAIL_LINES` lines, and at most
    `LOG_TAIL_BYTES` bytes of UTF-8 (a first line cut short there is left out, unless it is
    the only one: then its end). With whether anything was left out (`cut`: `text` is itself
    the end of a longer log, whose first line may be cut short)."""
    lines = text.splitlines(keepends=True)
    if cut and len(lines) > 1:
        lines = lines[1:]  # the line the download began in the middle of
    if len(lines) > LOG_TAIL_LINES:
        lines, cut = lines[-LOG_TAIL_LINES:], True
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        size += len(line.encode("utf-8", "surrogatepass"))
        if size > LOG_TAIL_BYTES:
            cut = True
            if not kept:  # one line longer than the whole budget: its end
                end = line.encode("utf-8", "surrogatepass")[-LOG_TAIL_BYTES:]
                kept.append(end.decode("utf-8", "ignore"))
            break
        kept.append(line)
    return "".join(reversed(kept)), cut
