"""The egress allow-list's parsing, matching and narrowing (`legion.core.egress`)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legion.core import egress
from legion.core.egress import ADDRESS, NAME, WEB_PORTS, Rule


def rules(*entries: str) -> tuple[Rule, ...]:
    return egress.parse(entries)


def test_a_bare_name_allows_ports_80_and_443_and_a_port_only_that_one() -> None:
    assert rules("PyPI.org.") == (Rule(NAME, "pypi.org", WEB_PORTS),)
    allowed = rules("pypi.org", "example.com:8443")
    assert egress.allowing(allowed, "pypi.org", 443) is not None
    assert egress.allowing(allowed, "pypi.org", 80) is not None
    assert egress.allowing(allowed, "pypi.org", 8443) is None
    assert egress.allowing(allowed, "example.com", 8443) is not None
    assert egress.allowing(allowed, "example.com", 443) is None
    assert egress.allowing(allowed, "www.pypi.org", 443) is None


def test_a_wildcard_covers_one_or_more_labels_under_its_domain_only() -> None:
    allowed = rules("*.crates.io")
    for host in ("static.crates.io", "a.b.crates.io", "INDEX.crates.io."):
        assert egress.allowing(allowed, host, 443) is not None, host
    for host in ("crates.io", "evilcrates.io", "crates.io.evil.com", "xcrates.io", "io"):
        assert egress.allowing(allowed, host, 443) is None, host


def test_address_literals_need_their_port_and_match_only_themselves() -> None:
    allowed = rules("127.0.0.1:8080", "[::1]:9090", "localhost:7000")
    assert [rule.kind for rule in allowed] == [ADDRESS, ADDRESS, ADDRESS]
    assert egress.allowing(allowed, "127.0.0.1", 8080) is not None
    assert egress.allowing(allowed, "127.0.0.1", 8081) is None
    assert egress.allowing(allowed, "[::1]", 9090) is not None
    assert egress.allowing(allowed, "::1", 9090) is not None
    assert egress.allowing(allowed, "localhost", 7000) is not None
    assert egress.allowing(allowed, "localhost", 8080) is None
    assert egress.forwarded(allowed) == (
        ("127.0.0.1", 8080, "127.0.0.1"),
        ("::1", 9090, "::1"),
        ("127.0.0.1", 7000, "localhost"),
    )
    assert egress.forwarded(rules("localhost:80", "127.0.0.1:80", "pypi.org")) == (
        ("127.0.0.1", 80, "localhost"),
    )


@pytest.mark.parametrize(
    "entry",
    [
        "",
        "127.0.0.1",
        "[::1]",
        "localhost",
        "::1:8080",
        "pypi.org:0",
        "pypi.org:65536",
        "pypi.org:http",
        "*.io.",
        "*",
        "*.",
        "a.*.com",
        "**.com",
        "*.127.0.0.1",
        "http://pypi.org",
        "pypi org",
        "@nothing",
        "[1.2.3.4]:80",
    ],
)
def test_a_bad_entry_is_one_clear_line(entry: str) -> None:
    with pytest.raises(ValueError) as raised:
        egress.parse_entry(entry)
    assert "\n" not in str(raised.value)


def test_the_preset_expands_to_the_registries_over_https() -> None:
    allowed = rules("@registries")
    for host in ("pypi.org", "files.pythonhosted.org", "registry.npmjs.org", "index.crates.io"):
        assert egress.allowing(allowed, host, 443) is not None
        assert egress.allowing(allowed, host, 80) is None
    assert egress.allowing(allowed, "evil.com", 443) is None


def test_a_name_may_not_lead_to_a_local_address_unless_the_entry_is_that_address() -> None:
    name = rules("example.com")[0]
    wildcard = rules("*.example.com")[0]
    for address in (
        "127.0.0.1",
        "127.9.9.9",
        "::1",
        "169.254.169.254",
        "fe80::1%2",
        "0.0.0.0",
        "::",
        "224.0.0.1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
    ):
        assert egress.special(address), address
        assert not egress.address_allowed(name, address)
        assert not egress.address_allowed(wildcard, address)
    for address in ("93.184.216.34", "10.0.0.1", "2606:4700::1"):
        assert egress.address_allowed(name, address)
    loopback = rules("127.0.0.1:8080")[0]
    assert egress.address_allowed(loopback, "127.0.0.1")
    assert not egress.address_allowed(loopback, "127.0.0.2")
    assert egress.address_allowed(rules("localhost:8080")[0], "::1")


def test_a_repository_narrows_never_widens() -> None:
    user = rules("*.crates.io", "pypi.org", "127.0.0.1:8080")
    assert egress.narrow(user, rules("index.crates.io", "evil.com")) == rules("index.crates.io")
    assert egress.narrow(user, rules("*.crates.io:443")) == rules("*.crates.io:443")
    assert egress.narrow(rules("*.a.crates.io"), user) == rules("*.a.crates.io")
    assert egress.narrow(user, rules("*.a.crates.io")) == rules("*.a.crates.io")
    assert egress.narrow(user, rules("pypi.org:8443")) == ()
    assert egress.narrow(user, ()) == ()
    assert egress.narrow((), rules("pypi.org")) == ()
    assert egress.narrow(user, rules("localhost:8080", "127.0.0.1:8080")) == rules("127.0.0.1:8080")


label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
host = st.lists(label, min_size=1, max_size=4).map(".".join)


def _a_name(text: str) -> bool:
    """Whether `text` is a name alone, not an address (`0.0.0.0`, `127.1`), which is allowed
    only with its port."""
    try:
        egress.parse_entry(text)
    except ValueError:
        return False
    return True


entry = st.one_of(
    host.filter(_a_name),
    st.tuples(host, st.integers(1, 65535)).map(lambda hp: f"{hp[0]}:{hp[1]}"),
    st.lists(label, min_size=2, max_size=3).map(lambda labels: "*." + ".".join(labels)),
    st.sampled_from(["127.0.0.1:8080", "[::1]:80", "localhost:8080", "@registries"]),
)
destination = st.tuples(
    st.one_of(host, st.sampled_from(["127.0.0.1", "::1", "localhost"])),
    st.sampled_from([80, 443, 8080, 8443]),
)


@settings(max_examples=60)
@given(st.lists(entry, max_size=5), st.lists(entry, max_size=5), st.lists(destination))
def test_narrowing_allows_only_what_both_allow(
    user_entries: list[str], repo_entries: list[str], destinations: list[tuple[str, int]]
) -> None:
    user, repository = rules(*user_entries), rules(*repo_entries)
    narrowed = egress.narrow(user, repository)
    for name, port in destinations:
        if egress.allowing(narrowed, name, port) is not None:
            assert egress.allowing(user, name, port) is not None
            assert egress.allowing(repository, name, port) is not None


@settings(max_examples=60)
@given(st.lists(entry, max_size=6))
def test_rules_say_themselves_again(entries: list[str]) -> None:
    parsed = rules(*entries)
    assert egress.parse(egress.texts(parsed)) == parsed
    assert egress.narrow(parsed, parsed) == parsed
