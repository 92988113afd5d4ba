"""Capabilities: what a session Legion started may ask the daemon to do on the tracker and forge.

A capability is a random token (`secrets.token_urlsafe(32)`: 256 bits) handed to one session in
its environment (`LEGION_CAPABILITY`) when the session starts, and kept in the project database
only as its SHA-256, with its scope: `issue` (a worker: the identifier of the issue it works
on) or `project` (the controller, whose Oracle runs in the same session). Minting one for a
session revokes the ones minted for that session before (a restarted session has a new
process), and every end of a session revokes its own (`SessionWindows.end`; a session whose
CLI exited by itself, once the daemon sees it: `SessionWindows.end_exited`). Capabilities
outlive the daemon: a daemon started again finds its sessions still running and must still
answer them.

What it protects: a session's commands act only within its scope, whatever the model asks
(a worker can label, comment on and open the pull request of its issue, and read that issue's
parent and children; the rules are in `legion.relay.server`). A token read from a transcript is
worth nothing elsewhere: it works only through the daemon's socket, which only this Unix user
can open, and only for that issue. The hash in the database is not the token: someone who
reads the database cannot use it.

What it does not protect: the boundary is the Unix user. A process of the same user can write
Legion's database (and so mint a capability of any scope), read the socket, or read another
process's environment. A capability narrows what a model that follows its tools can do by
mistake; it is not a sandbox. What stays true regardless: the tracker's and forge's credentials
never leave the daemon, so no session's environment, command line, workspace or transcript
holds one.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from legion.core.model import normalize_identifier
from legion.store import Store, now

# The mode of a workspace setup's capability: what its commands show the egress proxy, and
# nothing else (`Capabilities.lookup`).
SETUP_MODE = "workspace-setup"


def setup_session(issue: str) -> str:
    """The session id a workspace setup's capability is minted for (one run at a time)."""
    return f"setup:{normalize_identifier(issue)}"


@dataclass(frozen=True, slots=True)
class Scope:
    """What a capability covers: one issue (a worker), or the whole project (`issue` None)."""

    issue: str | None
    mode: str = ""  # the worker's mode, or "controller"
    session_id: str = ""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class Capabilities:
    """The capabilities in the project database."""

    def __init__(self, db: Store) -> None:
        self._db = db

    def mint(self, issue: str | None, *, mode: str = "", session_id: str = "") -> str:
        """A new token for session `session_id`, scoped to `issue` (None: the whole project).
        The session's earlier tokens are revoked in the same transaction."""
        identifier = None if issue is None else normalize_identifier(issue)
        token = secrets.token_urlsafe(32)
        with self._db.write() as conn:
            if session_id:
                conn.execute("DELETE FROM capabilities WHERE session_id = ?", (session_id,))
            conn.execute(
                "INSERT INTO capabilities (token_sha256, scope, issue, mode, session_id, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    _digest(token),
                    "project" if identifier is None else "issue",
                    identifier,
                    mode,
                    session_id,
                    now(),
                ),
            )
        return token

    def lookup(self, token: str, *, egress: bool = False) -> Scope | None:
        """The scope of `token`, or None when it is unknown or revoked. (Looked up by its hash:
        the hash of a 256-bit random token gives an attacker timing nothing to work with.) A
        workspace setup's capability (`SETUP_MODE`) is known only to the egress proxy
        (`egress`): the commands it ran (and what they left in the workspace) reach neither
        the relay nor the model with it."""
        if not token:
            return None
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT scope, issue, mode, session_id FROM capabilities WHERE token_sha256 = ?",
                (_digest(token),),
            ).fetchone()
        if row is None:
            return None
        if row["mode"] == SETUP_MODE and not egress:
            return None
        issue = row["issue"] if row["scope"] == "issue" else None
        return Scope(issue=issue, mode=row["mode"], session_id=row["session_id"])

    def revoke_session(self, session_id: str, *, minted_before: str | None = None) -> int:
        """Revoke every token of session `session_id` (`minted_before`: only those minted
        before that instant, a `legion.store.now()`, to the second); how many there were."""
        with self._db.write() as conn:
            if minted_before is None:
                cursor = conn.execute(
                    "DELETE FROM capabilities WHERE session_id = ?", (session_id,)
                )
            else:
                cursor = conn.execute(
                    "DELETE FROM capabilities WHERE session_id = ? AND created_at < ?",
                    (session_id, minted_before),
                )
        return cursor.rowcount
