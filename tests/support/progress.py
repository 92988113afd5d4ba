"""No silence over a minute in a test run: while tests run long (an end-to-end one may take two
minutes and more, and on two cores both may), a line every `QUIET_S` seconds names what runs
and for how long, so a run that is slow is told from a run that is stuck.

Registered by tests/conftest.py in the process that reports: the controller under xdist
(`scripts/test`, CI), which hears each test's start and end from its workers. In a run of one
process the line is captured with the running test's output (its capture takes the terminal's
file descriptor), so it says nothing there."""

from __future__ import annotations

import threading
import time

import pytest

QUIET_S = 50.0  # said after this long with no test ended


class StillRunning:
    """Says which tests run, and since when, whenever no test ended for `QUIET_S` seconds."""

    def __init__(self, config: pytest.Config, quiet: float = QUIET_S, look: float = 5.0) -> None:
        self._config = config
        self._quiet = quiet
        self._look = look  # how often the quiet is looked at
        self._lock = threading.Lock()
        self._running: dict[str, float] = {}  # node id -> when it started
        self._last = time.monotonic()  # when a test last ended (or this was said)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="still-running", daemon=True)

    @pytest.hookimpl
    def pytest_sessionstart(self) -> None:
        self._thread.start()

    @pytest.hookimpl
    def pytest_sessionfinish(self) -> None:
        self._done.set()

    @pytest.hookimpl
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        with self._lock:
            self._running[nodeid] = time.monotonic()

    @pytest.hookimpl
    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        with self._lock:
            self._running.pop(nodeid, None)
            self._last = time.monotonic()

    def _watch(self) -> None:
        while not self._done.wait(self._look):
            now = time.monotonic()
            with self._lock:
                if now - self._last < self._quiet or not self._running:
                    continue
                self._last = now
                running = sorted(self._running.items(), key=lambda item: item[1])
            said = ", ".join(f"{nodeid} ({now - began:.0f} s)" for nodeid, began in running)
            reporter = self._config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(f"[still running: {said}]")
