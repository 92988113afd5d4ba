"""The scripted model server lives in the package (`legion demo` uses it too); tests import it
from here."""

from legion.demo.model_server import *  # noqa: F403
from legion.demo.model_server import (  # noqa: F401  (names tests use that * may not carry)
    FakeModelServer,
    RecordedRequest,
    Scenario,
    Script,
    ask_user_question,
    bash,
    pause,
    read_request_log,
    text,
    tool_result_text,
    tool_use,
)
