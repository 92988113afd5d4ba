"""Who may use the web view, and the checks every request to it passes. Pure: the server
(`legion.web`) asks, with the request's headers and the clock given.

- A person is a viewer (reads) or an operator (reads and writes: answers, posts, drains).
- Five failed logins from one address within `LOCKOUT_S` lock that address out until the
  oldest of them is that old.
- Every request names a Host the server answers to (a page of another name is a DNS
  rebinding: a hostile site's name pointed at 127.0.0.1).
- A write, and a live stream, come from the server's own pages: their Origin is the
  server's, or (a same-origin GET sends none) the browser says the request is same-origin.
- A write carries the session's CSRF token.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
from collections.abc import Collection, Sequence
from enum import StrEnum


class Role(StrEnum):
    VIEWER = "viewer"
    OPERATOR = "operator"


def may_write(role: Role) -> bool:
    return role is Role.OPERATOR


# Failed logins from one address that lock it out, and for how long (seconds) each counts.
FAILED_LOGINS_ALLOWED = 5
LOCKOUT_S = 300.0


def locked_out(failures: Sequence[float], now: float) -> bool:
    """Whether an address whose logins failed at `failures` (seconds) may not try now."""
    return sum(1 for at in failures if now - at < LOCKOUT_S) >= FAILED_LOGINS_ALLOWED


def recent_failures(failures: Sequence[float], now: float) -> list[float]:
    """The failures that still count (the rest are forgotten)."""
    return [at for at in failures if now - at < LOCKOUT_S]


# A session ends after this long unused, and this long after its login, whatever its use
# (seconds): a cookie that leaked (browsers send it to every port of the host) dies with it.
IDLE_S = 8 * 3600.0
MAX_AGE_S = 24 * 3600.0


def session_expired(created: float, seen: float, now: float) -> bool:
    return now - seen > IDLE_S or now - created > MAX_AGE_S


def address_key(address: str) -> str:
    """Whose failed logins count together: every loopback address is one (127.0.0.2 is this
    machine as much as 127.0.0.1 is)."""
    return "loopback" if is_loopback(address) else address


# What a token is made of (`secrets.token_urlsafe`); anything else is no token of ours.
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{16,128}")


def token_shaped(token: str) -> bool:
    return TOKEN_SHAPE.fullmatch(token) is not None


# A token's name: what the action log and the tracker credit its holder's deeds to.
TOKEN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")


def token_name_problem(name: str, owner: str | None = None) -> str | None:
    """Why `name` cannot name a token, or None. `owner`: the name the printed link's holder
    writes under (a teammate's token under it would make two people one in the log)."""
    if not TOKEN_NAME.fullmatch(name):
        return (
            f"{name!r} cannot name a token: 1 to 40 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    if owner is not None and name.lower() == owner.lower():
        return f"{name} is the name of whoever runs `legion web`: a teammate's token takes theirs"
    return None


def login_navigation(fetch_site: str | None, fetch_dest: str | None) -> bool:
    """Whether a request of the login link is a person opening it (typed, pasted, clicked:
    a top-level navigation), not a part of some page (an image, a fetch, a frame) that
    could spend the address's failed logins. A browser says which (`Sec-Fetch-*`); a client
    that says nothing (an older browser, curl) is taken as a person."""
    if fetch_site is None:
        return True
    return fetch_site == "none" or fetch_dest == "document"


MAX_ID = 2**63 - 1


def record_id(text: str) -> int | None:
    """A stored record's id as a form sends it: ASCII digits within a 64-bit integer."""
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        return None
    number = int(text)
    return number if 0 < number <= MAX_ID else None


def is_loopback(host: str) -> bool:
    """Whether the address `host` (a name: "localhost") is this machine alone."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def served_hosts(bind: str, port: int, extra: Collection[str] = ()) -> frozenset[str]:
    """The Host headers the server answers to: its address and port, `localhost` too on a
    loopback address, and the names (`name` or `name:port`) it was told it is reached by."""
    shown = f"[{bind}]" if ":" in bind and not bind.startswith("[") else bind
    names = {f"{shown}:{port}".lower()}
    if is_loopback(bind):
        names |= {f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"}
    for name in extra:
        if ":" in name.strip("[]"):
            names.add(name.lower())
        else:  # reached through a proxy on its own port: a browser leaves out 443 and 80
            names |= {name.lower(), f"{name}:{port}".lower()}
    return frozenset(names)


def host_allowed(host: str | None, allowed: Collection[str]) -> bool:
    return host is not None and host.lower() in allowed


def same_origin(
    origin: str | None, fetch_site: str | None, host: str, scheme: str, *, write: bool
) -> bool:
    """Whether a request comes from the server's own pages. A browser sends Origin with every
    write; a same-origin GET (a live stream's) may carry none, and then its Sec-Fetch-Site
    must not say it comes from elsewhere."""
    if origin is not None:
        return origin.lower() == f"{scheme}://{host}".lower()
    if write:
        return False
    return fetch_site in (None, "same-origin", "none")


def csrf_matches(expected: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())
