"""A confined session started as the daemon starts one, with `sandbox_egress` set: its bridge
listens for its HTTP clients, its environment points them there, and what the list allows is
fetched through the daemon's egress proxy. Seen from a stand-in `codex` confined by bubblewrap
(skipped where the machine forbids its namespaces), the proxy a real one on its socket."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from legion import proxy
from legion.backends import open_backends, open_workers
from legion.config import load_project
from legion.core import egress
from legion.demo.codex_config import API_KEY_ENV, codex_config_toml
from legion.plugins import CODEX
from legion.proxy.egress import EgressProxy
from legion.relay import socket_path
from legion.store import open_store
from tests.support.package_index import serve
from tests.support.sandbox import require_sandbox
from tests.support.waits import wait_until


def test_a_confined_session_is_pointed_at_its_egress_and_reaches_what_is_allowed(
    project: Path, tmp_path: Path, tmux_socket: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_sandbox()  # skipped where bubblewrap cannot confine
    site = tmp_path / "site"
    site.mkdir()
    (site / "hello.txt").write_text("fetched through egress\n")
    with serve(site) as port:
        codex_home = tmp_path / "codex-home"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(codex_config_toml("http://127.0.0.1:9"))
        seen = project / "codex-env"  # the workspace: what a confined worker may write
        codex = tmp_path / "bin" / "codex"
        codex.parent.mkdir()
        codex.write_text(
            "#!/bin/sh\n"
            f"curl -sS http://localhost:{port}/hello.txt > {project}/fetched 2>&1\n"
            f"env > {seen}.tmp && mv {seen}.tmp {seen}\nsleep 30\n"
        )
        codex.chmod(codex.stat().st_mode | stat.S_IXUSR)
        env = dict(os.environ) | {API_KEY_ENV: "sentinel-provider"}
        env |= {"CODEX_HOME": str(codex_home), "LEGION_CODEX_BIN": str(codex)}
        env |= {"LEGION_SANDBOX": "bwrap", "LEGION_SANDBOX_EGRESS": f"localhost:{port}"}
        loaded = load_project(project, env)
        monkeypatch.setattr("legion.sessions.supervisor.running_pid", lambda project: os.getpid())
        monkeypatch.setattr("legion.sessions.supervisor.daemon_ready", lambda project: True)
        state = loaded.state_dir
        model_socket = socket_path(state, proxy.PROXY_SOCKET_NAME)
        proxy.write_access(
            state, proxy.access("http://127.0.0.1:41999", [CODEX], str(model_socket))
        )
        rules = egress.parse(loaded.settings.sandbox_egress)
        egress_proxy = EgressProxy(
            socket_path(state, proxy.EGRESS_SOCKET_NAME), rules, lambda: open_store(loaded)
        )
        egress_proxy.start()
        backends = open_backends(loaded)
        workers = open_workers(loaded, backends, env)
        try:
            workers.supervisor.start_session_window(
                "LEG-1-implement",
                "sid-egress",
                "Go on",
                project,
                {"LEGION_MODE": "implement"},
                issue="LEG-1",
                runtime=workers.runtimes.named(CODEX),
            )
            try:
                wait_until("codex started", seen.exists)
            except (TimeoutError, AssertionError):
                window = workers.windows.live_window("sid-egress")
                screen = "(no window)" if window is None else workers.windows.screen(window.id)
                raise AssertionError(f"codex never started: {screen}") from None
            lines = seen.read_text().splitlines()
        finally:
            workers.windows.close_all()
            backends.db.close()
            egress_proxy.stop()
        found = dict(line.split("=", 1) for line in lines if "=" in line)
        assert (
            found["HTTPS_PROXY"] == found["http_proxy"] == f"http://127.0.0.1:{egress.EGRESS_PORT}"
        )
        assert found["NO_PROXY"] == "127.0.0.1,::1"
        assert (project / "fetched").read_text() == "fetched through egress\n"
