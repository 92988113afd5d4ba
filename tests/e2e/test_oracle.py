"""The Oracle before the human: a worker's question goes to the controller, which researches it
(the packaged legion-oracle skill) and answers into the worker's own session, or hands it to a
human whose answer reaches that same session. The real daemon, the real Claude Code CLI for the
controller and the workers (scripted model), real tmux, git and SQLite."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from legion.backends import open_backends, open_workers
from legion.config import load_project
from legion.demo.swarm_script import swarm_script
from legion.reconcile import Reconciler
from legion.store.actionlog import ActionLog, OutcomeKind
from tests.fakes.model_server import text
from tests.support.swarm import Daemon, Swarm, judgments
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e]

QUESTION = "Which greeting should the feature use?"


def script(swarm: Swarm, **options: Any) -> None:
    scenarios = swarm_script(["LEG-1"], review_rounds=1, ask=("LEG-1",), **options).scenarios
    swarm.server.script.scenarios.extend(scenarios)


def issue(swarm: Swarm) -> dict[str, Any]:
    return dict(swarm.json("issue", "show", "LEG-1"))


def plan_posted(swarm: Swarm) -> bool:
    return any(c["body"].startswith("## Plan") for c in issue(swarm)["comments"])


def planner_transcript(swarm: Swarm) -> list[dict[str, Any]]:
    """The planner's one session: every line of its one transcript."""
    project_id = swarm.json("config")["settings"]["project_id"]["value"]
    planner = str(uuid.uuid5(uuid.UUID(project_id), "LEG-1:plan"))
    (path,) = swarm.transcripts(planner)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def answer_given(swarm: Swarm) -> str:
    """What the planner's question was answered with, in its own session; then it went on."""
    lines = planner_transcript(swarm)
    answered = [
        index
        for index, line in enumerate(lines)
        if isinstance(line.get("toolUseResult"), dict) and "answers" in line["toolUseResult"]
    ]
    assert len(answered) == 1, "one question, answered once"
    (answer,) = lines[answered[0]]["toolUseResult"]["answers"].values()
    later = json.dumps(lines[answered[0] + 1 :])
    assert "## Plan" in later  # the same session carried on with the plan
    return str(answer)


def actions(swarm: Swarm, action: str) -> list[dict[str, Any]]:
    return [e for e in swarm.json("log", "-n", "1000") if e["action"] == action]


def test_the_oracle_answers_and_the_worker_goes_on_in_its_session(swarm: Swarm) -> None:
    swarm.legion("issue", "create", "Greeter", "--body", "Greet people with Hello.")
    script(swarm, oracle={"LEG-1": "Hello"})
    with Daemon(swarm):
        wait_until("the plan posted", lambda: plan_posted(swarm), timeout=90)
        wait_until("the queue item closed", lambda: judgments(swarm) == [])
    assert answer_given(swarm) == "Hello"
    # The controller ran the packaged legion-oracle skill before it answered.
    (loaded,) = [r for r in swarm.server.requests_for_scenario("LEG-1:oracle") if r.turn == 1]
    assert "Launching skill: legion-oracle" in json.dumps(loaded.tool_results())
    assert "# Legion oracle" in json.dumps(loaded.messages[-1])
    # Its reasoning is on the issue; no human was asked.
    comments = issue(swarm)["comments"]
    (oracle,) = [c for c in comments if c["body"].startswith("## Oracle")]
    assert oracle["author"] == "legion-controller" and "**Answer:** Hello" in oracle["body"]
    assert not any(QUESTION in c["body"] for c in comments)
    assert actions(swarm, "escalate_question") == []
    # The queue item lived from the question to the answer.
    queued = [e["detail"] for e in actions(swarm, "queue_judgment")]
    closed = [e["detail"] for e in actions(swarm, "close_judgment")]
    assert queued == [f"oracle: the plan worker asks: {QUESTION}"]
    assert closed == ["oracle: resolved"]


def test_the_oracle_escalates_and_the_humans_feedback_reaches_the_worker(swarm: Swarm) -> None:
    swarm.legion("issue", "create", "Greeter")
    script(swarm)  # no answer for LEG-1: the Oracle asks a human
    with Daemon(swarm):
        wait_until("escalated", lambda: "user-input-needed" in issue(swarm)["labels"])
        asked = issue(swarm)["comments"][-1]
        assert asked["author"] == "legion-controller"
        assert QUESTION in asked["body"] and "Options: Hello, Hi" in asked["body"]
        assert "Why it needs a human** (Legion's Oracle)" in asked["body"]
        assert "product owner's choice" in asked["body"]
        assert swarm.worker("LEG-1")["state"] == "blocked"  # type: ignore[index]
        # A human owns the question now: the queue item is closed, nothing else happens.
        wait_until("the item closed", lambda: judgments(swarm) == [])
        swarm.legion("feedback", "LEG-1", "Hi")
        wait_until("the plan posted", lambda: plan_posted(swarm), timeout=90)
    assert answer_given(swarm) == "Hi"
    assert not {"user-input-needed", "user-feedback-given"} & set(issue(swarm)["labels"])
    relayed = actions(swarm, "relay_user_feedback")
    assert relayed and relayed[-1]["detail"] == "answered the question in leg-1-plan"


def test_a_controller_that_neither_answers_nor_escalates_leaves_it_to_legion(
    swarm: Swarm,
) -> None:
    swarm.legion("issue", "create", "Greeter")
    swarm.server.add_scenario(
        r"<command-args>[^<]*\bLEG-1:oracle\b",
        [[text("Not sure what to do.")]],
        regex=True,
        name="idle oracle",
    )
    script(swarm)
    with Daemon(swarm):
        wait_until("escalated", lambda: "user-input-needed" in issue(swarm)["labels"])
    asked = issue(swarm)["comments"][-1]
    assert asked["author"] == "legion" and QUESTION in asked["body"]
    why = "the controller ended its turn without answering or escalating it"
    assert why in asked["body"]
    assert [e["detail"] for e in actions(swarm, "close_judgment")] == [
        f"oracle: escalated to a human: {why}"
    ]


def blocked_planner(swarm: Swarm) -> None:
    """LEG-1's planner started by hand (under a daemon in manual mode: no controller, no
    reconcile pass of its own), waiting on its question."""
    swarm.legion("issue", "create", "Greeter")
    script(swarm)
    swarm.legion("dispatch", "LEG-1", "plan")
    wait_until("blocked", lambda: (swarm.worker("LEG-1") or {}).get("state") == "blocked")


def test_with_no_controller_the_question_goes_straight_to_a_human(swarm: Swarm) -> None:
    with Daemon(swarm, mode="manual"):  # a daemon with no controller
        blocked_planner(swarm)
        outcomes = json.loads(swarm.legion("reconcile", "--json").stdout)
        assert {"issue": "LEG-1", "action": "escalate_question", "outcome": "done"}.items() <= (
            next(o for o in outcomes if o["action"] == "escalate_question").items()
        )
        asked = issue(swarm)["comments"][-1]
        assert asked["author"] == "legion" and QUESTION in asked["body"]
        assert "No controller is running" in asked["body"]
        assert judgments(swarm) == [] and actions(swarm, "queue_judgment") == []


def test_a_question_the_controller_does_not_take_in_time_goes_to_a_human(
    swarm: Swarm, tmp_path: Path
) -> None:
    with Daemon(swarm, mode="manual"):  # the test's reconciler decides
        blocked_planner(swarm)
        project = load_project(swarm.repo, env=swarm.env)
        backends = open_backends(project)
        reconciler = Reconciler(
            project,
            backends.tracker,
            backends.forge,
            open_workers(project, backends, swarm.env),
            ActionLog(backends.db),
            oracle=True,
            oracle_timeout=1.0,
        )
        # For the controller, first. (A pass that finds tmux not answering on a loaded machine
        # does nothing, by design: the next one acts.)
        wait_until(
            "a pass that queues the question",
            lambda: (
                ("queue_judgment", OutcomeKind.DONE)
                in {(o.action, o.kind) for o in reconciler.run()}
            ),
        )
        assert "user-input-needed" not in issue(swarm)["labels"]
        (item,) = judgments(swarm)
        assert (item["kind"], item["state"]) == ("oracle", "pending")
        time.sleep(1.5)  # longer than oracle_timeout: the time passing is what is waited for
        wait_until(
            "a pass that escalates it",
            lambda: (
                ("escalate_question", OutcomeKind.DONE)
                in {(o.action, o.kind) for o in reconciler.run()}
            ),
        )
        asked = issue(swarm)["comments"][-1]
        assert asked["author"] == "legion"
        assert "the controller did not take it within 1 s" in asked["body"]
        assert "user-input-needed" in issue(swarm)["labels"]
        assert judgments(swarm) == []
        # Nothing happens twice.
        assert not {o.action for o in reconciler.run()} & {"escalate_question", "queue_judgment"}
