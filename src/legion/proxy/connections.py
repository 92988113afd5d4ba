"""The model proxy's connections and their bounds (`legion.proxy.server`): at most
`MAX_CONNECTIONS` served at once (one more is answered 503 and closed by the accepting thread),
each idle for at most `IDLE_TIMEOUT_S`, and a request's head and body read by their deadlines
(past one, 408 and the connection closed): a sender that trickles holds no thread for ever.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import socket
import socketserver
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

    from .server import ModelProxy

logger = logging.getLogger(__name__)

# At most this many connections are served at once (each holds a thread); one more is told
# 503 and closed: a session opening connections without end takes no more than these.
MAX_CONNECTIONS = 128
# A connection that sends nothing (between requests, or in the middle of one) for this long is
# closed: a CLI opens a new one; a slow sender holds no thread for ever.
IDLE_TIMEOUT_S = 120.0
# A request's head is read whole within this long of its first byte, and its body within
# `BODY_DEADLINE_S` and a second for each `MIN_BODY_RATE` bytes it declares; later, it is told
# 408 and its connection closed: a sender that trickles a byte within each idle timeout holds
# no thread for ever. (A CLI sends over loopback or its sandbox's bridge: far faster.)
HEAD_DEADLINE_S = 30.0
BODY_DEADLINE_S = 30.0
MIN_BODY_RATE = 64 * 1024


_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
)


class Bounded(socketserver.ThreadingMixIn):
    """A thread a connection, at most `proxy.slots` at once: one more is answered 503 and
    closed by the accepting thread, which never waits on it."""

    daemon_threads = True
    proxy: ModelProxy

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.proxy.slots.acquire(blocking=False):
            body = json.dumps(
                {
                    "type": "error",
                    "error": {
                        "type": "overloaded_error",
                        "message": "Legion's model proxy serves no more connections now",
                    },
                }
            ).encode()
            logger.debug("a connection refused: the model proxy serves all it may already")
            try:
                request.settimeout(1.0)
                request.sendall(_BUSY % (len(body), body))
                request.shutdown(socket.SHUT_WR)
            except OSError as exc:
                logger.debug("the refused connection was not told why: %s", exc)
            request.close()
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.proxy.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.proxy.slots.release()


class TcpServer(Bounded, ThreadingHTTPServer):
    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], proxy: ModelProxy
    ) -> None:
        self.proxy = proxy
        super().__init__(address, handler)


class UnixServer(Bounded, socketserver.UnixStreamServer):
    def __init__(self, path: str, handler: type[BaseHTTPRequestHandler], proxy: ModelProxy) -> None:
        self.proxy = proxy
        super().__init__(path, handler)


_LATE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
)


class Late(Exception):
    """A request's head or body did not come by its deadline (never a `TimeoutError`, which
    `http.server` takes for an idle connection and closes without a word)."""


class Deadlines(io.RawIOBase):
    """The connection's bytes, for its `rfile`: each read waits at most the idle timeout, and
    never past `by` (a `time.monotonic()` instant, while a request's head or body is read)."""

    def __init__(self, connection: socket.socket, idle: float | None) -> None:
        self.connection = connection
        self.idle = idle
        self.by: float | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        wait, late = self.idle, False
        if self.by is not None:
            left = self.by - time.monotonic()
            if left <= 0:
                raise Late
            late = wait is None or left <= wait
            wait = left if late else wait
        self.connection.settimeout(wait)
        try:
            return self.connection.recv_into(buffer)
        except TimeoutError:
            if late:
                raise Late from None
            raise
        finally:
            self.connection.settimeout(self.idle)  # its answer is written with the idle one


class DeadlineHandler(BaseHTTPRequestHandler):
    """A connection's handler whose reads are bounded: idle for at most its `timeout`, each
    request's head read within the proxy's `head_deadline` (408 past it); the proxy's handler
    (`legion.proxy.server`) sets `_reading.by` for the body it reads."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the CLIs use it
    disable_nagle_algorithm = True  # each chunk goes out as it comes, not after a delayed ACK
    timeout = IDLE_TIMEOUT_S
    server: TcpServer | UnixServer
    _reading: Deadlines
    _buffered: io.BufferedReader

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the daemon's stderr is its log: no line per request

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the connection stays open: read through the deadlines instead
        self._reading = Deadlines(self.connection, self.timeout)
        self._buffered = io.BufferedReader(self._reading)
        self.rfile = self._buffered

    def handle_one_request(self) -> None:
        """One request, its head read within `head_deadline` of its first byte (before that
        byte, the connection may idle up to the idle timeout, as between requests)."""
        try:
            if not self._buffered.peek(1):
                self.close_connection = True  # the client closed it
                return
        except OSError as exc:  # idle past the timeout, or reset
            logger.debug("a model proxy connection closed: %s", exc)
            self.close_connection = True
            return
        self._reading.by = time.monotonic() + self.server.proxy.head_deadline
        try:
            super().handle_one_request()
        except Late:
            logger.debug("a request to the model proxy was not sent in time: 408")
            self.close_connection = True
            self._late()
        finally:
            self._reading.by = None

    def _late(self) -> None:
        body = json.dumps(
            {
                "type": "error",
                "error": {
                    "type": "timeout_error",
                    "message": "Legion's model proxy: the request was not sent in time",
                },
            }
        ).encode()
        with contextlib.suppress(OSError):
            self.connection.settimeout(1.0)
            self.connection.sendall(_LATE % (len(body), body))
