"""A first real run never silently does nothing: `legion start` says what it starts and the
bounds on spending before it starts (`--dry-run` only that), `legion issue create` says when
the issue is picked up, and `legion stop` says what it stopped and what still runs. Each
through the real `legion` console script, on a private tmux server, with a `claude` that
only sleeps."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support.cli import LegionRunner
from tests.support.waits import wait_until


def test_start_dry_run_says_what_would_start_and_the_budgets_and_starts_nothing(
    legion: LegionRunner, project: Path, tmux_socket: Path, fake_claude: Path
) -> None:
    for title in ("One", "Two", "Three"):
        legion("issue", "create", title)
    env = {"LEGION_WIP_LIMIT": "2", "LEGION_TOKEN_BUDGET": "1000000"}

    dry = legion("start", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    text = dry.stdout
    assert "would start" in text and "controller: a claude-code session" in text
    assert "LEG-1: dispatch_planner: planned (plan worker)" in text
    assert "LEG-2: dispatch_planner: planned (plan worker)" in text
    assert "LEG-3: dispatch_planner: deferred (WIP limit 2 reached)" in text
    assert "token_budget" in text and "1,000,000" in text and "LEGION_TOKEN_BUDGET" in text
    assert "daily_token_budget" in text and "unlimited" in text
    assert str(project / ".legion" / "config.toml") in text and "legion config" in text
    assert "Nothing started" in text

    plan = json.loads(legion("start", "--dry-run", "--json", env=env).stdout)["plan"]
    assert plan["mode"] == "auto" and plan["controller"] == {"runtime": "claude-code"}
    assert [(o["issue"], o["outcome"]) for o in plan["first_pass"]] == [
        ("LEG-1", "planned"),
        ("LEG-2", "planned"),
        ("LEG-3", "deferred"),
    ]
    bounds = {b["name"]: b for b in plan["bounds"]}
    assert bounds["wip_limit"]["value"] == 2 and bounds["wip_limit"]["source"] == "env"
    assert bounds["daily_token_budget"]["value"] is None
    assert {"token_budget", "idle_spend_limit"} <= bounds.keys()

    # Nothing started and nothing changed: no daemon, no worker, no label, no action logged.
    status = json.loads(legion("status", "--json").stdout)
    assert status["daemon"]["pid"] is None and status["workers"] == []
    # (the three issues the person created are theirs, by name)
    logged = json.loads(legion("log", "--json").stdout)
    assert [(e["action"], bool(e["author"])) for e in logged] == [("issue_create", True)] * 3
    issues = json.loads(legion("issue", "list", "--json").stdout)
    assert all(issue["labels"] == [] for issue in issues)

    # Without --dry-run it says the same first, then starts.
    started = legion("start", "--tick", "3600", env=env)
    try:
        assert started.returncode == 0, started.stderr
        assert "Legion starts for" in started.stdout
        assert "LEG-3: dispatch_planner: deferred (WIP limit 2 reached)" in started.stdout
        assert "Legion started for" in started.stdout
        created = legion("issue", "create", "Four")
        assert created.stdout == "LEG-4\n"
        assert "LEG-4 is in Todo: the running daemon picks it up at its next tick" in (
            created.stderr
        )
    finally:
        legion("stop", "--all")


def test_issue_create_says_when_the_issue_is_picked_up(legion: LegionRunner) -> None:
    created = legion("issue", "create", "One")
    # The identifier alone on stdout (`ID=$(legion issue create …)`); when, on stderr.
    assert created.stdout == "LEG-1\n"
    assert created.stderr.strip() == "LEG-1 is in Todo: no daemon runs; `legion start` works on it"
    later = legion("issue", "create", "Later", "--status", "Backlog", "--json")
    assert json.loads(later.stdout)["pickup"] == (
        "LEG-2 is in Backlog: Legion leaves it alone until it is labelled `legion` or `epic`"
    )
    blocked = legion("issue", "create", "After", "--blocked-by", "LEG-1")
    assert "once LEG-1 is Done" in blocked.stderr


def test_start_dry_run_in_manual_mode_starts_no_worker(
    legion: LegionRunner, tmux_socket: Path, fake_claude: Path
) -> None:
    legion("issue", "create", "One")
    plan = json.loads(legion("start", "--dry-run", "--mode", "manual", "--json").stdout)["plan"]
    assert plan["controller"] is None and plan["first_pass"] == []
    text = legion("start", "--dry-run", "--mode", "manual").stdout
    assert "controller: none (manual mode" in text


def test_stop_says_what_still_runs_and_stop_all_what_it_stopped(
    legion: LegionRunner, tmux_socket: Path, fake_claude: Path
) -> None:
    legion("issue", "create", "One")
    started = legion("start", "--tick", "3600")
    try:
        assert started.returncode == 0, started.stderr
        wait_until("LEG-1's planner", lambda: json.loads(legion("workers", "--json").stdout))
        stopped = legion("stop")
        assert stopped.returncode == 0, stopped.stderr
        assert "Legion stopped (pid" in stopped.stdout
        assert "Still running: the controller, LEG-1 plan (tmux session legion-" in stopped.stdout
        assert "`legion stop --all` stops them too" in stopped.stdout
        assert json.loads(legion("stop", "--json").stdout)["still_running"] == [
            {"kind": "controller", "window": "main"},
            {"kind": "worker", "issue": "LEG-1", "mode": "plan", "window": "leg-1-plan"},
        ]
        assert json.loads(legion("status", "--json").stdout)["controller"]["state"] == "running"
    finally:
        all_stopped = legion("stop", "--all")
    assert all_stopped.returncode == 0, all_stopped.stderr
    assert "Legion was not running." in all_stopped.stdout
    assert ": stopped the controller, LEG-1 plan." in all_stopped.stdout
    assert "Still running" not in all_stopped.stdout
    # A clean stop is "stopped", not "dead".
    status = legion("status").stdout
    assert "controller: stopped" in status
    assert re.search(r"LEG-1 +plan +stopped ", status), status
    workers = legion("workers").stdout
    assert "Last output" in workers and "dead" not in workers and "stopped" in workers
    assert json.loads(legion("status", "--json").stdout)["controller"]["state"] == "stopped"
    assert json.loads(legion("stop", "--json").stdout) == {
        "stopped": False,
        "pid": None,
        "closed_session": None,
        "stopped_sessions": [],
        "still_running": [],
    }
    # A one-machine project's log has no fleet in it.
    actions = {entry["action"] for entry in json.loads(legion("log", "--json").stdout)}
    assert "daemon_start" in actions and "fleet_lead" not in actions
