"""The scripted Responses-API server (for the Codex CLI) lives in the package; tests import it
from here."""

from legion.demo.codex_config import (  # noqa: F401
    API_KEY_ENV,
    DEFAULT_MODEL,
    PROVIDER_ID,
    codex_config_toml,
)
from legion.demo.responses_requests import item_text, output_text  # noqa: F401
from legion.demo.responses_server import *  # noqa: F403
from legion.demo.responses_server import (  # noqa: F401  (names tests use that * may not carry)
    SHELL_TOOL,
    FakeResponsesServer,
    RecordedRequest,
    Scenario,
    Script,
    bash,
    exec_command,
    function_call,
    pause,
    read_request_log,
    text,
    tool_result_text,
    tool_use,
)
