"""Budgets and the provider's limits, enforced where the tokens are spent: the daemon's model
proxy between the real Claude Code CLI and the scripted model (issue 21).

One swarm, one run of the daemon:
- the provider answers the first request with a 429 and a reset: every request waits it out (no
  session sees the error), `legion status` says so, and a worker due meanwhile starts only
  after it;
- an implementer that keeps asking is refused at its issue's `token_budget` before its next
  request reaches the model: its session is stopped, and a human asked, once; their answer
  ("go on") lets the same session go on.
"""

from __future__ import annotations

import pytest

from legion.backends import open_backends
from legion.config import load_project
from legion.reconcile import BUDGET_HEADING
from legion.reconcile.answers import IDLE_HEADING
from tests.e2e.test_recovery import controller, labels, legion_comments, park, parked
from tests.fakes.model_server import Scenario, bash, text
from tests.support.swarm import Daemon, Swarm, actions, session_uuid
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e]

# Several of the CLI's requests' worth (the scripted model counts a request's size in tokens,
# and the CLI sends its whole system prompt and tools with each).
BUDGET = 150_000
HOLD_S = 4


def metered(swarm: Swarm, issue: str) -> list[int]:
    """The tokens of each response of `issue` the proxy recorded, in order."""
    db = open_backends(load_project(swarm.repo, swarm.env)).db
    with db.read() as conn:
        rows = conn.execute(
            "SELECT input_tokens + output_tokens + cache_creation_tokens + cache_read_tokens "
            "FROM model_usage WHERE issue = ? ORDER BY id",
            (issue,),
        ).fetchall()
    return [int(row[0]) for row in rows]


def test_a_429_is_a_wait_and_a_spent_budget_stops_the_session_at_once_and_asks_once(
    swarm: Swarm,
) -> None:
    controller(swarm)
    swarm.legion("issue", "create", "Spend", "--status", "In Progress")
    swarm.server.add_scenario(
        "implement mode for LEG-1", [[bash("true", "Check again")]] * 40, name="spend"
    )
    swarm.server.script.scenarios.insert(
        0,
        Scenario(
            r"mode for LEG-1\b[\s\S]*go on",
            [[bash(park("LEG-1"), "Carry on")], [text("Carried on.")]],
            name="answered",
            regex=True,
            anywhere=True,  # the CLI merges it into the refused turn's last tool result
        ),
    )
    swarm.server.refuse_next(429, 1, {"retry-after": str(HOLD_S)})
    sid = session_uuid(swarm, "LEG-1:implement")
    with Daemon(swarm, tick=1.0, extra_env={"LEGION_TOKEN_BUDGET": str(BUDGET)}):
        # The provider's 429: held for everyone, said by `legion status`, dispatch held.
        held = wait_until("the hold", lambda: swarm.json("status")["model_held"], timeout=60)
        assert "rate limited (429)" in held and "resumes by itself" in held
        swarm.legion("issue", "create", "Waits", "--status", "Todo")
        deferred = wait_until(
            "LEG-2's start held",
            lambda: [
                a for a in actions(swarm, "dispatch_planner", "LEG-2") if a["outcome"] == "deferred"
            ],
        )
        assert "rate limited" in deferred[0]["detail"]
        wait_until(
            "LEG-2's planner started after the hold",
            lambda: [
                a for a in actions(swarm, "dispatch_planner", "LEG-2") if a["outcome"] == "done"
            ],
            timeout=60,
        )
        assert swarm.json("status")["model_held"] is None
        wait_until("the end of the hold logged", lambda: actions(swarm, "model_resume"))
        logged = [a["action"] for a in actions(swarm)]
        assert logged.count("model_hold") == 1 and logged.count("model_resume") == 1
        refused = [r for r in swarm.server.snapshot() if r.kind == "refused"]
        assert len(refused) == 1
        # Nothing reached the model while the hold lasted (but what was on its way as the 429
        # came back), and the requests went on after it.
        at = refused[0].time
        times = [r.time - at for r in swarm.server.snapshot() if r.time > at]
        assert not [t for t in times if 1.0 < t < HOLD_S - 0.5], times
        assert [t for t in times if t >= HOLD_S - 0.5], times

        # The implementer spends its budget: stopped before its next request goes, asked once.
        wait_until("the budget question", lambda: "user-input-needed" in labels(swarm, "LEG-1"),
                   timeout=90)  # fmt: skip
        wait_until("the implementer stopped", lambda: swarm.worker("LEG-1") is None)
        spent = metered(swarm, "LEG-1")
        assert sum(spent[:-1]) < BUDGET <= sum(spent), spent  # not one response past it
        spending = swarm.server.requests_for_scenario("spend")
        assert len(spending) < 40  # it wanted more
        [path] = swarm.transcripts(sid)
        transcript = path.read_text()
        assert "API Error: 429" not in transcript and "rate_limit_error" not in transcript
        questions = [c for c in legion_comments(swarm, "LEG-1") if c.startswith(BUDGET_HEADING)]
        assert len(questions) == 1
        [stop] = actions(swarm, "budget_stop", "LEG-1")
        assert f"LEG-1's token budget is spent ({sum(spent):,} of {BUDGET:,}" in stop["detail"]

        # A human allows more: the same session goes on.
        swarm.legion("feedback", "LEG-1", "go on")
        wait_until("LEG-1 parked", lambda: parked(swarm, "LEG-1"), timeout=90)
        answered = swarm.server.requests_for_scenario("answered")
        assert answered and {r.headers.get("x-claude-code-session-id") for r in answered} == {sid}
        assert len(spent) < len(metered(swarm, "LEG-1"))  # metered again
    questions = [c for c in legion_comments(swarm, "LEG-1") if c.startswith(BUDGET_HEADING)]
    assert len(questions) == 1


IDLE_LIMIT = 100_000


def test_a_worker_spending_without_progress_is_stopped_and_asked_about_once(
    swarm: Swarm,
) -> None:
    """`idle_spend_limit`: LEG-1's implementer asks again and again and changes nothing: stopped
    once it spent the limit, its issue asks a human once, with the figures. LEG-2's writes a file
    each turn: it spends past the limit too, and goes on to its end."""
    controller(swarm)
    swarm.legion("issue", "create", "Loops", "--status", "In Progress")
    swarm.legion("issue", "create", "Works", "--status", "In Progress")
    swarm.server.add_scenario(
        "implement mode for LEG-1", [[bash("true", "Check again")]] * 40, name="loop"
    )
    writes = [[bash("date +%s%N > progress.txt", "Write a little")]] * 12
    swarm.server.add_scenario(
        "implement mode for LEG-2",
        [*writes, [bash(park("LEG-2"), "Done here")], [text("Parked.")]],
        name="work",
    )
    env = {"LEGION_IDLE_SPEND_LIMIT": str(IDLE_LIMIT)}
    with Daemon(swarm, tick=1.0, extra_env=env):
        wait_until("LEG-1's question", lambda: "user-input-needed" in labels(swarm, "LEG-1"),
                   timeout=90)  # fmt: skip
        wait_until("LEG-1's implementer stopped", lambda: swarm.worker("LEG-1") is None)
        [stop] = actions(swarm, "idle_spend_stop", "LEG-1")
        assert "without progress (idle_spend_limit 100,000)" in stop["detail"]
        assert len(swarm.server.requests_for_scenario("loop")) < 40
        wait_until("LEG-2 parked", lambda: parked(swarm, "LEG-2"), timeout=90)
    assert sum(metered(swarm, "LEG-2")) > IDLE_LIMIT  # past the limit, but never idle
    assert actions(swarm, "idle_spend_stop", "LEG-2") == []
    questions = [c for c in legion_comments(swarm, "LEG-1") if c.startswith(IDLE_HEADING)]
    assert len(questions) == 1 and "with no commit, no change in its workspace" in questions[0]
    assert "past `idle_spend_limit` (100,000)" in questions[0]
