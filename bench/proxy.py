"""What the daemon's model proxy adds to a model call (printed, never asserted).

Target (issue 21): well under 10 ms to the first byte. The scripted model server
(`legion.demo.model_server`) on 127.0.0.1 answers a streamed Messages request; the same request
is sent N times straight to it and N times through a real `ModelProxy` (a capability checked
against a real project database, the credential swapped, the stream metered and recorded),
alternating. Printed: the median and p99 of the time to the first byte of the answer and to
its end, both ways, and what the proxy adds.

Run: .venv/bin/python bench/proxy.py [--requests 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import make_repo
from legion.backends import open_backends
from legion.demo.model_server import FakeModelServer, Scenario
from legion.demo.scripted import text
from legion.embedded.db import Database
from legion.projects import init_project
from legion.proxy.server import ModelProxy, upstream_from
from legion.relay.capabilities import Capabilities

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


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) > 1 else values[0]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


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
            proxy = ModelProxy(upstream_from(env), lambda: Database(db.path, create=False))
            proxy.start()
            try:
                direct = f"{server.base_url}/v1/messages"
                proxied = f"{proxy.url}/v1/messages"
                ways: dict[str, list[tuple[float, float]]] = {"direct": [], "proxy": []}
                with httpx.Client(timeout=30) as client:
                    for _ in range(5):  # warm both ways up
                        timed(client, direct, {"x-api-key": "sk-bench"})
                        timed(client, proxied, {"authorization": f"Bearer {token}"})
                    for _ in range(options.requests):
                        ways["direct"].append(timed(client, direct, {"x-api-key": "sk-bench"}))
                        ways["proxy"].append(
                            timed(client, proxied, {"authorization": f"Bearer {token}"})
                        )
            finally:
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
        proxy_median = statistics.median(figures["proxy"][part])
        print(
            f"  {label}: direct median {ms(direct_median)}, p99 "
            f"{ms(p99(figures['direct'][part]))}; through the proxy median {ms(proxy_median)}, "
            f"p99 {ms(p99(figures['proxy'][part]))}; "
            f"added median {ms(proxy_median - direct_median)}"
        )


if __name__ == "__main__":
    main()
