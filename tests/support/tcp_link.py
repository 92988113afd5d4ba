"""A network link a test can cut: a TCP relay on 127.0.0.1 to a server's port. `cut()` drops
every connection through it and refuses new ones, as a partition whose packets are rejected;
`restore()` lets them through again. One host of a simulated fleet reaches the store through
it, the others directly."""

from __future__ import annotations

import contextlib
import socket
import threading


class CuttableLink:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._cut = threading.Event()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        threading.Thread(target=self._accept, name="link-accept", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # closed
            if self._cut.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            pair = (client, upstream)
            with self._lock:
                self._pairs.append(pair)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pump, args=(source, sink, pair), name="link-pump", daemon=True
                ).start()

    def _pump(
        self, source: socket.socket, sink: socket.socket, pair: tuple[socket.socket, socket.socket]
    ) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            self._drop(pair)

    def _drop(self, pair: tuple[socket.socket, socket.socket]) -> None:
        for end in pair:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()
        with self._lock:
            if pair in self._pairs:
                self._pairs.remove(pair)

    def cut(self) -> None:
        self._cut.set()
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            self._drop(pair)

    def restore(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._server.close()
        self.cut()
