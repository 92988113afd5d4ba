"""The copy of the user's Legion config a confined session is shown: every setting as the
user wrote it, less what may be a secret (the store URL's password, any setting named or
shaped like a token). Pure: a table in, a table and its TOML text out."""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

# A setting or URL parameter so named holds a secret (`password`, `github_token`, `api_key`);
# `token_budget` does not.
SECRET_NAME = re.compile(
    r"(?i)(^|[_.-])(pass(word|wd)?|pwd|secret|token|credentials?|auth(orization)?|"
    r"(api|access|private)[_-]?key|key)$|password|secret"
)
# A value shaped like a credential: the well-known token prefixes, a bearer header.
SECRET_VALUE = re.compile(
    r"^(gh[pousr]_|github_pat_|sk-|lin_(api|oauth)_|xox[abpr]-|glpat-|AKIA[0-9A-Z]{12})"
    r"|(?i:bearer\s+\S)"
)


def _without_password(url: str) -> str:
    """`url` without its password and the query parameters named like a secret; as it is when
    it is not a URL with a host."""
    try:
        parts = urlsplit(url)
        password = parts.password
        host = parts.hostname
    except ValueError:
        return url
    if not parts.scheme or host is None:
        return url
    netloc = parts.netloc
    if password is not None:
        user, _, rest = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}@{rest}"
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    kept = [(k, v) for k, v in query if not SECRET_NAME.search(k)]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(kept), parts.fragment))


def _kept(value: Any) -> Any | None:
    """`value` with its secrets taken out; None when it is one."""
    if isinstance(value, str):
        return None if SECRET_VALUE.search(value) else _without_password(value)
    if isinstance(value, list):
        items = (_kept(item) for item in value)
        return [item for item in items if item is not None]
    if isinstance(value, Mapping):
        return without_secrets(value)
    return value


def without_secrets(table: Mapping[str, Any]) -> dict[str, Any]:
    """`table` (a TOML document, read) less every setting named like a secret, every value
    shaped like one, and every URL's password, at any depth."""
    kept: dict[str, Any] = {}
    for name, value in table.items():
        if SECRET_NAME.search(name):
            continue
        found = _kept(value)
        if found is not None:
            kept[name] = found
    return kept


def _string(text: str) -> str:
    """A TOML basic string: what is not printable escaped by its code point."""
    escaped = (
        c
        if c.isprintable() and c not in '"\\'
        else f"\\u{ord(c):04x}"
        if ord(c) <= 0xFFFF
        else f"\\U{ord(c):08x}"
        for c in text
    )
    return '"' + "".join(escaped) + '"'


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    if isinstance(value, Mapping):
        pairs = (f"{_string(str(k))} = {_literal(v)}" for k, v in value.items())
        return "{" + ", ".join(pairs) + "}"
    raise TypeError(f"not a TOML value: {type(value).__name__}")


def toml_text(table: Mapping[str, Any]) -> str:
    """`table` as a TOML document (tables written inline), which reads back as `table`."""
    lines = [f"{_string(str(name))} = {_literal(value)}" for name, value in table.items()]
    return "".join(f"{line}\n" for line in lines)
