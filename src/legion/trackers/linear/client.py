"""The Linear end of the shared GraphQL client: where to send, which key, how errors read,
and how a connection is read page after page (`pages`).

Linear answers a failed request with GraphQL errors whose `extensions` carry a `code`
(`RATELIMITED`, `AUTHENTICATION_ERROR`, `FORBIDDEN`, `INPUT_ERROR` ...) and a `type`
("ratelimited", "authentication error", "invalid input" ...), usually with HTTP 400; an
unknown issue is "Entity not found". The personal API key goes in `Authorization` as is
(an OAuth token needs its "Bearer " prefix written into the variable).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from legion.errors import BackendErrorKind, ConfigError
from legion.graphql_client import DEFAULT_TIMEOUT_S, Document, GraphQLClient
from legion.trackers.graphql import paged

DEFAULT_API_URL = "https://api.linear.app/graphql"
API_URL_VAR = "LINEAR_API_URL"
API_KEY_VAR = "LINEAR_API_KEY"

_KIND_BY_CODE: dict[str, BackendErrorKind] = {
    "RATELIMITED": BackendErrorKind.RATE_LIMITED,
    "AUTHENTICATION_ERROR": BackendErrorKind.AUTH,
    "FORBIDDEN": BackendErrorKind.AUTH,
    "ENTITY_NOT_FOUND": BackendErrorKind.NOT_FOUND,
    "NOT_FOUND": BackendErrorKind.NOT_FOUND,
    "INVALID_INPUT": BackendErrorKind.INVALID,
    "INPUT_ERROR": BackendErrorKind.INVALID,
    "GRAPHQL_VALIDATION_FAILED": BackendErrorKind.INVALID,
    "FEATURE_NOT_ACCESSIBLE": BackendErrorKind.AUTH,
    "INTERNAL_SERVER_ERROR": BackendErrorKind.TRANSIENT,
    "LOCK_TIMEOUT": BackendErrorKind.TRANSIENT,
}
# The same, by `extensions.type` (what Linear's own SDK reads).
_KIND_BY_TYPE: dict[str, BackendErrorKind] = {
    "ratelimited": BackendErrorKind.RATE_LIMITED,
    "authentication error": BackendErrorKind.AUTH,
    "forbidden": BackendErrorKind.AUTH,
    "feature not accessible": BackendErrorKind.AUTH,
    "invalid input": BackendErrorKind.INVALID,
    "user error": BackendErrorKind.INVALID,
    "graphql error": BackendErrorKind.INVALID,
    "internal error": BackendErrorKind.TRANSIENT,
    "lock timeout": BackendErrorKind.TRANSIENT,
    "network error": BackendErrorKind.TRANSIENT,
    "bootstrap error": BackendErrorKind.TRANSIENT,
}


def classify(error: Mapping[str, Any]) -> BackendErrorKind | None:
    """The kind of one of Linear's GraphQL errors; None leaves it to the HTTP status."""
    message = error.get("message")
    # "Entity not found: Issue" comes typed as invalid input: it is a missing issue.
    if isinstance(message, str) and message.lower().startswith("entity not found"):
        return BackendErrorKind.NOT_FOUND
    extensions = error.get("extensions")
    if not isinstance(extensions, Mapping):
        return None
    code = extensions.get("code")
    if isinstance(code, str) and code.upper() in _KIND_BY_CODE:
        return _KIND_BY_CODE[code.upper()]
    kind = extensions.get("type")
    if isinstance(kind, str) and kind.lower() in _KIND_BY_TYPE:
        return _KIND_BY_TYPE[kind.lower()]
    return None


def api_key(env: Mapping[str, str]) -> str:
    key = env.get(API_KEY_VAR, "").strip()
    if not key:
        raise ConfigError(
            f"{API_KEY_VAR} is not set: create a personal API key in Linear (Settings > "
            f"Security & access > Personal API keys) and export {API_KEY_VAR}"
        )
    return key


def api_url(env: Mapping[str, str]) -> str:
    return env.get(API_URL_VAR, "").strip() or DEFAULT_API_URL


def linear_client(
    env: Mapping[str, str],
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> GraphQLClient:
    """A client for the Linear API the environment names, with its key."""
    return GraphQLClient(
        backend="linear",
        url=api_url(env),
        headers={"Authorization": api_key(env)},
        classify=classify,
        timeout=timeout,
        sleep=sleep,
    )


def pages(
    client: GraphQLClient, doc: Document, variables: Mapping[str, Any], connection: str
) -> Iterator[dict[str, Any]]:
    """Every node of the connection `connection` a query returns, page after page."""
    return paged(
        lambda after: client.execute(doc, {**variables, "after": after})[connection],
        client.backend,
    )
