"""An HTTP server on a free port of 127.0.0.1, served from a thread for as long as a `with`
block lasts: what every fake and loopback site of the tests runs on."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import BaseServer
from typing import Any

Handler = Callable[[Any, Any, BaseServer], BaseHTTPRequestHandler]


@contextmanager
def threaded_server(
    handler: Handler, tls: ssl.SSLContext | None = None
) -> Iterator[ThreadingHTTPServer]:
    """`handler`'s server (over `tls` when given), answering until the block ends; then shut
    down and closed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
