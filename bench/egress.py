"""What the egress proxy costs a confined build (printed, never asserted).

A static file server on 127.0.0.1 stands for a package registry. The same small file is fetched
N times straight from it and N times the way a confined session's `pip` fetches it: to its
bridge's egress port (`legion.sandbox.bridge`, here unconfined), through the daemon's egress
proxy on its Unix socket (`legion.proxy.egress.EgressProxy`: the capability looked up in a real
project database, the allow-list checked, the name resolved), alternating. Then one large file
each way, for throughput. Printed: the median and p99 of a small fetch each way and what the
proxy adds, and MiB/s for the large one (the proxy's own rate limit is 32 MiB/s a session
after a burst of as much: a download of 64 MiB shows about twice that).

Run: .venv/bin/python bench/egress.py [--requests 200] [--mib 64]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import free_port, make_repo, ms, p99, wait_for
from legion.backends import open_backends
from legion.core import egress
from legion.proxy.egress import EgressProxy
from legion.relay.capabilities import Capabilities
from legion.sandbox import bridge
from legion.services.projects import init_project
from legion.store.sqlite import SqliteStore


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def fetch(client: httpx.Client, url: str) -> float:
    start = time.perf_counter()
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--mib", type=int, default=64)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        root = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(root / "state")
        project, _ = init_project(make_repo(root / "repo"))
        db = open_backends(project).db
        token = Capabilities(db).mint("LEG-1", mode="implement", session_id="bench")
        site = root / "site"
        site.mkdir()
        (site / "small.whl").write_bytes(os.urandom(16 * 1024))
        (site / "large.whl").write_bytes(os.urandom(options.mib * 1024 * 1024))
        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=site))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        origin = int(server.server_address[1])
        unix = root / "egress.sock"
        proxy = EgressProxy(
            unix, egress.parse([f"localhost:{origin}"]), lambda: SqliteStore(db.path, create=False)
        )
        proxy.start()
        port = free_port()
        waiting = [sys.executable, "-c", "import time; time.sleep(3600)"]
        env = {**os.environ, bridge.CAPABILITY_ENV: token}
        bridged = subprocess.Popen(
            bridge.command(waiting, egress=bridge.Egress(port, str(unix))), env=env
        )
        try:
            wait_for(port)
            direct = httpx.Client(timeout=60)
            proxied = httpx.Client(timeout=60, proxy=f"http://127.0.0.1:{port}")
            url = f"http://localhost:{origin}"
            for _ in range(5):  # warm both ways up
                fetch(direct, f"{url}/small.whl")
                fetch(proxied, f"{url}/small.whl")
            straight: list[float] = []
            through: list[float] = []
            for _ in range(options.requests):
                straight.append(fetch(direct, f"{url}/small.whl"))
                through.append(fetch(proxied, f"{url}/small.whl"))
            large_direct = fetch(direct, f"{url}/large.whl")
            large_proxied = fetch(proxied, f"{url}/large.whl")
        finally:
            bridged.terminate()  # passed on to its child, as a hangup of its window is
            bridged.wait()
            proxy.stop()
            server.shutdown()
        added = statistics.median(through) - statistics.median(straight)
        alone = ms(statistics.median(straight))
        print(
            f"a 16 KiB fetch ({options.requests} each way): direct {alone}"
            f" (p99 {ms(p99(straight))}), through the bridge and the egress proxy "
            f"{ms(statistics.median(through))} (p99 {ms(p99(through))}): +{ms(added)}"
        )
        mib = options.mib
        print(
            f"a {mib} MiB download: direct {mib / large_direct:.0f} MiB/s, through the egress "
            f"proxy {mib / large_proxied:.0f} MiB/s (limit: 32 MiB/s after a 32 MiB burst)"
        )


if __name__ == "__main__":
    main()
