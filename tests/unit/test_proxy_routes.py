"""What the model proxy forwards (`legion.proxy.routes`): the routes each runtime's CLI sends,
origin-form targets only, the joined URL on the upstream's own endpoint, the headers that go on,
and a body's length given and capped."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legion.proxy.routes import (
    CLAUDE_API,
    CODEX_API,
    MAX_BODY,
    Forward,
    Refusal,
    body_length,
    forward,
    forwarded_headers,
    same_endpoint,
)

BASE = "https://api.anthropic.com"


@pytest.mark.parametrize(
    "target", ["/v1/messages", "/v1/messages?beta=true", "/v1/messages/count_tokens?beta=true"]
)
def test_claude_codes_own_requests_go_to_the_upstream(target: str) -> None:
    allowed = forward(CLAUDE_API, BASE, "POST", target)
    assert isinstance(allowed, Forward)
    assert allowed.url == BASE + target


def test_codex_sends_responses_under_the_providers_base_path() -> None:
    allowed = forward(CODEX_API, "https://api.openai.com/v1/", "POST", "/responses")
    assert isinstance(allowed, Forward) and allowed.url == "https://api.openai.com/v1/responses"
    assert allowed.route.metered


@pytest.mark.parametrize(
    "target",
    [
        "@attacker.example:8443/x",  # the reported attack: joined, it names another host
        "@127.0.0.1:9/v1/messages",
        "http://attacker.example/v1/messages",  # absolute form
        "//attacker.example/v1/messages",
        "v1/messages",
        "/v1/messages#frag",
        "/v1/messages\r\nx-api-key: y",
        "/v1/messages\\..\\x",
        "/v1/messages ?beta=true",
        "",
    ],
)
def test_a_target_that_is_not_a_plain_path_is_refused(target: str) -> None:
    refused = forward(CLAUDE_API, BASE, "POST", target)
    assert isinstance(refused, Refusal) and refused.status in (400, 404)


@pytest.mark.parametrize(
    "target",
    [
        "/v1/messages/batches",
        "/v1/files",
        "/v1/chat/completions",
        "/v1/models",
        "/v1/messages/../files",
        "/v1/messages/%2e%2e/files",
        "/v1/messages/",
        "/",
    ],
)
def test_paths_no_runtime_sends_are_refused(target: str) -> None:
    refused = forward(CLAUDE_API, BASE, "POST", target)
    assert isinstance(refused, Refusal) and refused.status == 404


def test_a_codex_path_is_not_a_claude_path_and_the_other_way_round() -> None:
    assert isinstance(forward(CODEX_API, BASE, "POST", "/v1/messages"), Refusal)
    assert isinstance(forward(CLAUDE_API, BASE, "POST", "/responses"), Refusal)


def test_only_the_routes_method_and_query_pass() -> None:
    for method in ("GET", "HEAD", "PUT", "DELETE", "OPTIONS"):
        refused = forward(CLAUDE_API, BASE, method, "/v1/messages")
        assert isinstance(refused, Refusal) and refused.status == 405
    refused = forward(CLAUDE_API, BASE, "POST", "/v1/messages?beta=true&x=1")
    assert isinstance(refused, Refusal) and refused.status == 400
    assert isinstance(forward(CODEX_API, BASE, "POST", "/responses?beta=true"), Refusal)


@given(st.text(max_size=60), st.sampled_from(["POST", "GET"]))
def test_whatever_the_target_the_credential_goes_only_to_the_upstream(
    target: str, method: str
) -> None:
    for api, base in ((CLAUDE_API, "http://127.0.0.1:8080"), (CODEX_API, "https://h.example/v1")):
        allowed = forward(api, base, method, target)
        if isinstance(allowed, Forward):
            sent, configured = urlsplit(allowed.url), urlsplit(base)
            assert (sent.scheme, sent.netloc) == (configured.scheme, configured.netloc)
            assert sent.path == configured.path + allowed.route.path


def test_same_endpoint_needs_scheme_host_port_and_path() -> None:
    assert same_endpoint(BASE, BASE + "/v1/messages", "/v1/messages")
    assert not same_endpoint(BASE, "https://api.anthropic.com@evil/v1/messages", "/v1/messages")
    assert not same_endpoint(BASE, "http://api.anthropic.com/v1/messages", "/v1/messages")
    assert not same_endpoint(BASE, "https://api.anthropic.com:444/v1/messages", "/v1/messages")
    assert not same_endpoint(BASE, BASE + "/v1/files", "/v1/messages")
    assert not same_endpoint(BASE, "https://api.anthropic.com:bad/x", "/x")


def test_a_bodys_length_is_given_plain_and_capped() -> None:
    assert body_length(None, None) == 0
    assert body_length("1234", None) == 1234
    assert body_length(str(MAX_BODY), None) == MAX_BODY
    for bad, status in (
        ("-1", 400),
        ("+5", 400),
        ("1e3", 400),
        ("0x10", 400),
        ("١٢", 400),  # digits, but not ASCII ones
        (str(MAX_BODY + 1), 413),
        ("9" * 40, 413),
    ):
        refused = body_length(bad, None)
        assert isinstance(refused, Refusal) and refused.status == status, bad
    chunked = body_length(None, "chunked")
    assert isinstance(chunked, Refusal) and chunked.status == 411


def test_only_the_apis_headers_go_on_with_the_daemons_credential() -> None:
    incoming = {
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "claude-code-20250219",
        "x-stainless-os": "Linux",
        "x-claude-code-session-id": "sid",
        "authorization": "Bearer capability",
        "x-api-key": "capability",
        "cookie": "a=b",
        "x-forwarded-host": "evil",
        "openai-organization": "org-x",
        "session-id": "sid",
    }
    sent = forwarded_headers(
        CLAUDE_API, incoming, {"authorization": "Bearer real", "anthropic-beta": "oauth"}
    )
    assert sent == {
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "claude-code-20250219,oauth",
        "x-stainless-os": "Linux",
        "x-claude-code-session-id": "sid",
        "authorization": "Bearer real",
        "accept-encoding": "identity",
    }
    codex = forwarded_headers(CODEX_API, incoming, {"authorization": "Bearer real"})
    assert codex == {
        "content-type": "application/json",
        "session-id": "sid",
        "authorization": "Bearer real",
        "accept-encoding": "identity",
    }


def test_without_the_daemons_credential_the_sessions_own_passes() -> None:
    sent = forwarded_headers(CLAUDE_API, {"x-api-key": "own", "cookie": "c"}, {})
    assert sent == {"x-api-key": "own", "accept-encoding": "identity"}
