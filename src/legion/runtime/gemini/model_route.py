"""How the daemon's model proxy serves Gemini's sessions (the registry's `ModelRoute`:
`legion.plugins`, `legion.proxy`).

Gemini is served, under the proxy's `/gemini`, only when the daemon holds a Gemini API key
(`GEMINI_API_KEY`): the session's CLI is then pointed at the proxy (`GOOGLE_GEMINI_BASE_URL`,
which its SDK joins `/v1beta/models/...` to) with the session's capability as its key, sent as
`x-goog-api-key`. Without one its sessions reach Google's API with your key themselves.
"""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT_UPSTREAM = "https://generativelanguage.googleapis.com"
BASE_URL_VARIABLE = "GOOGLE_GEMINI_BASE_URL"
KEY_VARIABLE = "GEMINI_API_KEY"
# Every variable the CLI (its SDK) reads a key from.
KEY_VARIABLES = (KEY_VARIABLE, "GOOGLE_API_KEY")


def upstream(env: Mapping[str, str]) -> tuple[str, dict[str, str]] | None:
    """Google's API (or `GOOGLE_GEMINI_BASE_URL`) and the key the daemon's environment `env`
    holds for it; None when it holds none (the proxy does not serve Gemini then)."""
    key = env.get(KEY_VARIABLE) or env.get("GOOGLE_API_KEY")
    if not key:
        return None
    base = (env.get(BASE_URL_VARIABLE) or DEFAULT_UPSTREAM).rstrip("/")
    return base, {"x-goog-api-key": key}


def point(env: Mapping[str, str], url: str, token: str | None) -> dict[str, str]:
    """A session's environment `env` pointed at the proxy's `url` with the capability `token`
    as its only key; `env` as it is without a token (the daemon holds no key)."""
    if not token:
        return dict(env)
    routed = {name: value for name, value in env.items() if name not in KEY_VARIABLES}
    routed[BASE_URL_VARIABLE] = url
    routed[KEY_VARIABLE] = token
    return routed


def key_variables(env: Mapping[str, str]) -> tuple[frozenset[str], frozenset[str]]:
    """Gemini's key variables: every one, and those its CLI reads (the same)."""
    every = frozenset(KEY_VARIABLES)
    return every, every
