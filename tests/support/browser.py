"""Debian's Chromium, headless, driven by Playwright: how the web view's tests look at it as a
person does. `.ci/run` installs the browser; a machine without it skips (CI fails)."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from playwright.sync_api import Browser, sync_playwright

from tests.support.ci import skip_here_fail_on_ci

# No background traffic: this machine reaches no other host, and a test sends only to loopback.
CHROMIUM_ARGS = [
    "--no-sandbox",  # as root in a container; the page is the test's own
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
]


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        skip_here_fail_on_ci("no chromium here (apt-get install chromium)")
    return found


@contextmanager
def chromium() -> Iterator[Browser]:
    path = chromium_path()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Served:
    """A `legion web` process, its login link and what it printed."""

    process: subprocess.Popen[str]
    link: str
    printed: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return self.link.split("/login", 1)[0]

    def wait_for(self, text: str, timeout: float) -> None:
        """Until a line it printed holds `text`; an AssertionError with what it printed when
        none does in `timeout` seconds, or it exited first."""
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.printed):
            if time.monotonic() > deadline or self.process.poll() is not None:
                time.sleep(0.2)  # what it printed last, read
                if any(text in line for line in self.printed):
                    return
                raise AssertionError(f"not printed: {text!r}; printed: {self.printed}")
            time.sleep(0.1)


@contextmanager
def served(
    args: list[str], cwd: Path, env: dict[str, str], timeout: float = 30
) -> Iterator[Served]:
    """The real `legion ARGS` (`web`, `demo --web`) for the block, its login link read from
    what it prints; stopped after (SIGTERM, then SIGKILL)."""
    from tests.support.cli import LEGION_BIN

    process = subprocess.Popen(
        [str(LEGION_BIN), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield read_link(process, timeout)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def read_link(process: subprocess.Popen[str], timeout: float = 30) -> Served:
    """The login link `legion web` prints first; the rest of what it prints is kept."""
    assert process.stdout is not None
    out: IO[str] = process.stdout
    served: list[Served] = []
    ready = threading.Event()
    printed: list[str] = []

    def read() -> None:
        for line in out:
            printed.append(line.rstrip("\n"))
            if not served and "/login?token=" in line:
                served.append(Served(process, line.split()[-1], printed))
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(timeout) or not served:
        process.kill()
        raise AssertionError(f"legion web printed no link: {printed}")
    return served[0]


def save(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
