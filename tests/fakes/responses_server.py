"""The scripted Responses-API server (for the Codex CLI) lives in the package; tests import it
from here."""

from legion.demo.responses_server import *  # noqa: F403
from legion.demo.responses_server import (  # noqa: F401  (names tests use that * may not carry)
    API_KEY_ENV,
    DEFAULT_MODEL,
    PROVIDER_ID,
    SHELL_TOOL,
    FakeResponsesServer,
    RecordedRequest,
    Scenario,
    Script,
    bash,
    codex_config_toml,
    exec_command,
    function_call,
    item_text,
    output_text,
    pause,
    read_request_log,
    text,
    tool_result_text,
    tool_use,
)
