"""The egress proxy's bounds and refusals (`legion.proxy.egress`), asked on its real socket with
a real capability in a real store, to a loopback echo server: a malformed request, a head that
does not come in time, a session over its connections, a run over its bytes, a name that does
not resolve. (What a confined session reaches through it: `test_sandbox_egress.py`.)"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from legion.core import egress
from legion.proxy.egress import EgressProxy
from legion.relay.capabilities import Capabilities
from legion.sandbox import bridge
from legion.store.sqlite import SqliteStore
from tests.support.sandbox import require_sandbox


@pytest.fixture
def echo() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=_echo, args=(connection,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield int(server.getsockname()[1])
    server.close()


def _echo(connection: socket.socket) -> None:
    with connection:
        try:
            while data := connection.recv(65536):
                connection.sendall(data)
        except OSError:
            pass


def _ask(path: Path, data: bytes) -> socket.socket:
    client = socket.socket(socket.AF_UNIX)
    client.settimeout(20)
    client.connect(str(path))
    client.sendall(data)
    return client


def _status(client: socket.socket) -> bytes:
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = client.recv(4096)
        if not chunk:
            break
        head += chunk
    return head.split(b"\r\n", 1)[0]


def test_the_egress_proxy_bounds_what_it_carries(tmp_path: Path, echo: int) -> None:
    db = tmp_path / "legion.db"
    token = Capabilities(SqliteStore(db)).mint("LEG-1", session_id="s-1")
    path = tmp_path / "egress.sock"
    rules = egress.parse([f"127.0.0.1:{echo}", "nothing.invalid"])
    server = EgressProxy(
        path,
        rules,
        lambda: SqliteStore(db),
        max_per_session=1,
        max_bytes_per_run=4096,
        head_deadline=0.5,
    )
    server.start()
    preamble = b"LEGION-EGRESS " + token.encode() + b"\n"
    connect = b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % echo
    try:
        with _ask(path, preamble + b"GET /relative HTTP/1.1\r\n\r\n") as client:
            assert _status(client) == b"HTTP/1.1 400 Bad Request"
        with _ask(path, preamble + b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n" % echo) as client:
            assert _status(client) == b"HTTP/1.1 408 Request Timeout"  # its end never came
        with _ask(path, preamble + b"CONNECT nothing.invalid:443 HTTP/1.1\r\n\r\n") as client:
            assert _status(client) == b"HTTP/1.1 502 Bad Gateway"
        with _ask(path, preamble + connect) as first:
            assert _status(first) == b"HTTP/1.1 200 Connection established"
            first.sendall(b"ping")
            assert first.recv(10) == b"ping"
            with _ask(path, preamble + connect) as second:  # one connection a session here
                assert _status(second) == b"HTTP/1.1 429 Too Many Requests"
            first.sendall(b"x" * 8192)  # over the run's bytes: closed
            received = b""
            while chunk := first.recv(65536):
                received += chunk
            assert len(received) < 8192
        status = b"HTTP/1.1 429 Too Many Requests"
        for _ in range(100):  # until the first connection's end is seen there
            with _ask(path, preamble + connect) as again:
                status = _status(again)
            if b" 429 " not in status:
                break
            time.sleep(0.05)
        assert status == b"HTTP/1.1 403 Forbidden"  # the run's bytes are spent
    finally:
        server.stop()
    assert not path.exists()


def test_the_bridge_command_says_its_egress_and_forwards() -> None:
    argv = bridge.command(
        ["claude"], 4000, "/run/model.sock", egress=bridge.Egress(3128, "/run/e.sock", (
            ("127.0.0.1", 8080, "localhost"), ("::1", 9090, "::1")))
    )  # fmt: skip
    split = argv.index("--")
    assert bridge._parse_bridged(argv[3:split]) == (
        4000,
        "/run/model.sock",
        bridge.Egress(
            3128, "/run/e.sock", (("127.0.0.1", 8080, "localhost"), ("::1", 9090, "::1"))
        ),
    )
    # A workspace's setup: the egress proxy alone, no model.
    alone = bridge.command(["bash"], egress=bridge.Egress(3128, "/e.sock"))
    assert alone[3:] == ["--egress", "3128", "/e.sock", "--", "bash"]
    assert bridge._parse_bridged(alone[3:-2]) == (None, "", bridge.Egress(3128, "/e.sock"))
    assert bridge.command(["claude"])[3:] == ["--", "claude"]
    assert bridge._parse_bridged(["4000", "/m", "--egress", "x", "/e"]) is None
    assert bridge._parse_bridged(["4000", "/m", "--egress", "1", "/e", "--forward", "a"]) is None


def test_the_daemon_serves_its_egress_proxy_only_while_the_list_allows_something(
    project: Path, tmp_path: Path
) -> None:
    """The real daemon (in this process; no CLI, so the controller's start fails): with
    `sandbox_egress` set, its egress socket answers beside the model proxy's (a stranger is
    refused) and `legion status` says what is allowed; stopped, the socket is gone."""
    import json
    import shutil
    import subprocess
    import tempfile

    from legion.config import load_project
    from legion.daemon import Daemon, DaemonConfig
    from legion.proxy import EGRESS_SOCKET_NAME
    from legion.relay import socket_path
    from tests.support.cli import run_legion

    tmux_dir = Path(tempfile.mkdtemp(prefix="lge-"))
    env = dict(os.environ) | {
        "LEGION_TMUX_SOCKET": str(tmux_dir / "sock"),
        "LEGION_TMUX_CONFIG": "/dev/null",
        "LEGION_CLAUDE_BIN": str(tmp_path / "no-such-claude"),
        "LEGION_SANDBOX_EGRESS": "@registries, 127.0.0.1:8080",
    }
    loaded = load_project(project, env=env)
    where = socket_path(loaded.state_dir, EGRESS_SOCKET_NAME)
    seen: list[bytes] = []

    def look(backends: object) -> bool:
        with _ask(where, b"LEGION-EGRESS stranger\nCONNECT pypi.org:443 HTTP/1.1\r\n\r\n") as c:
            seen.append(_status(c))
        status = run_legion("status", "--json", cwd=project, env=env)
        allowed = json.loads(status.stdout)["egress"]["allowed"]
        assert allowed[0] == "pypi.org:443" and allowed[-1] == "127.0.0.1:8080"
        assert "egress:     pypi.org:443, " in run_legion("status", cwd=project, env=env).stdout
        return True

    try:
        Daemon(loaded, DaemonConfig(tick=0.2, run_for=20.0, stop_when=look), env).run()
    finally:
        subprocess.run(
            ["tmux", "-S", str(tmux_dir / "sock"), "kill-server"], capture_output=True, check=False
        )
        shutil.rmtree(tmux_dir, ignore_errors=True)
    assert seen == [b"HTTP/1.1 407 Proxy Authentication Required"]
    assert not where.exists()


def test_a_session_asking_name_after_name_fills_neither_the_store_nor_the_action_log(
    tmp_path: Path,
) -> None:
    """Each refusal is counted and a session's first to a host said in the action log: a
    session that asks for a new made-up name each time must not make a row and a line each."""
    from legion.proxy.egress_refusals import MAX_REFUSED_PER_SESSION, counting, refusal_counts
    from legion.store.actionlog import ActionLog

    db = tmp_path / "legion.db"
    token = Capabilities(SqliteStore(db)).mint("LEG-1", session_id="s-1")
    path = tmp_path / "egress.sock"
    server = EgressProxy(
        path, egress.parse(["pypi.org"]), lambda: SqliteStore(db),
        refused=counting(lambda: SqliteStore(db)),
    )  # fmt: skip
    server.start()
    preamble = b"LEGION-EGRESS " + token.encode() + b"\n"
    asked = MAX_REFUSED_PER_SESSION + 30
    try:
        for number in range(asked):
            request = b"CONNECT n%d.attacker.example:443 HTTP/1.1\r\n\r\n" % number
            with _ask(path, preamble + request) as client:
                assert _status(client) == b"HTTP/1.1 403 Forbidden"
    finally:
        server.stop()
    store = SqliteStore(db)
    counts = refusal_counts(store, limit=1000)
    assert len(counts) <= MAX_REFUSED_PER_SESSION + 1
    assert sum(count.count for count in counts) == asked  # every one counted still
    said = [entry for entry in ActionLog(store).tail(1000) if entry.action == "egress_refused"]
    assert len(said) <= MAX_REFUSED_PER_SESSION + 1
    assert "(other hosts) (30 times)" in [count.line().split(": ", 1)[1] for count in counts]


def test_a_sandbox_holding_connections_silent_leaves_the_others_theirs(
    tmp_path: Path, echo: int
) -> None:
    """A confined process (bubblewrap, a network of its own) opens connection after connection
    to the egress proxy and says nothing: it holds only its sandbox's share, never every slot,
    and another session's request is carried at once."""
    import subprocess
    import sys

    found = require_sandbox().bwrap
    assert found is not None
    db = tmp_path / "legion.db"
    token = Capabilities(SqliteStore(db)).mint("LEG-2", session_id="s-2")
    path = tmp_path / "egress.sock"
    server = EgressProxy(
        path, egress.parse([f"127.0.0.1:{echo}"]), lambda: SqliteStore(db),
        max_connections=8, max_per_peer=3, head_deadline=20,
    )  # fmt: skip
    server.start()
    hold = (
        "import socket, sys, time\n"
        "held = []\n"
        "for _ in range(20):\n"
        "    s = socket.socket(socket.AF_UNIX)\n"
        "    s.connect(sys.argv[1])\n"
        "    held.append(s)\n"
        "print('held', flush=True)\n"
        "time.sleep(30)\n"
    )
    hostile = subprocess.Popen(
        [found, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net",
         "--unshare-pid", "--die-with-parent", "--bind", str(tmp_path), str(tmp_path),
         sys.executable, "-c", hold, str(path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert hostile.stdout is not None and hostile.stdout.readline() == "held\n"
        time.sleep(0.2)  # its connections accepted
        preamble = b"LEGION-EGRESS " + token.encode() + b"\n"
        with _ask(path, preamble + b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % echo) as client:
            assert _status(client) == b"HTTP/1.1 200 Connection established"
            client.sendall(b"ping")
            assert client.recv(10) == b"ping"
    finally:
        hostile.kill()
        hostile.wait()
        server.stop()
