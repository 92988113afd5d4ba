"""The GitHub end of the shared GraphQL client: where to send, which token, how errors read.

GitHub answers most failed GraphQL requests with HTTP 200 and `errors`, each naming its
`type` at the top level of the error (`NOT_FOUND`, `RATE_LIMITED`, `FORBIDDEN`,
`UNPROCESSABLE` ...); a refused token is HTTP 401, a spent rate limit 403 (or 200 with
`RATE_LIMITED`) with `x-ratelimit-remaining: 0` and `x-ratelimit-reset`.

The token comes from `GITHUB_TOKEN` or `GH_TOKEN`, else from the GitHub CLI (`gh auth token`).
It goes into the `Authorization` header only: never into a message, a log line, a git URL or
a command line.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from legion.errors import BackendErrorKind, ConfigError
from legion.graphql_client import DEFAULT_TIMEOUT_S, GraphQLClient

DEFAULT_API_URL = "https://api.github.com"
API_URL_VAR = "GITHUB_API_URL"
TOKEN_VARS = ("GITHUB_TOKEN", "GH_TOKEN")
GH_TIMEOUT_S = 5.0  # `gh auth token` reads a file or the keyring: it answers at once or never

_KIND_BY_TYPE: dict[str, BackendErrorKind] = {
    "NOT_FOUND": BackendErrorKind.NOT_FOUND,
    "RATE_LIMITED": BackendErrorKind.RATE_LIMITED,
    "FORBIDDEN": BackendErrorKind.AUTH,
    "INSUFFICIENT_SCOPES": BackendErrorKind.AUTH,
    "UNAUTHORIZED": BackendErrorKind.AUTH,
    "UNPROCESSABLE": BackendErrorKind.INVALID,
    "BAD_REQUEST": BackendErrorKind.INVALID,
    "MAX_NODE_LIMIT_EXCEEDED": BackendErrorKind.INVALID,
    "SERVICE_UNAVAILABLE": BackendErrorKind.TRANSIENT,
    "INTERNAL": BackendErrorKind.TRANSIENT,
    "TIMEOUT": BackendErrorKind.TRANSIENT,
}


def classify(error: Mapping[str, Any]) -> BackendErrorKind | None:
    """The kind of one of GitHub's GraphQL errors; None leaves it to the HTTP status."""
    kind = error.get("type")
    if not isinstance(kind, str):
        extensions = error.get("extensions")
        kind = extensions.get("type") if isinstance(extensions, Mapping) else None
    if isinstance(kind, str) and kind.upper() in _KIND_BY_TYPE:
        return _KIND_BY_TYPE[kind.upper()]
    message = error.get("message")
    if isinstance(message, str):
        lower = message.lower()
        # GitHub's words when a query ran out of time on its side: worth another try.
        if "something went wrong while executing your query" in lower:
            return BackendErrorKind.TRANSIENT
        if "rate limit" in lower:
            return BackendErrorKind.RATE_LIMITED
    return None


def api_base(env: Mapping[str, str]) -> str:
    """The REST base: https://api.github.com, or GitHub Enterprise's https://HOST/api/v3."""
    return (env.get(API_URL_VAR, "").strip() or DEFAULT_API_URL).rstrip("/")


def graphql_url(base: str) -> str:
    """GitHub Enterprise serves GraphQL beside its REST API, at /api/graphql."""
    if base.endswith("/api/v3"):
        return base.removesuffix("/v3") + "/graphql"
    return f"{base}/graphql"


@dataclass(frozen=True)
class Token:
    value: str = field(repr=False)
    source: str  # where it came from, safe to show: a variable's name or "gh auth token"


def find_token(
    env: Mapping[str, str], *, gh: str | None = None, timeout: float = GH_TIMEOUT_S
) -> Token | None:
    """The token from the environment, else from the GitHub CLI when it is installed."""
    for name in TOKEN_VARS:
        value = env.get(name, "").strip()
        if value:
            return Token(value, name)
    binary = gh or shutil.which("gh", path=env.get("PATH"))
    if binary is None:
        return None
    argv = [binary, "auth", "token"]
    host = urlsplit(api_base(env)).hostname or ""
    if host and host != urlsplit(DEFAULT_API_URL).hostname:
        argv += ["--hostname", host]  # GitHub Enterprise: gh keeps a token per host
    try:
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=dict(env), check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    value = result.stdout.strip()
    if result.returncode != 0 or not value or any(c.isspace() for c in value):
        return None
    return Token(value, "gh auth token")


def require_token(env: Mapping[str, str]) -> Token:
    token = find_token(env)
    if token is None:
        raise ConfigError(
            "no GitHub token: set GITHUB_TOKEN or GH_TOKEN, or log in with `gh auth login`"
        )
    return token


def github_client(
    env: Mapping[str, str],
    *,
    token: Token | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> GraphQLClient:
    """A client for the GitHub API the environment names, with its token."""
    token = token or require_token(env)
    return GraphQLClient(
        backend="github",
        url=graphql_url(api_base(env)),
        headers={
            "Authorization": f"Bearer {token.value}",
            "Accept": "application/vnd.github+json",
        },
        classify=classify,
        timeout=timeout,
        sleep=sleep,
    )
