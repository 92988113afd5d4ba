"""The daemon: supervises the controller and the workers of one project in one tmux session.

Every tick (and at once when a `legion` command changed something) it touches the heartbeat
and runs its steps, each one job in its own module: keep the controller alive (`controller`:
restarted, with a cooldown, when its window is gone, its session has been stuck mid-turn for
too long, or it has written no transcript that long), kill a worker only when two signals
agree it is stuck (`reaper`), keep agents' statuses and deliver bus messages (`bus_steps`),
and, in `auto` mode, run the reconciler (`reconcile_step`) and deliver the judgment queue to
the controller when it is idle. In `llm` mode the controller does the reconciling itself and
is woken every tick instead, with the queue's new items named in the wake-up. Each step
returns a `StepResult`; the daemon waits for the soonest requeue (`steps`).

Liveness is read from the world, never from the daemon's memory, so a daemon that was killed
and started again adopts the running tmux session and carries on where the last one stopped.
What must outlive the daemon (the judgment queue, the dispatch pause) is in the project
database. What cannot be observed (tmux does not answer) is unknown, and nothing is done on it.

When the project's tracker or forge needs a credential, the daemon is the only process that
holds it: it serves the relay socket (`legion.relay`) from its start to its stop, and the
sessions' `legion` commands make their tracker and forge calls through it.
"""

from legion.daemon.loop import MODES, Daemon, DaemonConfig, stop

__all__ = ["MODES", "Daemon", "DaemonConfig", "stop"]
