"""Which model provider Codex uses and how it authenticates, from `$CODEX_HOME/config.toml`
(its `profile`, `model_provider` and `[model_providers.X]` table): what `legion doctor`
reports, and what the daemon's model proxy needs to stand in for it.

The built-in `openai` provider takes its key from `OPENAI_API_KEY` and its endpoint from
`OPENAI_BASE_URL` (else OpenAI's); any other provider names its own `base_url` and the
variable holding its key (`env_key`). A proxied session's Codex is pointed at the proxy the
same way: the variables for `openai`, two `--config` overrides of the provider's table else.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OPENAI = "openai"
OPENAI_BASE_URL = "https://api.openai.com/v1"
# Codex's providers that need no `[model_providers.X]` table (besides "openai").
BUILT_IN_PROVIDERS = ("ollama", "lmstudio", "oss")
# The variables Codex reads a key for the built-in `openai` provider from (its API key; the
# key and the login token `codex exec` takes in their place).
OPENAI_KEY_VARIABLES = ("OPENAI_API_KEY", "CODEX_API_KEY", "CODEX_ACCESS_TOKEN")
# Where a proxied session's Codex finds its capability (a provider's `env_key`).
MODEL_TOKEN_ENV = "LEGION_MODEL_TOKEN"
# The `codex exec` arguments a proxied session's turns add (a JSON list), read by its turn loop
# (`legion.runtime.codex.session`).
CODEX_OVERRIDES_ENV = "LEGION_CODEX_OVERRIDES"
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class CodexProvider:
    name: str
    model: str | None = None
    base_url: str | None = None  # the table's; None for a built-in provider
    env_key: str | None = None  # the variable holding the key; None: no key
    has_table: bool = False

    @property
    def key_variable(self) -> str | None:
        return "OPENAI_API_KEY" if self.name == OPENAI else self.env_key

    @property
    def key_variables(self) -> tuple[str, ...]:
        """Every variable Codex may read this provider's key from."""
        if self.name == OPENAI:
            return OPENAI_KEY_VARIABLES
        return (self.env_key,) if self.env_key else ()

    def endpoint(self, env: Mapping[str, str]) -> str | None:
        """The API's base URL (requests go to `<it>/responses`); None when not known."""
        if self.name == OPENAI:
            return (env.get("OPENAI_BASE_URL") or OPENAI_BASE_URL).rstrip("/")
        return self.base_url.rstrip("/") if self.base_url else None

    def pointed_at(self, url: str, token: str) -> tuple[dict[str, str], list[str]] | None:
        """The variables and the `codex exec` arguments that send this provider's requests to
        `url` with `token` as its key; None when `--config` cannot name its table (Codex's
        `-c` takes a bare dotted path: a quoted key would make another provider)."""
        if self.name == OPENAI:
            return {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": token}, []
        if not _BARE_KEY.fullmatch(self.name):
            return None
        table = f"model_providers.{self.name}"
        overrides = [
            "--config",
            f"{table}.base_url={json.dumps(url)}",
            "--config",
            f"{table}.env_key={json.dumps(MODEL_TOKEN_ENV)}",
        ]
        return {MODEL_TOKEN_ENV: token}, overrides


def _text(value: object, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{what} is not a string")


def read_provider(home: Path) -> CodexProvider:
    """The provider `home/config.toml` chooses (Codex's defaults when there is none).
    OSError or ValueError (with what is wrong) for a file that cannot be read or is not
    what Codex reads."""
    path = home / "config.toml"
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        data = {}
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(" ".join(str(exc).split())) from None
    try:
        settings = dict(data)
        profile = _text(data.get("profile"), "profile")
        if profile is not None:
            profiles = data.get("profiles", {})
            chosen = profiles.get(profile) if isinstance(profiles, dict) else None
            if not isinstance(chosen, dict):
                raise ValueError(f"profile {profile!r} has no [profiles.{profile}] table")
            settings.update(chosen)
        model = _text(settings.get("model"), "model")
        name = _text(settings.get("model_provider"), "model_provider") or OPENAI
        providers = data.get("model_providers", {})
        if not isinstance(providers, dict):
            raise ValueError("model_providers is not a table")
        table = providers.get(name)
        if table is not None and not isinstance(table, dict):
            raise ValueError(f"model_providers.{name} is not a table")
        base_url = _text((table or {}).get("base_url"), f"model_providers.{name}.base_url")
        env_key = _text((table or {}).get("env_key"), f"model_providers.{name}.env_key")
    except AttributeError as exc:
        raise ValueError(str(exc)) from None
    if name == OPENAI:  # built in: a [model_providers.openai] table does not replace it
        return CodexProvider(name, model)
    return CodexProvider(name, model, base_url, env_key, table is not None)
