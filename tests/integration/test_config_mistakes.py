"""A mistake in the settings is never silent (a first real run that never silently does
nothing): `legion doctor` fails on what every other command refuses, with the same line, and
a misspelt setting is answered with the one it likely meant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import LegionRunner, run_legion


def _add(project: Path, line: str) -> None:
    config = project / ".legion" / "config.toml"
    config.write_text(config.read_text() + line + "\n")


def _user_config(text: str) -> Path:
    import os

    path = Path(os.environ["XDG_CONFIG_HOME"]) / "legion" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_misspelt_key_in_the_project_config_is_answered_with_the_one_it_meant(
    project: Path, legion: LegionRunner
) -> None:
    _add(project, "wip_limt = 3")
    result = legion("state")
    config = project / ".legion" / "config.toml"
    assert (result.returncode, result.stderr) == (
        1,
        f'legion: error: unknown setting "wip_limt" in {config}: did you mean "wip_limit"?\n',
    )


def test_a_key_close_to_none_lists_the_settings(project: Path, legion: LegionRunner) -> None:
    _add(project, "zzzq = 3")
    result = legion("state")
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert 'unknown setting "zzzq"' in result.stderr and "did you mean" not in result.stderr
    assert "wip_limit" in result.stderr  # the settings it could be


def test_a_misspelt_key_in_the_user_config_too(project: Path, legion: LegionRunner) -> None:
    path = _user_config('trakcer = "embedded"\n')
    result = legion("issue", "list")
    assert result.returncode == 1
    assert result.stderr == (
        f'legion: error: unknown setting "trakcer" in {path}: did you mean "tracker"?\n'
    )


def test_a_misspelt_setting_variable_is_refused_not_ignored(
    project: Path, legion: LegionRunner
) -> None:
    result = legion("state", env={"LEGION_WIP_LIMT": "3"})
    assert (result.returncode, result.stderr) == (
        1,
        "legion: error: unknown setting LEGION_WIP_LIMT in the environment: "
        "did you mean LEGION_WIP_LIMIT?\n",
    )
    # One close to no setting is another program's, maybe: left alone (doctor names it).
    assert legion("state", env={"LEGION_ZZZQ": "1"}).returncode == 0


def test_a_misspelt_choice_is_answered_with_the_one_it_meant(git_repo: Path) -> None:
    result = run_legion("init", "--tracker", "linaer", cwd=git_repo)
    assert result.returncode == 2
    assert result.stderr == (
        "legion: error: option --tracker must be one of embedded, linear, github, got "
        "'linaer': did you mean \"linear\"?\n"
    )
    assert not (git_repo / ".legion").exists()
    for args, said in (
        (["demo", "--runtime", "codx"], 'did you mean "codex"?'),
        (["demo", "--mode", "lm"], 'did you mean "llm"?'),
        (["events", "--kind", "blokced"], 'did you mean "blocked"?'),
    ):
        result = run_legion(*args, cwd=git_repo)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, (args, result)
        assert result.stderr.strip().endswith(said), result.stderr


@pytest.mark.parametrize("as_json", [False, True])
def test_doctor_fails_on_a_broken_project_config_as_every_command_does(
    project: Path, legion: LegionRunner, as_json: bool
) -> None:
    _add(project, "wip_limt = 3")
    refused = legion("status").stderr.removeprefix("legion: error: ").strip()
    assert refused.startswith('unknown setting "wip_limt"')
    args = ["doctor", "--json"] if as_json else ["doctor"]
    result = legion(*args, env={"LEGION_CLAUDE_BIN": "/bin/true"})
    assert result.returncode == 1, result.stdout
    if as_json:
        report = json.loads(result.stdout)
        assert report["ok"] is False
        checks = {check["name"]: check for check in report["checks"]}
        assert checks["project config"]["ok"] is False
        assert checks["project config"]["required"] is True
        assert checks["project config"]["detail"] == refused
        assert checks["config"]["ok"] is True
    else:
        assert f"INVALID  project config  {refused}" in result.stdout
        assert "fix: " in result.stdout


def test_doctor_fails_on_a_broken_user_config_and_environment(
    project: Path, legion: LegionRunner
) -> None:
    path = _user_config("tick = -1\n")
    refused = legion("state").stderr.removeprefix("legion: error: ").strip()
    assert refused.startswith(f"{path}: key 'tick'")
    result = legion("doctor", "--json")
    assert result.returncode == 1
    checks = {check["name"]: check for check in json.loads(result.stdout)["checks"]}
    assert checks["config"]["detail"] == refused and checks["config"]["ok"] is False
    assert "project config" not in checks  # the same line once is enough
    path.unlink()
    variable = legion("doctor", "--json", env={"LEGION_WIP_LIMT": "3"})
    assert variable.returncode == 1
    checks = {check["name"]: check for check in json.loads(variable.stdout)["checks"]}
    assert "did you mean LEGION_WIP_LIMIT?" in checks["config"]["detail"]


def test_doctor_names_a_legion_variable_that_is_no_setting(
    project: Path, legion: LegionRunner
) -> None:
    result = legion("doctor", "--json", env={"LEGION_ZZZQ": "1"})
    checks = [c for c in json.loads(result.stdout)["checks"] if c["name"] == "environment"]
    assert len(checks) == 1 and checks[0]["required"] is False
    assert checks[0]["detail"] == "LEGION_ZZZQ is no setting of Legion's: ignored"
    good = {c["name"]: c for c in json.loads(legion("doctor", "--json").stdout)["checks"]}
    assert good["project config"]["ok"] and good["config"]["ok"]
