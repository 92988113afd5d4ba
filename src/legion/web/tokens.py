"""The web view's named tokens (`legion web token --name N`): one per teammate, kept hashed in
the machine's state (`web/tokens.json`, 0600), listed and revoked by name.

A token is 256 random bits, so one SHA-256 of it is as hard to reverse as the token is to
guess: no slow hash is needed, and the file never holds a token that opens the view.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from legion.config.paths import state_home
from legion.core.web_access import Role, token_name_problem
from legion.errors import ConflictError, InputError, NotFoundError
from legion.files.locking import exclusive
from legion.files.private import write_private


def tokens_path(env: Mapping[str, str]) -> Path:
    return state_home(env) / "web" / "tokens.json"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class NamedToken:
    name: str
    role: Role
    created_at: str
    digest: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "role": self.role.value, "created_at": self.created_at}


class TokenStore:
    """The named tokens in `path`; each call reads the file again (a token revoked by
    `legion web revoke` in another process ends its sessions at their next request)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def all(self) -> list[NamedToken]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise ConflictError(
                f"the web view's tokens in {self.path} cannot be read: {exc}"
            ) from None
        found = []
        for entry in raw.get("tokens", []) if isinstance(raw, dict) else []:
            try:
                found.append(
                    NamedToken(
                        str(entry["name"]),
                        Role(entry["role"]),
                        str(entry["created_at"]),
                        str(entry["digest"]),
                    )
                )
            except (KeyError, TypeError, ValueError):
                continue  # an entry written by hand and broken opens nothing
        return found

    def mint(self, name: str, role: Role, *, owner: str | None = None) -> str:
        """A new token for `name` (refused if `name` has one: revoke it first, or is the
        `owner`'s, whoever runs `legion web`); the token itself is returned once, never kept."""
        problem = token_name_problem(name, owner)
        if problem:
            raise InputError(problem)
        token = secrets.token_urlsafe(32)
        with exclusive(self.path.with_suffix(".lock")):
            tokens = self.all()
            if any(t.name == name for t in tokens):
                raise ConflictError(f"{name} has a token already: `legion web revoke {name}` first")
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            tokens.append(NamedToken(name, role, stamp, digest(token)))
            self._write(tokens)
        return token

    def revoke(self, name: str) -> None:
        with exclusive(self.path.with_suffix(".lock")):
            tokens = self.all()
            kept = [t for t in tokens if t.name != name]
            if len(kept) == len(tokens):
                raise NotFoundError(f"no web token is named {name} (`legion web tokens`)")
            self._write(kept)

    def holder(self, token: str) -> NamedToken | None:
        """Whose token `token` is; None for no one's."""
        return self.by_digest(digest(token))

    def by_digest(self, token_digest: str) -> NamedToken | None:
        """The token whose digest is `token_digest`, while it is not revoked."""
        found = None
        for named in self.all():
            if hmac.compare_digest(named.digest, token_digest):
                found = named
        return found

    def _write(self, tokens: list[NamedToken]) -> None:
        entries = [t.to_json() | {"digest": t.digest} for t in tokens]
        write_private(self.path, json.dumps({"tokens": entries}, indent=2) + "\n")
