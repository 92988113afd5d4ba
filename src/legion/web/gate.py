"""Who is logged in to the web view: the one-time link `legion web` prints, the named tokens
(`legion web token`), the sessions they became (a random id in an HttpOnly, SameSite=Strict
cookie; kept in this process only, so a restart logs everyone out) and the addresses locked
out after failed logins. What is allowed is `legion.core.web_access`'s to say.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from legion.core.web_access import Role, locked_out, recent_failures
from legion.web.tokens import TokenStore

COOKIE = "legion_web"


@dataclass(slots=True)
class WebSession:
    name: str  # whom the tracker and the action log credit this person's deeds to
    role: Role
    token_name: str | None  # the named token it came from; None: the printed link
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    flash: str = ""  # what the last write did, shown once


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

    def login(self, token: str, address: str) -> tuple[str, WebSession]:
        """A new session for whoever holds `token`: its cookie's value and the session."""
        now = self.clock()
        with self._lock:
            failures = recent_failures(self._failures.get(address, []), now)
            self._failures[address] = failures
            if locked_out(failures, now):
                raise LoginRefused("too many failed logins from this address: try again later")
            session = self._session_for(token)
            if session is None:
                failures.append(now)
                raise LoginRefused(
                    "this link does not log in (used already, or revoked): run `legion web` "
                    "again for a new one, or ask for a token (`legion web token --name YOU`)"
                )
            if self.read_only:
                session.role = Role.VIEWER
            cookie = secrets.token_urlsafe(32)
            self._sessions[cookie] = session
            return cookie, session

    def _session_for(self, token: str) -> WebSession | None:
        if self.link_token is not None and secrets.compare_digest(token, self.link_token):
            self.link_token = None  # the printed link logs in once
            return WebSession(self.owner, Role.OPERATOR, None)
        named = self.tokens.holder(token)
        if named is None:
            return None
        return WebSession(named.name, named.role, named.name)

    def session(self, cookie: str | None) -> WebSession | None:
        """The session of `cookie`; None when there is none, or its token was revoked."""
        if not cookie:
            return None
        with self._lock:
            session = self._sessions.get(cookie)
        if session is None:
            return None
        if session.token_name is not None and not self.tokens.has(session.token_name):
            self.logout(cookie)
            return None
        return session

    def logout(self, cookie: str | None) -> None:
        with self._lock:
            self._sessions.pop(cookie or "", None)
