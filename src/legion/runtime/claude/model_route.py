"""How the daemon's model proxy serves Claude Code's sessions (the registry's `ModelRoute`:
`legion.plugins`, `legion.proxy`).

Claude Code is pointed at the proxy (`ANTHROPIC_BASE_URL`) whoever holds the credential: when
the daemon holds it, the session is given its capability as its token
(`ANTHROPIC_AUTH_TOKEN`: sent as a bearer token, and not a key the CLI asks the user to
approve) with every real credential taken out of its environment; when the daemon holds none,
the session's own login passes through the proxy, metered.
"""

from __future__ import annotations

from collections.abc import Mapping

from legion.runtime.claude.paths import CREDENTIAL_VARIABLES

DEFAULT_UPSTREAM = "https://api.anthropic.com"
OAUTH_BETA = "oauth-2025-04-20"


def upstream(env: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """The real endpoint (`ANTHROPIC_BASE_URL`, else Anthropic's) and the credential the
    daemon's environment `env` holds for it (no headers: the sessions' own pass through)."""
    base = (env.get("ANTHROPIC_BASE_URL") or DEFAULT_UPSTREAM).rstrip("/")
    if env.get("ANTHROPIC_API_KEY"):
        return base, {"x-api-key": env["ANTHROPIC_API_KEY"]}
    if env.get("ANTHROPIC_AUTH_TOKEN"):
        return base, {"authorization": f"Bearer {env['ANTHROPIC_AUTH_TOKEN']}"}
    if env.get("CLAUDE_CODE_OAUTH_TOKEN"):
        return base, {
            "authorization": f"Bearer {env['CLAUDE_CODE_OAUTH_TOKEN']}",
            "anthropic-beta": OAUTH_BETA,
        }
    return base, {}


def point(env: Mapping[str, str], url: str, token: str | None) -> dict[str, str]:
    """A session's environment `env` pointed at the proxy's `url`; with its capability `token`
    (the daemon holds the credential) in place of every credential."""
    routed = dict(env)
    routed["ANTHROPIC_BASE_URL"] = url
    if token:
        for name in CREDENTIAL_VARIABLES:
            routed.pop(name, None)
        routed["ANTHROPIC_AUTH_TOKEN"] = token
    return routed


def key_variables(env: Mapping[str, str]) -> tuple[frozenset[str], frozenset[str]]:
    """Claude Code's model credentials: every one, and those it reads (the same)."""
    every = frozenset(CREDENTIAL_VARIABLES)
    return every, every
