"""The action log on real SQLite: what the reconciler counts in it is told by actions' names,
never by the text of their details."""

from __future__ import annotations

from collections.abc import Callable

from legion.store import Store
from legion.store.actionlog import ActionLog, OutcomeKind


def test_restarts_are_counted_after_the_last_question_to_a_human(
    open_store: Callable[[], Store],
) -> None:
    log = ActionLog(open_store())
    since = "2000-01-01T00:00:00Z"
    restart, asked = "remove_worker_active_and_redispatch", "ask_human_about_restarts"
    for _ in range(3):
        log.append("LEG-1", restart, OutcomeKind.DONE, "restarted")
    log.append("LEG-1", restart, OutcomeKind.FAILED, "could not start")  # not a restart done
    log.append("LEG-2", restart, OutcomeKind.DONE, "another issue's")
    assert log.count_since("LEG-1", restart, since) == 3
    assert log.count_since("LEG-1", restart, since, reset_by=asked) == 3  # never asked
    log.append("LEG-1", asked, OutcomeKind.DONE, "posted for a human")
    # A detail that reads like the question counts for nothing: only the action's name does.
    log.append("LEG-1", restart, OutcomeKind.DONE, "ask_human_about_restarts")
    assert log.count_since("LEG-1", restart, since, reset_by=asked) == 1
    assert log.count_since("LEG-1", restart, since) == 4
    assert log.count_since("LEG-1", restart, "2999-01-01T00:00:00Z") == 0
    assert log.count_since("LEG-2", restart, since, reset_by=asked) == 1
