"""A daemon poked without end (any session can write its wake pipe) runs a pass at most every
`MIN_PASS_GAP_S`, not one per poke (issue 35): the real daemon in this process, real tmux on a
private server, the real wake pipe."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from legion.config import load_project
from legion.daemon import Daemon, DaemonConfig
from legion.daemon.loop import MIN_PASS_GAP_S
from legion.daemon_link import poke, wake_fifo
from tests.support.tmux import start_environment


@pytest.fixture
def env(project: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    with start_environment(tmp_path) as values:
        yield values


def test_a_flood_of_wake_ups_is_a_few_passes_not_one_each(
    project: Path, env: dict[str, str]
) -> None:
    loaded = load_project(project, env=env)
    # A long tick: only the pokes wake it.
    daemon = Daemon(loaded, DaemonConfig(mode="manual", tick=60.0, run_for=2.0), env)
    passes: list[float] = []
    tick = daemon.tick

    def counted() -> None:
        passes.append(time.monotonic())
        tick()

    daemon.tick = counted  # type: ignore[method-assign]
    stop = threading.Event()
    pokes = 0

    def flood() -> None:
        nonlocal pokes
        fifo = wake_fifo(loaded)
        while not stop.is_set():
            poke(fifo)
            pokes += 1
            time.sleep(0.002)

    poker = threading.Thread(target=flood, daemon=True)
    poker.start()
    try:
        daemon.run()
    finally:
        stop.set()
        poker.join()
    span = passes[-1] - passes[0]
    assert pokes > 100 and len(passes) >= 3, (pokes, len(passes))  # the pokes do wake it
    assert len(passes) <= span / MIN_PASS_GAP_S + 2, (len(passes), span)
    gaps = [later - earlier for earlier, later in itertools.pairwise(passes)]
    assert min(gaps) >= MIN_PASS_GAP_S * 0.95, gaps
