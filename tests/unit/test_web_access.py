"""The web view's rules (`legion.core.web_access`), pure."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from legion.core.web_access import (
    FAILED_LOGINS_ALLOWED,
    LOCKOUT_S,
    Role,
    address_key,
    csrf_matches,
    host_allowed,
    locked_out,
    may_write,
    same_origin,
    served_hosts,
    token_name_problem,
    token_shaped,
)


def test_only_an_operator_writes() -> None:
    assert may_write(Role.OPERATOR) and not may_write(Role.VIEWER)


def test_the_lockout_counts_recent_failures_only() -> None:
    now = 10_000.0
    recent = [now - 1] * FAILED_LOGINS_ALLOWED
    assert locked_out(recent, now)
    assert not locked_out(recent[:-1], now)
    assert not locked_out([now - LOCKOUT_S - 1] * 10, now)


def test_served_hosts() -> None:
    hosts = served_hosts("127.0.0.1", 8787)
    assert {"127.0.0.1:8787", "localhost:8787", "[::1]:8787"} <= hosts
    assert not host_allowed("127.0.0.1", hosts) and not host_allowed("evil.example:8787", hosts)
    assert host_allowed("LOCALHOST:8787", hosts) and not host_allowed(None, hosts)
    # Behind a proxy a browser names the proxy's host without its default port.
    proxied = served_hosts("127.0.0.1", 9000, ["legion.example.com"])
    assert host_allowed("legion.example.com", proxied)
    assert host_allowed("legion.example.com:9000", proxied)
    assert not host_allowed("legion.example.com:8443", proxied)
    exact = served_hosts("0.0.0.0", 9000, ["build-1:9000"])
    assert host_allowed("build-1:9000", exact) and not host_allowed("localhost:9000", exact)


def test_same_origin() -> None:
    host = "127.0.0.1:8787"
    assert same_origin("http://127.0.0.1:8787", None, host, "http", write=True)
    for origin in ("null", "http://127.0.0.1:8787/", "https://127.0.0.1:8787", "http://e.x"):
        assert not same_origin(origin, "same-origin", host, "http", write=True)
    assert not same_origin(None, "same-origin", host, "http", write=True)  # a write names one
    assert same_origin(None, "same-origin", host, "http", write=False)
    assert not same_origin(None, "cross-site", host, "http", write=False)
    assert not same_origin(None, "same-site", host, "http", write=False)


def test_loopback_addresses_are_one_for_the_lockout() -> None:
    assert address_key("127.0.0.1") == address_key("127.0.0.9") == address_key("::1")
    assert address_key("192.0.2.1") == "192.0.2.1"


@given(st.text())
def test_a_token_is_url_safe_characters_or_none(text: str) -> None:
    if token_shaped(text):
        assert text.isascii() and 16 <= len(text) <= 128 and "%" not in text


@given(st.text(max_size=60))
def test_a_token_name_that_passes_is_plain(name: str) -> None:
    if token_name_problem(name) is None:
        assert name.isascii() and " " not in name and "/" not in name and name


@given(st.text(), st.text())
def test_csrf_compares_exactly(expected: str, given_: str) -> None:
    assert csrf_matches(expected, given_) is (expected == given_)
    assert not csrf_matches(expected, None)
