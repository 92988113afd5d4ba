"""What the model proxy forwards, and nothing else. Pure: a request's facts in, the URL and
headers it goes upstream with out, or why it is refused.

A session's CLI is run by a model that reads text strangers wrote, so everything in its request
is the attacker's: the request target, the method, every header, the body's length. The proxy
adds the daemon's credential to what it forwards, so what it forwards is bounded here:

- **origin-form targets only** (`/path?query`): a target such as `@host:port/x` or an absolute
  URL would otherwise join the upstream's base into a URL of the attacker's choosing;
- **an allow-list of routes per API a runtime's CLI speaks** (method, path, query; `APIS`, which
  each runtime's `ModelRoute` in `legion.plugins` names): what the pinned CLIs were seen
  to send (docs/claude-code-cli.md, docs/codex-cli.md, docs/gemini-cli.md), so that batches,
  files or another API's endpoints cannot be reached with the key, and every forwarded
  request is a model call the budgets see;
- **the joined URL checked** against the upstream's scheme, host and port (and path prefix);
- **a header allow-list**: only the headers the CLIs send that the API reads;
- **a body length given, and capped** (no chunked request bodies, no negative or huge length).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# Anthropic's Messages API takes at most 32 MB a request; nothing a CLI sends is larger.
MAX_BODY = 32 * 1024 * 1024

# What the query of an allowed path may be: none, or Claude Code's `beta=true`.
_NO_QUERY = frozenset({""})
_BETA_QUERY = frozenset({"", "beta=true"})
# An origin-form target's characters (RFC 3986 pchar, `/`, `?` and the query's): no space, no
# control character, no `\` or `#`, nothing a URL parser might read another way.
_ORIGIN_FORM = re.compile(r"/[A-Za-z0-9\-._~!$&'()*+,;=:@%/?]*")


# What `{model}` in a route's path stands for: a model's name (`gemini-2.5-pro`).
_MODEL = "{model}"
_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True, slots=True)
class Route:
    """One request a runtime's CLI sends: its method, its path under the upstream's base (a
    `{model}` in it stands for a model's name: Gemini's API names the model in the path), the
    query strings it may carry, whether its answer reports usage (`metered`: a response that
    does not is recorded as unread; count_tokens is free and reports none), and whether its
    answer is a stream (`streams`; None: the body's `"stream": true` says)."""

    method: str
    path: str
    queries: frozenset[str] = _NO_QUERY
    metered: bool = True
    streams: bool | None = None

    def matches(self, path: str) -> bool:
        if _MODEL not in self.path:
            return path == self.path
        head, _, tail = self.path.partition(_MODEL)
        if not (path.startswith(head) and path.endswith(tail)):
            return False
        return bool(_MODEL_NAME.fullmatch(path[len(head) : len(path) - len(tail)]))


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is not forwarded: the HTTP status, the API's error type, one line."""

    status: int
    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class Forward:
    """A request allowed: its route and the URL it goes to."""

    route: Route
    url: str


CLAUDE_ROUTES = (
    Route("POST", "/v1/messages", _BETA_QUERY),
    Route("POST", "/v1/messages/count_tokens", _BETA_QUERY, metered=False),
)
CODEX_ROUTES = (Route("POST", "/responses"),)
# Gemini's model turns stream (`alt=sse`); its side requests (the model router's) do not.
GEMINI_ROUTES = (
    Route(
        "POST", "/v1beta/models/{model}:streamGenerateContent", frozenset({"alt=sse"}), True, True
    ),
    Route("POST", "/v1beta/models/{model}:generateContent", streams=False),
    Route("POST", "/v1beta/models/{model}:countTokens", metered=False, streams=False),
)

# The request headers forwarded (lower case), by name and by prefix; any other is dropped.
_COMMON_HEADERS = frozenset({"accept", "content-type", "user-agent"})
CLAUDE_HEADERS = _COMMON_HEADERS | {
    "anthropic-beta",
    "anthropic-dangerous-direct-browser-access",
    "anthropic-version",
    "x-app",
    "x-claude-code-session-id",
}
CLAUDE_HEADER_PREFIXES = ("x-stainless-",)
CODEX_HEADERS = _COMMON_HEADERS | {
    "originator",
    "session-id",
    "session_id",
    "thread-id",
    "conversation_id",
    "x-client-request-id",
    "openai-beta",
}
CODEX_HEADER_PREFIXES = ("x-codex-",)
# Not `x-gemini-api-privileged-user-id`: the install's own id, which the API does not need.
GEMINI_HEADERS = _COMMON_HEADERS | {"x-goog-api-client"}
# A session's own credential: forwarded only when the daemon holds none (it passes through).
CREDENTIAL_HEADERS = frozenset({"x-api-key", "authorization", "x-goog-api-key"})


# Body fields that have the provider act for the session beyond answering it: connect to an MCP
# server or run a container of its choosing (an outbound channel from a session that has no
# network), or run a job in the background whose answer reports no usage. No pinned CLI sends
# them.
CLAUDE_REFUSED_FIELDS = ("mcp_servers", "container")
CODEX_REFUSED_FIELDS = ("background",)
# Tool types the provider runs itself against a server the request names.
CODEX_REFUSED_TOOLS = frozenset({"mcp"})
# Gemini's tools the provider runs itself (a tool is `{"<kind>": {...}}`): fetching a URL the
# request names, searching the web, running code. The CLI's own web tools ask for search in a
# request of their own; refused, they fail, and the session has no way out through them.
GEMINI_REFUSED_TOOLS = frozenset(
    {"urlContext", "googleSearch", "googleSearchRetrieval", "codeExecution", "computerUse"}
)


@dataclass(frozen=True, slots=True)
class Api:
    """What one runtime's CLI may send through the proxy."""

    routes: tuple[Route, ...]
    headers: frozenset[str]
    header_prefixes: tuple[str, ...]
    refused_fields: tuple[str, ...] = ()
    refused_tools: frozenset[str] = frozenset()
    # The header its CLI names its session in: how a session whose own login passes through
    # (the daemon holds no key, so no capability says whose it is) is known; "": none.
    session_header: str = ""


CLAUDE_API = Api(
    CLAUDE_ROUTES,
    CLAUDE_HEADERS,
    CLAUDE_HEADER_PREFIXES,
    CLAUDE_REFUSED_FIELDS,
    session_header="x-claude-code-session-id",
)
CODEX_API = Api(
    CODEX_ROUTES,
    CODEX_HEADERS,
    CODEX_HEADER_PREFIXES,
    CODEX_REFUSED_FIELDS,
    CODEX_REFUSED_TOOLS,
)

GEMINI_API = Api(GEMINI_ROUTES, GEMINI_HEADERS, (), refused_tools=GEMINI_REFUSED_TOOLS)

# The route table: each API a runtime's CLI speaks, by the name its `ModelRoute.api` gives
# (`legion.plugins`). A new runtime's CLI that speaks another API adds its entry here.
APIS: Mapping[str, Api] = {
    "anthropic-messages": CLAUDE_API,
    "openai-responses": CODEX_API,
    "gemini-generate-content": GEMINI_API,
}


def runtime_refusal(served_runtime: str, session_runtime: str) -> Refusal | None:
    """Why a session may not use the API the proxy serves for `served_runtime` at the path it
    asked: it runs another runtime (a Claude Code session's capability on Codex's provider,
    or the other way round: another provider, another key, routes its own CLI never sends).
    A session whose runtime Legion has not recorded ("") is not refused here."""
    if not session_runtime or session_runtime == served_runtime:
        return None
    return Refusal(
        403,
        "permission_error",
        f"Legion's model proxy: this session runs {session_runtime}, not {served_runtime}",
    )


# Upstream answers whose body Legion replaces: a provider's "wrong key" message quotes part of
# the key it was sent (OpenAI's does), which is the daemon's, never the session's to read.
KEY_REFUSED_STATUSES = {401: "authentication_error", 403: "permission_error"}


def upstream_key_refusal(status: int) -> Refusal | None:
    """What a session is told in place of the API's own answer when the API refused the key
    the daemon holds: the status and the error type, in the proxy's own words."""
    kind = KEY_REFUSED_STATUSES.get(status)
    if kind is None:
        return None
    return Refusal(
        status,
        kind,
        f"the model API refused the credential Legion's daemon holds ({status}): "
        "check the key where `legion start` runs, then start it again",
    )


def body_refusal(api: Api, body: Mapping[str, Any]) -> Refusal | None:
    """Why a request's JSON body is not forwarded, if it asks the provider to reach a server
    or run something for the session (`CLAUDE_REFUSED_FIELDS`, `CODEX_REFUSED_FIELDS`)."""
    asked = [field for field in api.refused_fields if field in body]
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") in api.refused_tools:
            asked.append(f"a {tool['type']} tool")
        # Gemini names a tool's kind by its key (`{"googleSearch": {}}`).
        asked += [f"a {key} tool" for key in tool if key in api.refused_tools]
    if not asked:
        return None
    return Refusal(
        400, "invalid_request_error", f"Legion's model proxy does not forward {', '.join(asked)}"
    )


def _refused_target(target: str) -> Refusal:
    shown = target if len(target) <= 80 else target[:80] + "…"
    return Refusal(
        400,
        "invalid_request_error",
        f"Legion's model proxy takes only a path as the request target, not {shown!r}",
    )


def forward(api: Api, base_url: str, method: str, target: str) -> Forward | Refusal:
    """Where a request for `target` (the path under the proxy's mount point for this API, as
    the request line has it) goes on `base_url`, if `api` allows it."""
    if not _ORIGIN_FORM.fullmatch(target) or target.startswith("//"):
        return _refused_target(target)
    path, _, query = target.partition("?")
    route = next((r for r in api.routes if r.matches(path)), None)
    if route is None:
        return Refusal(404, "not_found_error", f"Legion's model proxy does not forward {path}")
    if method != route.method:
        return Refusal(
            405, "invalid_request_error", f"Legion's model proxy takes only {route.method} {path}"
        )
    if query not in route.queries:
        return Refusal(
            400, "invalid_request_error", f"Legion's model proxy does not forward {path}?{query}"
        )
    url = base_url.rstrip("/") + target
    if not same_endpoint(base_url, url, path):
        return _refused_target(target)
    return Forward(route, url)


def same_endpoint(base_url: str, url: str, path: str) -> bool:
    """Whether `url` is `path` on `base_url`'s scheme, host and port, under its path: the check
    that whatever was joined, the credential goes only where the user configured it."""
    try:
        base, joined = urlsplit(base_url), urlsplit(url)
        ports = base.port, joined.port
    except ValueError:
        return False
    return (
        joined.scheme == base.scheme
        and joined.hostname == base.hostname
        and ports[0] == ports[1]
        and joined.username is None
        and joined.password is None
        and not joined.fragment
        and joined.path == base.path.rstrip("/") + path
    )


def body_length(content_length: str | None, transfer_encoding: str | None) -> int | Refusal:
    """The length of a request's body from its headers: given, a plain decimal, at most
    `MAX_BODY`."""
    if transfer_encoding is not None:
        return Refusal(
            411, "invalid_request_error", "Legion's model proxy takes no chunked request body"
        )
    if content_length is None:
        return 0
    value = content_length.strip()
    if not value.isdigit() or not value.isascii():
        return Refusal(
            400, "invalid_request_error", "Legion's model proxy: the Content-Length is not a number"
        )
    length = int(value)
    if length > MAX_BODY:
        return Refusal(
            413,
            "request_too_large",
            f"Legion's model proxy takes request bodies of at most {MAX_BODY} bytes",
        )
    return length


def forwarded_headers(
    api: Api, incoming: Mapping[str, str], credential: Mapping[str, str]
) -> dict[str, str]:
    """The headers a request goes upstream with: those of `api`'s allow-list; with
    `credential` (the daemon's) in place of the session's, or, when the daemon holds none,
    the session's own passed through."""
    headers = {
        name: value
        for name, value in incoming.items()
        if name in api.headers or name.startswith(api.header_prefixes)
    }
    if not credential:
        headers.update({n: v for n, v in incoming.items() if n in CREDENTIAL_HEADERS})
    for name, value in credential.items():
        if name == "anthropic-beta" and headers.get(name):
            headers[name] = f"{headers[name]},{value}"
        else:
            headers[name] = value
    headers["accept-encoding"] = "identity"  # usage is read off the bytes as they pass
    return headers
