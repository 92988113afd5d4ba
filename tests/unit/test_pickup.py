"""What Legion picks up: the Backlog opt-in setting and the line `legion init` / `legion doctor`
print (issue 19 item 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from legion.config.files import write_repo_config
from legion.config.resolve import resolve_settings
from legion.core.model import Status
from legion.core.pickup import DEFAULT_BACKLOG_OPT_IN, issue_pickup, opted_in, pickup_summary
from legion.errors import ConfigError

PROJECT = "7b4f0862-b775-4cb0-9a67-85400c6f44a8"
S = Status


def issues(*specs: tuple[Status, int, tuple[str, ...]]) -> list[tuple[Status, frozenset[str]]]:
    return [(status, frozenset(labels)) for status, n, labels in specs for _ in range(n)]


def test_the_line_says_what_is_worked_on_and_what_is_left_alone() -> None:
    team = issues(
        (S.TODO, 3, ()),
        (S.BACKLOG, 1, ("Legion",)),  # trackers' label names keep their case; matching does not
        (S.BACKLOG, 41, ("bug",)),
        (S.ICEBOX, 2, ("legion",)),  # Icebox is never worked, opted in or not
        (S.TRIAGE, 1, ()),
        (S.DONE, 9, ()),
    )
    assert pickup_summary(team, DEFAULT_BACKLOG_OPT_IN) == (
        "Legion will work on: 1 Backlog issue labelled `legion` or `epic`, 3 Todo issues; "
        "left alone: 41 Backlog issues without `legion` or `epic`, 2 Icebox issues; "
        "for the controller to triage: 1 Triage issue"
    )
    assert pickup_summary([], DEFAULT_BACKLOG_OPT_IN) == "Legion will work on: nothing yet"
    assert pickup_summary(issues((S.BACKLOG, 2, ())), ()) == (
        "Legion will work on: nothing yet; left alone: 2 Backlog issues (no opt-in label is set)"
    )
    assert pickup_summary(issues((S.BACKLOG, 2, ())), ("*",)) == (
        "Legion will work on: 2 Backlog issues"
    )


def test_opted_in() -> None:
    assert opted_in({"EPIC", "bug"}, DEFAULT_BACKLOG_OPT_IN)
    assert not opted_in({"bug"}, DEFAULT_BACKLOG_OPT_IN)
    assert not opted_in({"legion"}, ())
    assert opted_in(set(), ("*",))


@pytest.fixture
def repo_config(tmp_path: Path) -> Path:
    write_repo_config(tmp_path, {"project_id": PROJECT})
    return tmp_path / ".legion" / "config.toml"


def test_the_setting_defaults_validates_and_takes_every_layer(repo_config: Path) -> None:
    env = {"HOME": str(repo_config.parent), "XDG_CONFIG_HOME": str(repo_config.parent / "x")}
    assert resolve_settings(repo_config, env).backlog_opt_in_labels == ("legion", "epic")
    given = env | {"LEGION_BACKLOG_OPT_IN_LABELS": "ai, design"}
    assert resolve_settings(repo_config, given).backlog_opt_in_labels == ("ai", "design")
    every = resolve_settings(repo_config, env, {"backlog_opt_in_labels": ["*"]})
    assert every.backlog_opt_in_labels == ("*",)
    for bad in ("legion", ["bad\nlabel"], ["*", "legion"]):
        with pytest.raises(ConfigError, match=r"backlog.opt.in.labels"):
            resolve_settings(repo_config, env, {"backlog_opt_in_labels": bad})


def test_one_issue_says_when_it_is_picked_up() -> None:
    opt_in = DEFAULT_BACKLOG_OPT_IN
    todo = Status.TODO
    assert issue_pickup("LEG-4", todo, [], opt_in, None) == (
        "LEG-4 is in Todo: no daemon runs; `legion start` works on it"
    )
    assert issue_pickup("LEG-4", todo, [], opt_in, "auto") == (
        "LEG-4 is in Todo: the running daemon picks it up at its next tick"
    )
    assert issue_pickup("LEG-4", todo, [], opt_in, "llm", ["LEG-1", "LEG-2"]) == (
        "LEG-4 is in Todo: the running daemon picks it up once LEG-1, LEG-2 are Done"
    )
    assert issue_pickup("LEG-4", todo, [], opt_in, "manual") == (
        "LEG-4 is in Todo: the daemon runs in manual mode; `legion dispatch LEG-4 plan` starts "
        "its worker"
    )
    backlog = Status.BACKLOG
    assert issue_pickup("LEG-4", backlog, [], opt_in, "auto") == (
        "LEG-4 is in Backlog: Legion leaves it alone until it is labelled `legion` or `epic`"
    )
    assert issue_pickup("LEG-4", backlog, ["Epic"], opt_in, None).endswith(
        "`legion start` works on it"
    )
    assert "triage" in issue_pickup("LEG-4", Status.TRIAGE, [], opt_in, "auto")
    assert issue_pickup("LEG-4", Status.ICEBOX, [], opt_in, "auto").endswith("leaves it alone")
