"""Small things a new user noticed (issue 24, item 15), each pinned through the real `legion`
console script."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import LegionRunner, git, run_legion

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@pytest.fixture(autouse=True)
def _private_tmux(tmux_socket: Path) -> None:
    """Every test here talks to a private tmux server (the shared `tmux_socket`)."""


def test_an_empty_log_says_so(legion: LegionRunner, project: Path) -> None:
    from legion.backends import open_backends
    from legion.config import load_project

    open_backends(load_project(project)).tracker.create_issue("One")  # not logged: no CLI
    result = legion("log")
    assert (result.returncode, result.stdout.strip()) == (0, "No actions logged yet.")
    only = legion("log", "--issue", "LEG-1")
    assert only.stdout.strip() == "No actions logged for LEG-1 yet."
    assert json.loads(legion("log", "--json").stdout) == []


def test_status_of_a_project_never_started(legion: LegionRunner) -> None:
    text = legion("status").stdout
    assert "controller: not started" in text and "dead" not in text
    assert json.loads(legion("status", "--json").stdout)["controller"]["state"] == "not started"


def test_issue_create_help_example_is_harmless(tmp_path: Path) -> None:
    text = run_legion("issue", "create", "--help", cwd=tmp_path).stdout
    examples = text.split("Example:")[1]
    assert "legion issue create" in examples and "--label worker-" not in examples


def test_tables_have_no_trailing_spaces(legion: LegionRunner, project: Path) -> None:
    legion("issue", "create", "A much longer title than the others", "--label", "worker-done")
    legion("issue", "create", "Short")
    git(project, "switch", "--quiet", "-c", "legion/leg-2")
    (project / "x.txt").write_text("x\n")
    git(project, "add", "x.txt")
    git(project, "commit", "--quiet", "-m", "x")
    git(project, "switch", "--quiet", "main")
    legion("pr", "create", "--issue", "LEG-2", "--branch", "legion/leg-2")
    for args in (["issue", "list"], ["state"], ["pr", "list"]):
        result = legion(*args)
        assert result.returncode == 0, (args, result.stderr)
        lines = result.stdout.splitlines()
        assert len(lines) >= 2, (args, result.stdout)
        assert [line for line in lines if line != line.rstrip()] == [], (args, result.stdout)


def test_issue_list_cuts_a_long_title_as_state_does(legion: LegionRunner) -> None:
    title = "A title that is quite long indeed and goes on and on " * 3
    legion("issue", "create", title.strip())
    for args in (["issue", "list"], ["state"]):
        lines = legion(*args, env={"COLUMNS": "60"}).stdout.splitlines()
        rows = [line for line in lines if line.startswith("LEG-1")]
        assert len(rows) == 1 and "…" in rows[0], (args, lines)
        assert all(len(line) <= 60 for line in lines), (args, lines)
        # The row is one line: the title did not wrap onto the next.
        after = lines[lines.index(rows[0]) + 1 :]
        assert not any("on and on" in line for line in after), (args, lines)


def _stamps(value: Any, key: str = "") -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in _stamps(v, k)]
    if isinstance(value, list):
        return [pair for item in value for pair in _stamps(item, key)]
    if key.endswith("_at") and isinstance(value, str):
        return [(key, value)]
    return []


def test_one_timestamp_format_and_one_key_name(legion: LegionRunner) -> None:
    legion("issue", "create", "One")
    legion("issue", "comment", "LEG-1", "--body", "hi")
    legion("issue", "move", "LEG-1", "In Progress")
    legion("say", "hello")
    legion("reconcile")
    outputs = [
        json.loads(legion(*args, "--json").stdout)
        for args in (
            ["issue", "show", "LEG-1"],
            ["issue", "comments", "LEG-1"],
            ["messages"],
            ["agents", "--all"],
            ["log"],
            ["status"],
        )
    ]
    log = json.loads(legion("log", "--json").stdout)
    assert log and all("at" not in entry and "created_at" in entry for entry in log)
    stamps = [pair for output in outputs for pair in _stamps(output)]
    assert {key for key, _ in stamps} >= {"created_at", "updated_at"}
    assert [pair for pair in stamps if not STAMP.match(pair[1])] == []
    # Text shows the same format as JSON.
    text = legion("messages").stdout
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", text), text


# -- item 14: the README's promises (the command reference, docs/commands.md, holds them now) ----


def test_config_says_what_every_unset_setting_means(legion: LegionRunner) -> None:
    lines = legion("config").stdout.splitlines()
    unset = [line for line in lines if ": unset" in line]
    assert unset, lines
    bare = [line for line in unset if not re.match(r"^# \w+: unset \(.+\)", line)]
    assert bare == [], bare


def test_the_docs_name_every_exit_code_and_what_an_id_is() -> None:
    root = Path(__file__).parents[2]
    reference = (root / "docs" / "commands.md").read_text(encoding="utf-8")
    codes = reference.split("The exit code is", 1)[1].split("\n\n", 1)[0]
    for code in ("**0", "**2", "**1", "**70", "**130"):
        assert code in codes, code
    assert "always the number of a record" not in reference
    assert "a bus message's `id` is a UUID" in reference
    # The README sends a reader there.
    assert "(docs/commands.md)" in (root / "README.md").read_text(encoding="utf-8")


def test_usage_says_when_none_is_recorded_then_sums_by_issue_phase_and_model(
    legion: LegionRunner, project: Path
) -> None:
    from legion.backends import open_backends
    from legion.config import load_project
    from legion.proxy.ledger import Spender, UsageLedger
    from legion.proxy.metering import Metered

    empty = legion("usage")
    assert empty.returncode == 0 and empty.stdout.startswith("No model usage recorded yet")
    assert legion("issue", "create", "A feature").returncode == 0
    ledger = UsageLedger(open_backends(load_project(project)).db)
    for output in (10, 20):
        ledger.record(Spender("s-1", "LEG-1", "plan", "claude-code"), Metered("m", 100, output))
    ledger.record(Spender("s-0", "", "controller", "claude-code"), Metered("m", 5, 1, 2, 3))
    rows = json.loads(legion("usage", "--json").stdout)
    assert [
        (r["issue"], r["phase"], r["role"], r["responses"], r["total_tokens"]) for r in rows
    ] == [
        (None, "controller", "controller", 1, 11),
        ("LEG-1", "plan", "worker", 2, 230),
    ]
    shown = legion("usage", "--issue", "leg-1").stdout
    assert "LEG-1" in shown and "controller" not in shown and "total: 230 tokens" in shown
    assert json.loads(legion("usage", "--since", "2999-01-01", "--json").stdout) == []
    bad = legion("usage", "--since", "yesterday")
    assert bad.returncode == 2 and "not an ISO date" in bad.stderr
    assert legion("usage", "--issue", "LEG-99").returncode == 2
    # With `[prices]`, money too: per million tokens; cache prices not given are input's.
    (project / ".legion" / "config.toml").write_text(
        (project / ".legion" / "config.toml").read_text()
        + "\n[prices.m]\ninput = 2.0\noutput = 10.0\ncache_read = 0.5\n"
    )
    priced = json.loads(legion("usage", "--json").stdout)
    # controller: 5 in, 1 out, 2 cache written (at input's price), 3 read
    assert priced[0]["cost"] == pytest.approx((5 * 2 + 1 * 10 + 2 * 2 + 3 * 0.5) / 1e6)
    assert priced[1]["cost"] == pytest.approx((200 * 2 + 30 * 10) / 1e6)
    assert "COST" in legion("usage").stdout and "cost 0.0007" in legion("usage").stdout
    shown = legion("config").stdout
    expected = '"m" = { "input" = 2.0, "output" = 10.0, "cache_read" = 0.5, "cache_write" = 2.0 }'
    assert f"prices = {{ {expected} }}" in shown
    bad = legion("usage", env={"LEGION_PRICES": '{"m": {"input": -1, "output": 1}}'})
    assert bad.returncode == 1 and "at least 0" in bad.stderr and "Traceback" not in bad.stderr


def test_issue_show_gives_the_latest_comments_and_says_there_are_earlier_ones(
    legion: LegionRunner, project: Path
) -> None:
    from legion.backends import open_backends
    from legion.config import load_project

    legion("issue", "create", "Talked about")
    backends = open_backends(load_project(project))
    try:
        for n in range(102):
            backends.tracker.add_comment("LEG-1", f"note {n}", author="hank")
    finally:
        backends.db.close()
    shown = json.loads(legion("issue", "show", "LEG-1", "--json").stdout)
    assert shown["earlier_comments"] is True
    assert [c["body"] for c in shown["comments"]][::99] == ["note 2", "note 101"]
    assert "(the latest 100 comments; every one: `legion issue comments LEG-1`)" in (
        legion("issue", "show", "LEG-1").stdout
    )
    every = json.loads(legion("issue", "comments", "LEG-1", "--json").stdout)
    assert len(every) == 102
    last = json.loads(legion("issue", "comments", "LEG-1", "--last", "2", "--json").stdout)
    assert [c["body"] for c in last] == ["note 100", "note 101"]
