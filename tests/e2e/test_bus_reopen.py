"""A bus put back from a copy while the daemon runs: the daemon reads the file now there, not the
one it opened first, and says so once. Real daemon (`legion start --foreground`), real Claude
Code against the scripted model, real tmux and SQLite."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

from tests.fakes.model_server import text
from tests.support.swarm import Daemon, Swarm, actions, plan_worker_idle
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e]


def test_a_bus_restored_from_a_copy_under_a_running_daemon_delivers_again(swarm: Swarm) -> None:
    bus = Path(swarm.env["XDG_STATE_HOME"]) / "legion" / "bus.db"
    copy = bus.with_name("bus-copy.db")
    with Daemon(swarm, tick=1, mode="manual") as daemon:
        worker = plan_worker_idle(swarm)
        (agent,) = [a for a in swarm.json("agents") if a["session_id"] == worker["session_id"]]
        swarm.server.add_scenario("zebra-7", [[text("Noted.")]], name="message")
        # The daemon has the bus open once it has looked at the agents' statuses.
        wait_until("the daemon's first tick", lambda: actions(swarm, "daemon_start"))
        daemon.wait_between_ticks()
        with sqlite3.connect(bus) as source, sqlite3.connect(copy) as target:
            # Every page in the file itself: a reader would take a page still in the WAL from
            # there, garbage or not.
            source.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            source.backup(target)
        # Corrupted: the file is replaced by garbage (a bad sync, a bad tool)...
        garbage = bus.with_name("garbage")
        garbage.write_bytes(os.urandom(16384))
        garbage.replace(bus)
        broken = swarm.legion("say", "hello?", check=False)
        assert broken.returncode != 0 and "corrupt" in broken.stderr, broken
        daemon.ticks(2)  # ticks pass with the bus broken
        # ...then put back from the copy.
        copy.replace(bus)
        said = time.monotonic()
        swarm.legion("say", f"@{agent['address']} please look at zebra-7")
        wait_until(
            "the message reached the model",
            lambda: swarm.server.requests_for_scenario("message"),
            timeout=30,
        )
        took = time.monotonic() - said
        daemon.ticks(2)  # more ticks: a failure said again would be logged by now
        output = daemon.output()
    log = actions(swarm)
    failures = [e for e in log if e["outcome"] == "failed" and "bus.db" in e["detail"]]
    assert len(failures) == 1, failures  # said once, not at every tick
    assert "corrupt" in failures[0]["detail"]
    said_of_bus = [e["detail"] for e in log if e["action"] == "bus"]
    assert said_of_bus == [f"{bus} was replaced: reopened", "the bus works again"], said_of_bus
    assert took < 20, f"delivered {took:.1f} s after the restore"
    assert "Traceback" not in output
