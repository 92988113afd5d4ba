"""A confined session's one way to the model: `python -m legion.sandbox.bridge PORT SOCKET --
ARGV...`, the first process inside its sandbox.

The session has a network of its own with nothing but loopback (bubblewrap's
`--unshare-net`), so neither the model's API nor any other address on the machine is
reachable. Its CLI was told the model proxy is at `http://127.0.0.1:PORT`: this process
listens there, inside the session's network, and carries each connection, both ways and as
the bytes come (a stream is never held back), to the daemon's proxy on its Unix socket, which
the sandbox shows. It runs ARGV (the CLI) as its child and ends with it, with its exit code.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from types import FrameType

_CHUNK = 64 * 1024


def command(port: int, proxy_socket: str, argv: Sequence[str]) -> list[str]:
    """The argv that runs `argv` behind a bridge to `proxy_socket`, under this Python."""
    return [sys.executable, "-m", "legion.sandbox.bridge", str(port), proxy_socket, "--", *argv]


def _pump(source: socket.socket, target: socket.socket) -> None:
    """Copy `source` to `target` until it ends, then tell `target` no more is coming."""
    try:
        while chunk := source.recv(_CHUNK):
            target.sendall(chunk)
    except OSError:
        pass  # either end went away: the other pump sees it too
    finally:
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)


def _carry(client: socket.socket, proxy_socket: str) -> None:
    with client:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with upstream:
            try:
                upstream.connect(proxy_socket)
            except OSError:
                return  # no daemon: the CLI sees a closed connection and retries
            back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join()


def _serve(listener: socket.socket, proxy_socket: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_carry, args=(client, proxy_socket), daemon=True).start()


def main(args: Sequence[str]) -> int:
    if len(args) < 4 or args[2] != "--" or not args[0].isdigit():
        print("usage: python -m legion.sandbox.bridge PORT SOCKET -- ARGV...", file=sys.stderr)
        return 2
    port, proxy_socket, argv = int(args[0]), args[1], list(args[3:])
    try:
        listener = socket.create_server(("127.0.0.1", port))
    except OSError as exc:
        print(f"legion: the sandbox's bridge cannot listen on port {port}: {exc}", file=sys.stderr)
        return 1
    threading.Thread(target=_serve, args=(listener, proxy_socket), daemon=True).start()
    try:
        child = subprocess.Popen(argv)
    except OSError as exc:
        print(f"legion: cannot start {argv[0]}: {exc}", file=sys.stderr)
        return 127

    def forward(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):
            child.send_signal(signum)

    # The terminal's Ctrl-C reaches the CLI itself (same process group); what is sent to this
    # process alone (tmux's SIGHUP, a SIGTERM) is passed on.
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    for signum in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, forward)
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)  # the pumps' threads end with the process
