"""Who delivers when no daemon runs (`legion.services.agent_watch`), on a real project, bus and lock
files: a watcher that is not the daemon never acts beside a daemon, even one that started while it
waited for the project's watch lock."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

from legion.bus import bus_path
from legion.bus.delivery import Handed
from legion.bus.model import DeliveryState
from legion.bus.sessions import project_channel_name, register_session
from legion.bus.stored import SqliteBus
from legion.config import load_project
from legion.daemon_link import pid_file, running_pid
from legion.services.agent_watch import deliver_now, watch_lock


def test_a_watcher_leaves_the_delivery_to_a_daemon_that_started_while_it_waited(
    project: Path, tmp_path: Path
) -> None:
    env = dict(os.environ, LEGION_TMUX_SOCKET=str(tmp_path / "tmux.sock"))  # nothing runs there
    found = load_project(project, env)
    bus = SqliteBus(bus_path(env))
    agent = register_session(
        bus, found, mode="plan", session_id="sid-plan", workspace=project, runtime="claude-code"
    )
    channel = agent.channel
    posted = bus.post(bus.human().id, channel, f"@{agent.address} hello")
    assert channel.project == project_channel_name(found, bus)

    # Nobody else watching: the message is looked at, and waits for `legion start` (its
    # session is not running, and only a daemon resumes one).
    assert deliver_now(found, bus, env, [agent.id], within=1) == {agent.id: Handed.NOT_RUNNING}

    outcome: dict[str, object] = {}

    def say() -> None:
        own = SqliteBus(bus_path(env))  # a connection belongs to its thread
        try:
            outcome["handed"] = deliver_now(found, own, env, [agent.id], within=10)
        finally:
            own.close()

    daemon = (found.state_dir / "daemon.lock").open("a")
    try:
        with watch_lock(found):  # another watcher (a TUI) is at it
            thread = threading.Thread(target=say)
            thread.start()
            time.sleep(0.5)  # `say` found no daemon and waits for the lock
            fcntl.flock(daemon, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a daemon starts meanwhile
            pid_file(found).write_text(f"{os.getpid()}\n")
            assert running_pid(found) == os.getpid()
        thread.join(15)  # `say` gets the watch lock, and finds the daemon: it delivers
        assert not thread.is_alive()
        assert outcome == {"handed": None}
    finally:
        fcntl.flock(daemon, fcntl.LOCK_UN)
        daemon.close()
        pid_file(found).unlink()
    [delivery] = bus.deliveries(posted.message.id)
    assert (delivery.state, delivery.attempts) == (DeliveryState.PENDING, 0)
    bus.close()
