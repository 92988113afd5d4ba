"""The Codex CLI's `$CODEX_HOME/config.toml` for a scripted Responses-API server
(`legion.demo.responses_server`): its model traffic sent to the server, what would reach the
internet switched off (docs/codex-cli.md), the key's variable (`API_KEY_ENV`) named.
"""

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

# A model of Codex 0.169.0's bundled catalog (an unknown one gets a "model metadata not found"
# warning) whose tools come as a plain `tools` list with `exec_command` (the gpt-6 models get a
# JavaScript "code mode" `exec` tool in an `additional_tools` input item instead).  Its catalog
# entry offers an upgrade, so `codex_config_toml` marks that migration as seen.
DEFAULT_MODEL = "gpt-5.5"
MIGRATION_TARGET = "gpt-6-sol"

PROVIDER_ID = "legion_fake"
API_KEY_ENV = "LEGION_FAKE_OPENAI_KEY"


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def codex_config_toml(
    base_url: str,
    *,
    model: str = DEFAULT_MODEL,
    notify: Sequence[str] | None = None,
    trusted_dirs: Iterable[str | Path] = (),
    extra: str = "",
) -> str:
    """A `$CODEX_HOME/config.toml` that sends Codex's model traffic to `base_url` (the server's
    root, e.g. `FakeResponsesServer.base_url`) and switches off what would reach the internet
    (analytics and the plugin marketplace sync; verified in docs/codex-cli.md)."""
    lines = [
        f"model = {_toml_string(model)}",
        f"model_provider = {_toml_string(PROVIDER_ID)}",
        "check_for_update_on_startup = false",
    ]
    if notify is not None:
        lines.append(f"notify = [{', '.join(_toml_string(a) for a in notify)}]")
    if extra:
        lines.append(extra.strip())
    lines += [
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[feedback]",
        "enabled = false",
        "",
        "[tui]",
        "show_tooltips = false",
        "",
        "[notice]",
        "hide_full_access_warning = true",
        "",
        "[notice.model_migrations]",
        f"{_toml_string(DEFAULT_MODEL)} = {_toml_string(MIGRATION_TARGET)}",
        "",
        "[features]",
        "plugins = false",
        # the TUI would otherwise start a shared app-server daemon (one per user, outliving the
        # session, with a copy of the 300 MB binary under CODEX_HOME/packages)
        "daemon_auto_start = false",
        "",
        f"[model_providers.{PROVIDER_ID}]",
        'name = "Legion fake Responses API"',
        f"base_url = {_toml_string(base_url.rstrip('/') + '/v1')}",
        f"env_key = {_toml_string(API_KEY_ENV)}",
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
    ]
    for directory in trusted_dirs:
        lines += ["", f"[projects.{_toml_string(str(directory))}]", 'trust_level = "trusted"']
    return "\n".join(lines) + "\n"
