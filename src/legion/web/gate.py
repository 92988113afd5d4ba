"""Who is logged in to the web view: the one-time link `legion web` prints, the named tokens
(`legion web token`), the sessions they became (a random id in an HttpOnly, SameSite=Strict
cookie; kept in this process only, so a restart logs everyone out) and the addresses locked
out after failed logins. What is allowed is `legion.core.web_access`'s to say.

A session made from a named token holds that token's digest: it ends when that very token is
revoked, even if a new one is made under the same name, and takes its role from it.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from legion.core.web_access import (
    Role,
    address_key,
    locked_out,
    recent_failures,
    session_expired,
    token_shaped,
)
from legion.web.tokens import TokenStore, digest

COOKIE = "legion_web"
# Sessions kept at once, and of one token: past either the least recently used goes (of that
# token when it is the one past its bound).
MAX_SESSIONS = 1000
MAX_SESSIONS_PER_TOKEN = 20


@dataclass(slots=True)
class WebSession:
    name: str  # whom the tracker and the action log credit this person's deeds to
    role: Role
    token_digest: str | None  # the named token it came from; None: the printed link
    created: float  # the clock's, at its login
    seen: float  # the clock's, at its last request
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    flash: str = ""  # what the last write did, shown once

    @property
    def owner(self) -> str:
        """Whose session: its token's (however many times it logged in); the printed link's."""
        return self.token_digest or "link"


class LoginRefused(Exception):
    """Why a login did not take, in a line a person reads."""


class Gate:
    def __init__(
        self,
        tokens: TokenStore,
        owner: str,
        *,
        read_only: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tokens = tokens
        self.owner = owner
        self.read_only = read_only
        self.clock = clock
        self.link_token: str | None = secrets.token_urlsafe(32)
        self._sessions: dict[str, WebSession] = {}
        self._failures: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def login(self, token: str, address: str, *, link_only: bool = False) -> str:
        """A new session for whoever holds `token`: its cookie's value. `link_only`: only the
        printed link logs in (a named token in an address would stay in the browser's
        history: it is pasted into the login form instead)."""
        now = self.clock()
        key = address_key(address)
        with self._lock:
            failures = recent_failures(self._failures.pop(key, []), now)
            if failures:
                self._failures[key] = failures
            if locked_out(failures, now):
                raise LoginRefused("too many failed logins from this address: try again later")
            session = self._session_for(token, now, link_only=link_only)
            if session is None:
                self._failures[key] = [*failures, now]
                raise LoginRefused(
                    "this does not log in (a used link, a revoked or mistyped token): run "
                    "`legion web` again for a new link, or ask for a token (`legion web token "
                    "--name YOU`) and paste it at /login"
                )
            if self.read_only:
                session.role = Role.VIEWER
            cookie = secrets.token_urlsafe(32)
            self._sessions[cookie] = session
            # Past the bounds, the least recently used session of the same token goes: one
            # token logging in without end logs nobody else out.
            same = [c for c, s in self._sessions.items() if s.owner == session.owner]
            if len(same) > MAX_SESSIONS_PER_TOKEN or len(self._sessions) > MAX_SESSIONS:
                pool = same if len(same) > MAX_SESSIONS_PER_TOKEN else list(self._sessions)
                del self._sessions[min(pool, key=lambda c: self._sessions[c].seen)]
            return cookie

    def _session_for(self, token: str, now: float, *, link_only: bool) -> WebSession | None:
        if not token_shaped(token):
            return None
        link = self.link_token
        if link is not None and secrets.compare_digest(token.encode(), link.encode()):
            self.link_token = None  # the printed link logs in once
            return WebSession(self.owner, Role.OPERATOR, None, now, now)
        if link_only:
            return None
        named = self.tokens.holder(token)
        if named is None:
            return None
        return WebSession(named.name, named.role, digest(token), now, now)

    def session(self, cookie: str | None) -> WebSession | None:
        """The session of `cookie`; None when there is none, it expired, or its token was
        revoked. Its role is its token's now."""
        if not cookie:
            return None
        now = self.clock()
        with self._lock:
            session = self._sessions.get(cookie)
            if session is not None and session_expired(session.created, session.seen, now):
                del self._sessions[cookie]
                session = None
        if session is None:
            return None
        if session.token_digest is not None:
            named = self.tokens.by_digest(session.token_digest)
            if named is None:
                self.logout(cookie)
                return None
            session.role = Role.VIEWER if self.read_only else named.role
        session.seen = now
        return session

    def logout(self, cookie: str | None) -> None:
        with self._lock:
            self._sessions.pop(cookie or "", None)
