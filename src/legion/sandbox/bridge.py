"""A confined session's first process (its pid 1): `python -m legion.sandbox.bridge [PORT
SOCKET] [--egress EPORT ESOCKET [--forward ADDRESS PORT HOST]...] -- ARGV...`.

It runs ARGV (the CLI) as its child and ends with it, with its exit code. As the sandbox's
init it passes on what is sent to it alone (a SIGTERM) and reaps what its child leaves
behind. The sandbox is a session of its own (bubblewrap's `--new-session`: no confined process
may push keystrokes into the window), so the window's terminal signals no one inside: this
process watches it and passes on a resize (SIGWINCH, the CLI draws to the new size) and a
hangup (SIGHUP: the CLI then ends as it does outside, its transcript written to the end;
bubblewrap's own `--die-with-parent` would SIGKILL it first).

Given PORT and SOCKET it is also the session's one way to the model: the session has a network
of its own with nothing but loopback (bubblewrap's `--unshare-net`), so neither the model's API
nor any other address on the machine is reachable. Its CLI was told the model proxy is at
`http://127.0.0.1:PORT`: this process listens there, inside the session's network, and carries
each connection, both ways and as the bytes come (a stream is never held back), to the
daemon's proxy on its Unix socket, which the sandbox shows.

Given `--egress EPORT ESOCKET` (`sandbox_egress` allows something), it also listens on EPORT,
where the session's HTTP clients were told their proxy is (`HTTPS_PROXY`), and carries each
connection to the daemon's egress proxy (`legion.proxy.egress`) after one line that says the
session's capability, read from this process's environment (`LEGION_CAPABILITY`), never from
its command line, which `ps` shows outside the sandbox. Each `--forward ADDRESS PORT HOST` (a
local service `sandbox_egress` lists by its address) is shown at its own address inside: a
connection there is carried to the egress proxy as a `CONNECT HOST:PORT`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType

logger = logging.getLogger(__name__)

_CHUNK = 64 * 1024
RESEND_S = 1.0  # a forwarded signal is sent once more after this
WATCH_MS = 200  # how often the window's size is looked at


# Where the bridge finds the session's capability (`legion.relay.CAPABILITY_ENV`).
CAPABILITY_ENV = "LEGION_CAPABILITY"
EGRESS_PREAMBLE = b"LEGION-EGRESS "
_ANSWER_BYTES = 16 * 1024  # the most of the egress proxy's answer to a forward's CONNECT read


@dataclass(frozen=True)
class Egress:
    """The session's way to the egress proxy: the `port` its HTTP clients use inside, the
    proxy's `socket`, and the local services shown at their own address inside (`forwards`:
    (address, port, the host to `CONNECT` to), `legion.core.egress.forwarded`)."""

    port: int
    socket: str
    forwards: tuple[tuple[str, int, str], ...] = ()


def command(
    argv: Sequence[str],
    port: int | None = None,
    proxy_socket: str | None = None,
    *,
    egress: Egress | None = None,
) -> list[str]:
    """The argv that runs `argv` under this process (under this Python), bridging `port` to
    `proxy_socket` when given, and the egress proxy (`egress`) when given (a workspace's setup
    has it alone: no model)."""
    bridged = [] if port is None or proxy_socket is None else [str(port), proxy_socket]
    if egress is not None:
        bridged += ["--egress", str(egress.port), egress.socket]
        for address, forwarded, host in egress.forwards:
            bridged += ["--forward", address, str(forwarded), host]
    return [sys.executable, "-m", "legion.sandbox.bridge", *bridged, "--", *argv]


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


def _carry(client: socket.socket, proxy_socket: str, first: bytes = b"", connect: str = "") -> None:
    """`client`'s connection, both ways, to `proxy_socket`, after `first` (the egress proxy's
    preamble); with `connect`, a destination the egress proxy is first asked for (its answer
    read and dropped: the client sees only the destination's bytes)."""
    with client:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with upstream:
            try:
                upstream.connect(proxy_socket)
                if connect:
                    first += f"CONNECT {connect} HTTP/1.1\r\nHost: {connect}\r\n\r\n".encode()
                if first:
                    upstream.sendall(first)
                if connect:
                    rest = _connected(upstream)
                    if rest is None:
                        return  # refused: the client sees its connection closed
                    if rest:
                        client.sendall(rest)
            except OSError:
                return  # no daemon: the CLI sees a closed connection and retries
            back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join()


def _connected(upstream: socket.socket) -> bytes | None:
    """The egress proxy's answer to a `CONNECT`, read: what came after it when it said 200,
    else None."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = upstream.recv(_ANSWER_BYTES)
        if not chunk or len(answer) > _ANSWER_BYTES:
            return None
        answer += chunk
    head, _, rest = answer.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split(b" ")
    return rest if len(status) > 1 and status[1] == b"200" else None


def _serve(
    listener: socket.socket, proxy_socket: str, first: bytes = b"", connect: str = ""
) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(
            target=_carry, args=(client, proxy_socket, first, connect), daemon=True
        ).start()


def _listen(address: str, port: int) -> socket.socket | None:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        return socket.create_server((address, port), family=family)
    except OSError as exc:
        logger.warning("the sandbox's bridge cannot listen on %s:%d: %s", address, port, exc)
        return None


def _start_egress(egress: Egress, taken: set[int]) -> None:
    """Listen for the session's egress (`egress.port`) and its forwarded local services; a
    session without a capability gets none (said once on its window)."""
    token = os.environ.get(CAPABILITY_ENV, "")
    if not token:
        logger.warning("no capability in the session's environment: no egress")
        return
    first = EGRESS_PREAMBLE + token.encode() + b"\n"
    listener = _listen("127.0.0.1", egress.port)
    if listener is not None:
        threading.Thread(target=_serve, args=(listener, egress.socket, first), daemon=True).start()
    for address, port, host in egress.forwards:
        if (address in ("127.0.0.1", "::1") and port in taken) or port == egress.port:
            logger.warning("%s:%d is the bridge's own port: not forwarded", address, port)
            continue
        forward = _listen(address, port)
        if forward is None:
            continue
        connect = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        threading.Thread(
            target=_serve, args=(forward, egress.socket, first, connect), daemon=True
        ).start()


def _usage() -> int:
    logger.error(
        "usage: python -m legion.sandbox.bridge [PORT SOCKET] [--egress EPORT ESOCKET "
        "[--forward ADDRESS PORT HOST]...] -- ARGV..."
    )
    return 2


def _parse_bridged(bridged: list[str]) -> tuple[int | None, str, Egress | None] | None:
    """[PORT SOCKET] [--egress EPORT ESOCKET [--forward ADDRESS PORT HOST]...], not empty;
    None: not so."""
    port: int | None = None
    proxy_socket, rest = "", bridged
    if rest and rest[0] != "--egress":
        if len(rest) < 2 or not rest[0].isdigit():
            return None
        port, proxy_socket, rest = int(rest[0]), rest[1], rest[2:]
    if not rest:
        return port, proxy_socket, None
    if len(rest) < 3 or rest[0] != "--egress" or not rest[1].isdigit():
        return None
    egress_port, egress_socket, rest = int(rest[1]), rest[2], rest[3:]
    forwards: list[tuple[str, int, str]] = []
    while rest:
        if len(rest) < 4 or rest[0] != "--forward" or not rest[2].isdigit():
            return None
        forwards.append((rest[1], int(rest[2]), rest[3]))
        rest = rest[4:]
    return port, proxy_socket, Egress(egress_port, egress_socket, tuple(forwards))


def main(args: Sequence[str]) -> int:
    if "--" not in args:
        return _usage()
    split = list(args).index("--")
    bridged, argv = list(args[:split]), list(args[split + 1 :])
    parsed = _parse_bridged(bridged) if bridged else None
    if not argv or (bridged and parsed is None):
        return _usage()
    if parsed is not None:
        port, proxy_socket, egress = parsed
        if port is not None:
            try:
                listener = socket.create_server(("127.0.0.1", port))
            except OSError as exc:
                logger.error("the sandbox's bridge cannot listen on %d: %s", port, exc)
                return 1
            threading.Thread(target=_serve, args=(listener, proxy_socket), daemon=True).start()
        if egress is not None:
            _start_egress(egress, set() if port is None else {port})
    # Handlers, not SIG_IGN: the child gets the default ones back when it execs.
    signal.signal(signal.SIGINT, lambda signum, frame: None)  # an interrupt is the CLI's own
    started: list[subprocess.Popen[bytes]] = []
    pending: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        if not started:
            pending.append(signum)  # passed on as soon as the CLI runs
            return
        child = started[0]
        with contextlib.suppress(OSError):
            child.send_signal(signum)
        # Once more a moment later, if the CLI still runs: one that came while the child was
        # between its fork and its exec went to a copy of this handler, and was lost there.
        timer = threading.Timer(RESEND_S, _resend, args=(child, signum))
        timer.daemon = True
        timer.start()

    # Before the CLI starts: as a namespace's pid 1 this process ignores a signal it has no
    # handler for, so a hangup that came while it was starting was lost; the window may be
    # gone already, and then there is nothing to run for.
    for signum in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, forward)
    if _hung_up():
        return 128 + signal.SIGHUP
    try:
        started.append(subprocess.Popen(argv))
    except OSError as exc:
        logger.error("cannot start %s: %s", argv[0], exc)
        return 127
    for waiting in pending:
        forward(waiting, None)
    if os.isatty(0):
        watch = threading.Thread(target=_watch_terminal, args=(started[0], forward), daemon=True)
        watch.start()
    return _reap_until(started[0].pid)


def _window_size() -> os.terminal_size | None:
    try:
        return os.get_terminal_size(0)
    except OSError:
        return None


def _watch_terminal(
    child: subprocess.Popen[bytes], forward: Callable[[int, FrameType | None], None]
) -> None:
    """Pass on to `child` what its terminal would signal it, were it the terminal's session:
    a new size (SIGWINCH), a hangup (SIGHUP, then nothing more). Until the process ends."""
    size = _window_size()
    poller = select.poll()
    poller.register(0, 0)  # no input asked for: a hangup and an error are reported anyway
    while True:
        if poller.poll(WATCH_MS):
            forward(signal.SIGHUP, None)
            return
        now = _window_size()
        if now != size:
            size = now
            with contextlib.suppress(OSError):
                child.send_signal(signal.SIGWINCH)


def _hung_up() -> bool:
    """Whether this process's terminal (its window) hung up already: its input, a character
    device, says so (a hung-up terminal is no longer a tty to `isatty`)."""
    try:
        if not stat.S_ISCHR(os.fstat(0).st_mode):
            return False  # not a terminal (a pipe's end says hang-up too)
    except OSError:
        return False
    poller = select.poll()
    poller.register(0, select.POLLIN)
    return any(events & (select.POLLHUP | select.POLLERR) for _, events in poller.poll(0))


def _resend(child: subprocess.Popen[bytes], signum: int) -> None:
    # The bridge exits as soon as it reaps the CLI: until then its pid is the CLI's (alive or
    # a zombie), never another process's.
    with contextlib.suppress(OSError):
        os.kill(child.pid, signum)


def _reap_until(pid: int) -> int:
    """Reap every child that ends (orphans come to pid 1) until `pid` does; its exit code."""
    while True:
        try:
            ended, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 1  # not ours any more: nothing to wait for
        if ended == pid:
            return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    from legion.diagnostics.log import setup

    setup(strict=False)  # a session is never failed for its log
    code = main(sys.argv[1:])
    sys.stdout.flush()
    # The pumps' threads end with the process; a signal's death is 128 + its number.
    os._exit(128 - code if code < 0 else code)
