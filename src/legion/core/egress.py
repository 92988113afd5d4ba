"""The egress allow-list (`sandbox_egress`): which hosts a confined session may reach through the
daemon's egress proxy (`legion.proxy.egress`), besides the model. Pure: strings in, rules and
answers out.

Each entry is one of:

- a host name, `pypi.org` (ports 80 and 443) or `pypi.org:8443` (that port);
- a wildcard, `*.crates.io` (one or more labels before `.crates.io`, never `crates.io` itself
  nor `evilcrates.io`), with or without a port as a name;
- an address with its port, `127.0.0.1:8080` or `[::1]:8080`; `localhost:PORT` is one too
  (the loopback name);
- a preset, `@registries` (`PRESETS`).

A name may lead only to a public address: one that resolves to a loopback, link-local (the
cloud's metadata service), unspecified or multicast address is refused (`address_allowed`),
unless the entry is that address (or `localhost`) itself, listed with its port.

What a repository's config sets only narrows what the user's allows (`narrow`).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

NAME = "name"
WILDCARD = "wildcard"
ADDRESS = "address"
WEB_PORTS = frozenset({80, 443})
LOOPBACK_NAME = "localhost"

# The common package registries and source hosts, over HTTPS only.
PRESETS: dict[str, tuple[str, ...]] = {
    "@registries": (
        "pypi.org:443",
        "files.pythonhosted.org:443",
        "registry.npmjs.org:443",
        "registry.yarnpkg.com:443",
        "crates.io:443",
        "static.crates.io:443",
        "index.crates.io:443",
        "proxy.golang.org:443",
        "sum.golang.org:443",
        "github.com:443",
        "codeload.github.com:443",
        "objects.githubusercontent.com:443",
    ),
}

_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_HOW = (
    "a host name (`pypi.org`, `pypi.org:8443`), a wildcard (`*.crates.io`), an address with "
    "its port (`127.0.0.1:8080`, `[::1]:8080`, `localhost:8080`) or a preset (`@registries`)"
)


@dataclass(frozen=True, order=True)
class Rule:
    """One allowed destination: `host` (a name, the suffix of a wildcard without its `*.`, or
    an address in its canonical form) on `ports`."""

    kind: str
    host: str
    ports: frozenset[int]

    @property
    def literal(self) -> bool:
        """Whether it names an address itself (a loopback one may then be reached)."""
        return self.kind == ADDRESS

    def text(self) -> str:
        shown = f"*.{self.host}" if self.kind == WILDCARD else self.host
        if ":" in shown:
            shown = f"[{shown}]"
        if self.ports == WEB_PORTS:
            return shown
        return ",".join(f"{shown}:{port}" for port in sorted(self.ports))

    def matches(self, host: str, port: int) -> bool:
        if port not in self.ports:
            return False
        if self.kind == WILDCARD:
            return _address(host) is None and host.endswith("." + self.host)
        return host == self.host

    def within(self, other: Rule) -> bool:
        """Whether every destination this rule allows `other` allows too."""
        if not self.ports <= other.ports:
            return False
        if other.kind == WILDCARD:
            under = self.host.endswith("." + other.host)
            return (
                under
                if self.kind == NAME
                else self.kind == WILDCARD and (under or self.host == other.host)
            )
        return self.kind == other.kind and self.host == other.host


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def normal_host(host: str) -> str | None:
    """`host` as rules hold it (lower case, no trailing dot, an address canonical); None when
    it is neither a host name nor an address."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        found = _address(host[1:-1])
        return None if found is None or found.version != 6 else str(found)
    found = _address(host)
    if found is not None:
        return str(found)
    host = host.removesuffix(".")
    if not host or len(host) > 253 or not all(_LABEL.fullmatch(p) for p in host.split(".")):
        return None
    return host


def _port(text: str, entry: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{entry!r}: {text!r} is no port (1 to 65535)")
    return int(text)


def parse_entry(entry: str) -> tuple[Rule, ...]:
    """The rules of one entry of `sandbox_egress`; a ValueError that says what is wrong."""
    if not isinstance(entry, str):
        raise ValueError(f"{entry!r} is not a string; each entry is {_HOW}")
    text = entry.strip().lower()
    if text.startswith("@"):
        if text not in PRESETS:
            raise ValueError(f"{entry!r} is no preset (the presets: {', '.join(PRESETS)})")
        return tuple(rule for item in PRESETS[text] for rule in parse_entry(item))
    host, ports = text, None
    if text.startswith("["):
        close = text.find("]")
        if close < 0 or text[close + 1 :][:1] not in ("", ":"):
            raise ValueError(f"{entry!r} is not {_HOW}")
        host = text[: close + 1]
        if text[close + 1 :]:
            ports = frozenset({_port(text[close + 2 :], entry)})
    elif text.count(":") == 1:
        host, port = text.split(":")
        ports = frozenset({_port(port, entry)})
    elif ":" in text:
        raise ValueError(f"{entry!r}: an IPv6 address goes in brackets, `[::1]:8080`")
    wildcard = host.startswith("*.")
    normal = normal_host(host[2:] if wildcard else host)
    if normal is None or "*" in host[2 if wildcard else 0 :]:
        raise ValueError(f"{entry!r} is not {_HOW}")
    address = _address(normal) is not None
    if wildcard and (address or "." not in normal):
        raise ValueError(f"{entry!r}: a wildcard covers the names under a domain, `*.crates.io`")
    if (address or normal == LOOPBACK_NAME) and ports is None:
        raise ValueError(f"{entry!r}: an address is allowed with its port, `{host}:8080`")
    kind = WILDCARD if wildcard else ADDRESS if address or normal == LOOPBACK_NAME else NAME
    return (Rule(kind, normal, WEB_PORTS if ports is None else ports),)


def parse(entries: Iterable[str]) -> tuple[Rule, ...]:
    """Every entry's rules, each once, in order; a ValueError for the first bad entry."""
    rules: dict[Rule, None] = {}
    for entry in entries:
        for rule in parse_entry(entry):
            rules[rule] = None
    return tuple(rules)


def texts(rules: Iterable[Rule]) -> tuple[str, ...]:
    """The entries that say `rules` again (what `parse` takes)."""
    return tuple(rule.text() for rule in rules)


def allowing(rules: Sequence[Rule], host: str, port: int) -> Rule | None:
    """The first rule that allows `host:port`; None when none does (or `host` is no host)."""
    normal = normal_host(host)
    if normal is None:
        return None
    return next((rule for rule in rules if rule.matches(normal, port)), None)


def special(address: str) -> bool:
    """Whether `address` is one a name may not lead to: loopback, link-local (169.254.0.0/16,
    fe80::/10: the cloud's metadata service), unspecified or multicast (an IPv4 address mapped
    into IPv6 as the IPv4 one)."""
    found = _address(address.split("%", 1)[0])
    if found is None:
        return True
    if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
        found = found.ipv4_mapped
    return found.is_loopback or found.is_link_local or found.is_unspecified or found.is_multicast


def address_allowed(rule: Rule, address: str) -> bool:
    """Whether the destination `rule` allowed may be reached at `address` (one its host
    resolved to): any public address; a special one (`special`) only for an address rule
    naming it, or `localhost` at a loopback address."""
    if not special(address):
        return True
    if rule.kind != ADDRESS:
        return False
    found = _address(address.split("%", 1)[0])
    if rule.host == LOOPBACK_NAME:
        return found is not None and found.is_loopback
    return found is not None and str(found) == rule.host


def narrow(user: Sequence[Rule], repository: Sequence[Rule]) -> tuple[Rule, ...]:
    """What a repository's rules leave of the user's: each rule of either that the other's
    rules allow whole (`Rule.within`). Never more than the user's allow."""
    kept: dict[Rule, None] = {}
    for rule in repository:
        if any(rule.within(mine) for mine in user):
            kept[rule] = None
    for rule in user:
        if any(rule.within(theirs) for theirs in repository):
            kept[rule] = None
    return tuple(kept)


def forwarded(rules: Iterable[Rule]) -> tuple[tuple[str, int, str], ...]:
    """The loopback destinations a session's bridge shows at their own address inside its
    sandbox: for each address rule of a loopback address (or `localhost`, shown at 127.0.0.1),
    (the address inside, the port, the host its `CONNECT` names); an address once."""
    found: dict[tuple[str, int], str] = {}
    for rule in rules:
        if rule.kind != ADDRESS:
            continue
        inside = "127.0.0.1" if rule.host == LOOPBACK_NAME else rule.host
        address = _address(inside)
        if address is None or not address.is_loopback:
            continue
        for port in sorted(rule.ports):
            found.setdefault((inside, port), rule.host)
    return tuple((inside, port, host) for (inside, port), host in found.items())


# The port a session's bridge takes inside its sandbox for the egress proxy (the one HTTP
# clients are pointed at), when nothing else there has it.
EGRESS_PORT = 3128


def egress_port(taken: Iterable[int]) -> int:
    """The port inside a sandbox for its egress proxy: `EGRESS_PORT`, or the next one not
    `taken` (the model's bridge, a forwarded address)."""
    used = set(taken)
    port = EGRESS_PORT
    while port in used:
        port += 1
    return port


def variables(port: int) -> dict[str, str]:
    """What points a session's HTTP clients at its egress proxy, at `port` inside its sandbox:
    the standard variables (curl, git, pip and requests, cargo, Go, Node's npm and Claude
    Code), npm's and yarn's own, and what goes direct (the model's bridge, a forwarded local
    address)."""
    url = f"http://127.0.0.1:{port}"
    direct = "127.0.0.1,::1"
    return {
        "HTTPS_PROXY": url,
        "HTTP_PROXY": url,
        "https_proxy": url,
        "http_proxy": url,
        "NO_PROXY": direct,
        "no_proxy": direct,
        "npm_config_proxy": url,
        "npm_config_https_proxy": url,
        "npm_config_noproxy": direct,
        "YARN_HTTP_PROXY": url,
        "YARN_HTTPS_PROXY": url,
    }


def refusal(host: str, port: int, *, resolved: str | None = None) -> str:
    """The one line a refused session (and its log) is told; `resolved`: the special address
    (`special`) a name allowed led to."""
    shown = f"[{host}]" if ":" in host else host
    if resolved is not None:
        return (
            f"legion: {shown} resolves to {resolved}, a loopback, link-local or other local "
            "address, which sandbox_egress allows only when that address is listed with its "
            f'port (`"{resolved}:{port}"`, or `"localhost:{port}"`) in your user config'
        )
    literal = host == LOOPBACK_NAME or _address(host) is not None
    bare = "" if literal else f' (or "{shown}" for ports 80 and 443)'
    return (
        f"legion: {shown}:{port} is not allowed by sandbox_egress; to allow it, add "
        f'"{shown}:{port}"{bare} to sandbox_egress in your user config '
        "(~/.config/legion/config.toml) or LEGION_SANDBOX_EGRESS"
    )
