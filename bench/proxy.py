"""What the daemon's model proxy adds to a model call (printed, never asserted).

Target (issue 21): well under 10 ms to the first byte. The scripted model server
(`legion.demo.model_server`) on 127.0.0.1 answers a streamed Messages request; the same request
is sent N times straight to it and N times through a real `ModelProxy` (a capability checked
against a real project database, the credential swapped, the stream metered and recorded),
alternating, and N times through the bridge a confined session reaches the proxy by
(`legion.sandbox.bridge`: loopback to the proxy's Unix socket). Printed: the median and p99 of
the time to the first byte of the answer and to its end, each way, and what the proxy (and the
bridge with it) adds.

Run: .venv/bin/python bench/proxy.py [--requests 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import free_port, make_repo, ms, p99, wait_for
from legion.backends import open_backends
from legion.demo.model_server import FakeModelServer, Scenario
from legion.demo.script import text
from legion.proxy.server import ModelProxy
from legion.proxy.upstreams import upstreams_from
from legion.relay.capabilities import Capabilities
from legion.sandbox import bridge
from legion.services.projects import init_project
from legion.store.sqlite import SqliteStore

REQUEST = {
    "model": "claude-opus-5-5",
    "max_tokens": 100,
    "stream": True,
    "messages": [{"role": "user", "content": "hello"}],
}


def timed(client: httpx.Client, url: str, headers: dict[str, str]) -> tuple[float, float]:
    """Seconds to the first byte of the answer, and to its end."""
    start = time.perf_counter()
    with client.stream("POST", url, json=REQUEST, headers=headers) as response:
        first = None
        for chunk in response.iter_raw():
            if first is None and chunk:
                first = time.perf_counter() - start
        whole = time.perf_counter() - start
    assert response.status_code == 200, response.status_code
    return first or whole, whole


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        project, _ = init_project(make_repo(Path(tmp) / "repo"))
        db = open_backends(project).db
        token = Capabilities(db).mint("LEG-1", mode="plan", session_id="bench")
        script = [Scenario("hello", [[text("a short answer of a few words")]])]
        with FakeModelServer(script) as server:
            env = {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "sk-bench"}
            unix = Path(tmp) / "model.sock"
            proxy = ModelProxy(
                upstreams_from(env), lambda: SqliteStore(db.path, create=False), unix_socket=unix
            )
            proxy.start()
            port = free_port()
            waiting = [sys.executable, "-c", "import time; time.sleep(3600)"]
            bridged = subprocess.Popen(bridge.command(waiting, port, str(unix)))
            try:
                direct = f"{server.base_url}/v1/messages"
                proxied = f"{proxy.url}/v1/messages"
                through_bridge = f"http://127.0.0.1:{port}/v1/messages"
                ways: dict[str, list[tuple[float, float]]] = {
                    "direct": [],
                    "proxy": [],
                    "bridge": [],
                }
                capability = {"authorization": f"Bearer {token}"}
                with httpx.Client(timeout=30) as client:
                    wait_for(port)
                    for _ in range(5):  # warm every way up
                        timed(client, direct, {"x-api-key": "sk-bench"})
                        timed(client, proxied, capability)
                        timed(client, through_bridge, capability)
                    for _ in range(options.requests):
                        ways["direct"].append(timed(client, direct, {"x-api-key": "sk-bench"}))
                        ways["proxy"].append(timed(client, proxied, capability))
                        ways["bridge"].append(timed(client, through_bridge, capability))
            finally:
                bridged.terminate()  # passed on to its child, which ends with it
                bridged.wait()
                proxy.stop()
    figures = {
        way: {
            "first": [f for f, _ in samples],
            "whole": [w for _, w in samples],
        }
        for way, samples in ways.items()
    }
    print(
        f"model proxy, {options.requests} streamed requests each way to the scripted server on "
        "127.0.0.1 (target: well under 10 ms added to the first byte):"
    )
    for part, label in (("first", "first byte"), ("whole", "whole response")):
        direct_median = statistics.median(figures["direct"][part])
        print(
            f"  {label}: direct median {ms(direct_median)}, p99 {ms(p99(figures['direct'][part]))}"
        )
        for way, name in (("proxy", "through the proxy"), ("bridge", "bridge + proxy")):
            median = statistics.median(figures[way][part])
            print(
                f"    {name}: median {ms(median)}, p99 {ms(p99(figures[way][part]))}; "
                f"added median {ms(median - direct_median)}"
            )


if __name__ == "__main__":
    main()
