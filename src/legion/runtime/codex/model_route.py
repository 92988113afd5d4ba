"""How the daemon's model proxy serves Codex's sessions (the registry's `ModelRoute`:
`legion.plugins`, `legion.proxy`).

Codex is served, under the proxy's `/codex`, only when the daemon holds its provider's key
(`OPENAI_API_KEY`, or the provider's `env_key`): its provider then finds the session's
capability where it looked for the key (`legion.runtime.codex.provider`). A Codex logged in
with `codex login` keeps its own login, and reaches its provider itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from legion.runtime.codex.provider import (
    CODEX_OVERRIDES_ENV,
    OPENAI_KEY_VARIABLES,
    CodexProvider,
    read_provider,
)


def _provider(env: Mapping[str, str]) -> CodexProvider | None:
    """The provider the config in `env`'s `CODEX_HOME` chooses; None when Codex cannot read
    it (it will say so itself)."""
    from legion.runtime.codex.runtime import codex_home

    try:
        return read_provider(codex_home(env))
    except (OSError, ValueError):
        return None


def upstream(env: Mapping[str, str]) -> tuple[str, dict[str, str]] | None:
    """Codex's provider and its key, from the daemon's environment `env` (its `CODEX_HOME`);
    None when the daemon holds no key for it (Codex logged in by `codex login`, a provider
    with no key, a config it cannot read): Codex's sessions then reach their provider
    themselves."""
    provider = _provider(env)
    if provider is None:
        return None
    variable = provider.key_variable
    endpoint = provider.endpoint(env)
    if not variable or not env.get(variable) or not endpoint:
        return None
    return endpoint, {"authorization": f"Bearer {env[variable]}"}


def point(env: Mapping[str, str], url: str, token: str | None) -> dict[str, str]:
    """A session's environment `env` with its provider pointed at the proxy's `url` and the
    capability `token` where the provider reads its key; `env` as it is without a token (the
    daemon holds no key) or when the provider cannot be pointed there."""
    if not token:
        return dict(env)
    provider = _provider(env)
    if provider is None:
        return dict(env)
    pointed = provider.pointed_at(url, token)
    if pointed is None:
        return dict(env)
    variables, overrides = pointed
    routed = dict(env)
    if provider.key_variable:
        routed.pop(provider.key_variable, None)
    routed.update(variables)
    if overrides:
        routed[CODEX_OVERRIDES_ENV] = json.dumps(overrides)
    return routed


def key_variables(env: Mapping[str, str]) -> tuple[frozenset[str], frozenset[str]]:
    """Every variable Codex's `openai` provider reads a key from and the key variables of the
    provider the config chooses; and those latter alone (what a Codex session reads)."""
    provider = _provider(env)
    own = frozenset(provider.key_variables) if provider is not None else frozenset()
    return frozenset(OPENAI_KEY_VARIABLES) | own, own
