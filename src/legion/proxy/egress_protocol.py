"""The egress proxy's protocol (`legion.proxy.egress`): a connection's first line,
`LEGION-EGRESS <capability>`, then one proxy request, read by its deadline and no larger than
`MAX_HEAD_BYTES`: `CONNECT host:port`, or an absolute-form plain `http://` request (sent on in
origin form, its `Host` the target's, without its `Proxy-*` headers); and the proxy's answers, an
error's status and one line. Sockets in, what was asked (or `Answer`, the error) out.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from legion.core import egress

if TYPE_CHECKING:
    pass

PREAMBLE = b"LEGION-EGRESS "
# A request's preamble and head must have come whole within this long, and be no larger.
HEAD_DEADLINE_S = 10.0
MAX_HEAD_BYTES = 32 * 1024
CHUNK = 64 * 1024


class Answer(Exception):
    """A request answered with an error, its status and one line."""

    def __init__(self, status: int, line: str) -> None:
        super().__init__(line)
        self.status = status
        self.line = line


_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    407: "Proxy Authentication Required",
    408: "Request Timeout",
    429: "Too Many Requests",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def answer(status: int, line: str) -> bytes:
    body = (line + "\n").encode()
    return (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\ncontent-type: text/plain; "
        f"charset=utf-8\r\nconnection: close\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body


@dataclass(frozen=True)
class ProxyRequest:
    """What a connection asked: a tunnel (`connect`) or a plain request, to `host`:`port`."""

    connect: bool
    host: str
    port: int
    forwarded: bytes = b""  # a plain HTTP request's head as sent on


def shown_host(host: str) -> str:
    return host.strip("[]").lower()


def read_head(client: socket.socket, deadline: float) -> tuple[str, bytes, bytes]:
    """The capability of the preamble, the request's head (through its blank line) and what
    came after it."""
    data = b""
    while b"\r\n\r\n" not in data.partition(b"\n")[2]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Answer(408, "legion: the request did not come in time")
        if len(data) > MAX_HEAD_BYTES:
            raise Answer(400, "legion: the request's head is too large")
        client.settimeout(left)
        try:
            chunk = client.recv(CHUNK)
        except TimeoutError:
            raise Answer(408, "legion: the request did not come in time") from None
        if not chunk:
            raise Answer(400, "legion: the connection ended before its request")
        data += chunk
    line, _, after = data.partition(b"\n")
    if not line.startswith(PREAMBLE):
        raise Answer(407, "legion: this connection did not say its capability")
    token = line[len(PREAMBLE) :].strip().decode("ascii", "replace")
    end = after.index(b"\r\n\r\n") + 4
    return token, after[:end], after[end:]


# Dropped from a plain HTTP request's head: the proxy's own headers, the connection's, and its
# Host (set again from the target, so the request names the host it was allowed for).
_DROPPED = ("proxy-", "connection:", "keep-alive:", "host:")


def parse_request(head: bytes) -> ProxyRequest:
    try:
        text = head.decode("latin-1")
    except UnicodeError:  # pragma: no cover - latin-1 decodes every byte
        raise Answer(400, "legion: the request cannot be read") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise Answer(400, "legion: the request's first line is not an HTTP/1 proxy request")
    method, target, version = parts
    if method.upper() == "CONNECT":
        host, port = host_port(target, None)
        return ProxyRequest(True, host, port)
    split = urlsplit(target)
    if split.scheme.lower() != "http" or not split.hostname:
        raise Answer(
            400,
            "legion: the egress proxy carries `CONNECT host:port` and plain `http://` requests "
            "in absolute form",
        )
    host, port = host_port(split.netloc.rpartition("@")[2], 80)
    path = split.path or "/"
    if split.query:
        path += "?" + split.query
    headers = [line for line in lines[1:] if line and not line.lower().startswith(_DROPPED)]
    authority = split.netloc.rpartition("@")[2]
    first = [f"{method} {path} {version}", f"Host: {authority}"]
    forwarded = "\r\n".join([*first, *headers, "Connection: close", "", ""])
    return ProxyRequest(False, host, port, forwarded.encode("latin-1"))


def host_port(text: str, default: int | None) -> tuple[str, int]:
    if text.startswith("["):
        close = text.find("]")
        host, rest = text[: close + 1], text[close + 1 :]
        if close < 0 or rest[:1] not in ("", ":"):
            raise Answer(400, f"legion: {text!r} is no host and port")
        port_text = rest[1:]
    else:
        host, _, port_text = text.rpartition(":") if ":" in text else (text, "", "")
    if egress.normal_host(host) is None:
        raise Answer(400, f"legion: {text[:100]!r} is no host")
    if not port_text:
        if default is None:
            raise Answer(400, f"legion: {text[:100]!r} has no port")
        return host, default
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise Answer(400, f"legion: {text[:100]!r} has no valid port")
    return host, int(port_text)
