"""Named fault points, for the fault-injection tests only (`tests/e2e/test_kill_campaign.py`,
`bench/faults.py`).

`fault_point("after_worker_active")` SIGKILLs the calling process when the environment variable
`LEGION_TEST_KILL_AT` names that point (`after_worker_active`, or `after_worker_active:3` for the
third time this process reaches it). With `LEGION_TEST_KILL_LOG` set, a line `<point> <pid>` is
appended to that file first, so a test knows the kill happened and where. Unarmed (the variable
unset, as always outside the tests), a point is one comparison with None.

The variable is read once, when this module is imported: a process is armed for its lifetime.
Every point is in `POINTS`, with where it is; docs/architecture.md ("Fault points") says why each
place is dangerous.
"""

from __future__ import annotations

import os
import signal

KILL_AT_VARIABLE = "LEGION_TEST_KILL_AT"
KILL_LOG_VARIABLE = "LEGION_TEST_KILL_LOG"

POINTS: tuple[str, ...] = (
    # sessions/workers.py (and reconcile/labels.py, the label), starting a worker
    "after_registry_start",  # the registry names the worker; no worker-active, no window
    "after_worker_active",  # worker-active is on; the worker's window does not exist yet
    "after_window_started",  # the window runs; its start not yet confirmed by the transcript
    # reconcile/transitions.py, a transition
    "transition_labels_cleared",  # worker-done/-active cleared; the status not moved yet
    "transition_status_moved",  # the status moved; the next worker not started yet
    # forges/local.py, `legion pr merge` (run by the finisher worker)
    "merge_after_git",  # the base branch has the merge; the PR not yet recorded as merged
    "merge_recorded",  # the PR recorded as merged; the issue not yet moved to Done
    # workspaces/sweep.py, the sweep of Done workspaces
    "sweep_before_remove",  # a workspace found safe to remove; not removed yet
    "sweep_after_remove",  # a workspace removed; the rest of the sweep not done
    # daemon/controller.py, the controller and the judgment queue
    "controller_started",  # the controller's window runs; its start and items not recorded
    "judgment_typed",  # a wake-up taken by the controller; its delivery not recorded
)
# Points of the bus's delivery and statuses, armed by their own end-to-end tests
# (tests/e2e/test_bus_*.py, test_watch.py) rather than the swarm's kill campaign, which posts
# no messages and reads no statuses.
DELIVERY_POINTS: tuple[str, ...] = (
    # watch.py, handing a message to an idle session (the daemon, `legion say`, the TUI)
    "after_delivery_attempt",  # the attempt counted; nothing typed yet
    "after_message_typed",  # the session took the prompt; the delivery not yet marked
    # sessions/workers.py, retiring a finished worker
    "worker_window_closed",  # its window closed (its agent complete); its record not retired
)


def _armed() -> tuple[str, int] | None:
    raw = os.environ.get(KILL_AT_VARIABLE)
    if not raw:
        return None
    name, _, nth = raw.partition(":")
    return name.strip(), int(nth) if nth.strip().isdigit() else 1


_ARMED = _armed()
_reached: dict[str, int] = {}


def fault_point(name: str) -> None:
    """Die here (SIGKILL, as a crash would) when the tests armed this point; else nothing."""
    if _ARMED is None or _ARMED[0] != name:
        return
    count = _reached[name] = _reached.get(name, 0) + 1
    if count != _ARMED[1]:
        return
    log = os.environ.get(KILL_LOG_VARIABLE)
    if log:
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"{name} {os.getpid()}\n")
    os.kill(os.getpid(), signal.SIGKILL)
