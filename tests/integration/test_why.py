"""`legion why` and `legion log --replay`: each decision explained from the inputs the action log
kept, and today's table run over them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from legion.backends import open_backends
from legion.config import load_project
from legion.core import decision_log
from legion.core.decide import Action, Decision, Observation, Verdict, explain
from legion.store.actionlog import ActionLog
from tests.support.cli import LegionRunner, git


@pytest.fixture
def reconciled(legion: LegionRunner) -> LegionRunner:
    """Two Todo issues, the second blocked by the first; one pass run (no daemon, so the
    planner's start is deferred)."""
    for title in ("First", "Second"):
        assert legion("issue", "create", title, "--status", "Todo").returncode == 0
    assert legion("issue", "block", "LEG-2", "--by", "LEG-1").returncode == 0
    assert legion("reconcile").returncode == 0
    return legion


def test_why_says_the_row_the_inputs_the_next_pass_and_the_last_decision(
    reconciled: LegionRunner,
) -> None:
    blocked = reconciled("why", "leg-2")
    assert blocked.returncode == 0, blocked.stderr
    lines = blocked.stdout.splitlines()
    assert lines[0] == "LEG-2  Second  (Todo)"
    assert lines[1] == "now:       skip: waits for the issues blocking it (row 4): blocked by LEG-1"
    assert "blocked by LEG-1" in lines[2] and lines[2].startswith("given:     status Todo")
    assert "skip: skipped  waits for the issues blocking it (row 4)" in lines[3]

    data = json.loads(reconciled("why", "LEG-1", "--json").stdout)
    assert data["now"]["row"] == 24 and data["now"]["action"] == "dispatch_planner"
    assert data["now"]["inputs"]["status"] == "Todo"
    # Through admission, as the daemon's pass would: no daemon runs to host the planner.
    assert data["next_pass"]["outcome"] == "deferred"
    assert "no daemon" in data["next_pass"]["detail"]
    assert data["last"]["action"] == "dispatch_planner"
    assert data["last"]["decided"]["row"] == 24
    assert data["last"]["decided"]["gates"]["sessions"][0] == 0

    missing = reconciled("why", "LEG-9")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "no issue LEG-9" in missing.stderr and "Traceback" not in missing.stderr


def test_a_skip_is_logged_once_per_change_not_per_pass(reconciled: LegionRunner) -> None:
    for _ in range(2):
        assert reconciled("reconcile").returncode == 0
    entries = json.loads(reconciled("log", "--issue", "LEG-2", "--json").stdout)
    decided = [e for e in entries if e["decided"]]
    assert [(e["action"], e["outcome"]) for e in decided] == [("skip", "skipped")]
    assert reconciled("issue", "block", "LEG-2", "--remove", "LEG-1").returncode == 0
    assert reconciled("reconcile").returncode == 0
    entries = json.loads(reconciled("log", "--issue", "LEG-2", "--json").stdout)
    assert [e["decided"]["row"] for e in entries if e["decided"]] == [4, 24]


def test_the_replay_finds_nothing_changed_then_what_an_altered_row_changes(
    reconciled: LegionRunner, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replayed = reconciled("log", "--replay")
    assert replayed.returncode == 0, replayed.stderr
    assert "2 decisions replayed: today's table decides each the same." in replayed.stdout
    data = json.loads(reconciled("log", "--replay", "--since", "2000-01-01", "--json").stdout)
    assert data == {"checked": 2, "different": []}
    assert (
        json.loads(reconciled("log", "--replay", "--since", "2999-01-01", "--json").stdout)[
            "checked"
        ]
        == 0
    )

    # An entry this version cannot read (written by another, or by hand, nested past the
    # parser's depth) is passed over, never fatal: the log, the replay and the passes go on.
    backends = open_backends(load_project(project))
    nested = "[" * 200_000 + "]" * 200_000
    with backends.db.write() as conn:
        for text in ('{"row": "x"}', nested):
            conn.execute(
                "INSERT INTO actions (at, issue, action, outcome, detail, decided) VALUES "
                "('2026-11-30T10:00:00Z', 'LEG-1', 'skip', 'skipped', '', ?)",
                (text,),
            )
    for args in (("log", "--replay"), ("log", "--json"), ("why", "LEG-1"), ("reconcile",)):
        assert reconciled(*args).returncode == 0, args

    def planners_wait(obs: Observation) -> Verdict:
        """Row 24 altered: a Todo issue's planner waits."""
        verdict = explain(obs)
        return Verdict(Decision(Action.SKIP), 24) if verdict.row == 24 else verdict

    monkeypatch.setattr(decision_log, "explain", planners_wait)
    differences = decision_log.replay(ActionLog(backends.db).decisions())
    assert differences  # the planner's deferred starts, once per pass process
    for different in differences:
        assert different.entry.issue == "LEG-1"
        assert different.to_json()["then"]["action"] == "dispatch_planner"
        assert different.to_json()["now"]["action"] == "skip"


def test_replay_options_are_checked(reconciled: LegionRunner) -> None:
    for args, said in (
        (("log", "--since", "2026-11-01"), "--since goes with --replay"),
        (("log", "--replay", "--follow"), "do not go together"),
        (("log", "--replay", "--since", "yesterday"), "not an ISO date"),
        (("log", "--replay", "--since", "0001-01-01T00:00+01:00"), "out of range"),
    ):
        result = reconciled(*args)
        assert result.returncode == 2 and said in result.stderr, result.stderr


def test_a_persons_writes_are_in_the_log_under_their_name_and_the_passes_under_none(
    legion: LegionRunner, project: Path
) -> None:
    ada = {"LEGION_AUTHOR": "ada"}
    assert legion("issue", "create", "Work", "--status", "Todo", env=ada).returncode == 0
    for args in (
        ("issue", "move", "LEG-1", "In Progress"),
        ("issue", "label", "LEG-1", "--add", "legion"),
        ("issue", "comment", "LEG-1", "--body", "<script>not kept</script>"),
        ("issue", "edit", "LEG-1", "--title", "Work, renamed"),
    ):
        result = legion(*args, env=ada)
        assert result.returncode == 0, result.stderr
    git(project, "switch", "--quiet", "-c", "legion/leg-1")
    (project / "f.txt").write_text("x\n")
    git(project, "add", "f.txt")
    git(project, "commit", "--quiet", "-m", "work")
    git(project, "switch", "--quiet", "main")
    for args in (
        ("pr", "create", "--issue", "LEG-1", "--branch", "legion/leg-1"),
        ("pr", "review", "1", "--approve"),
        ("pr", "merge", "1"),
    ):
        result = legion(*args, env=ada)
        assert result.returncode == 0, result.stderr
    assert legion("reconcile").returncode == 0  # the pass's own writes: no author
    assert legion("issue", "create", "Ask", env=ada).returncode == 0  # LEG-2
    asked = legion("escalate", "LEG-2", "--question", "UTC?", env={"LEGION_AUTHOR": "bo"})
    assert asked.returncode == 0, asked.stderr
    assert legion("feedback", "LEG-2", "UTC, always", env=ada).returncode == 0
    said = {
        (e["action"], e["author"])
        for e in json.loads(legion("log", "--issue", "LEG-2", "--json").stdout)
    }
    assert {("escalate", "bo"), ("feedback", "ada"), ("issue_comment", "ada")} <= said
    entries = json.loads(legion("log", "-n", "50", "--issue", "LEG-1", "--json").stdout)
    by_ada = [(e["action"], e["detail"]) for e in entries if e["author"] == "ada"]
    assert by_ada == [
        ("issue_create", "in Todo"),
        ("issue_move", "to In Progress"),
        ("issue_label", "+legion"),
        ("issue_comment", "comment 1"),  # which write, never what was written
        ("issue_edit", "title"),
        ("pr_create", "#1"),
        ("pr_review", "#1: approved"),
        ("pr_merge", "#1"),
    ]
    assert all(e["author"] in ("ada", None) for e in entries)  # the pass's: None
    assert "script" not in json.dumps(entries)
    shown = legion("log", "-n", "50", "--issue", "LEG-1").stdout
    assert "issue_move: done  to In Progress by ada" in shown
