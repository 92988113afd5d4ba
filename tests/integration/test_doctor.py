"""`legion doctor` and the one-line errors of commands that need Claude Code when it is missing."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

from tests.support.cli import run_legion, write_trusted_config


def no_claude_path(tmp_path: Path) -> str:
    """PATH with git, tmux and npm but no `claude`."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for tool in ("git", "tmux", "npm", "node"):
        found = shutil.which(tool)
        if found and not (folder / tool).exists():
            (folder / tool).symlink_to(found)
    return str(folder)


def fake_claude(tmp_path: Path, version: str) -> Path:
    path = tmp_path / "fake" / "claude"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{version} (Claude Code)'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_doctor_names_what_is_missing_and_how_to_fix_it(tmp_path: Path) -> None:
    result = run_legion("doctor", "--json", cwd=tmp_path, env={"PATH": no_claude_path(tmp_path)})
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    checks = {check["name"]: check for check in report["checks"]}
    assert checks["git"]["ok"] and checks["tmux"]["ok"]
    assert checks["claude"]["ok"] is False
    assert "legion doctor --install" in checks["claude"]["fix"]
    text = run_legion("doctor", cwd=tmp_path, env={"PATH": no_claude_path(tmp_path)})
    assert text.returncode == 1
    assert "MISSING  claude" in text.stdout and "fix: " in text.stdout


def test_doctor_is_happy_with_a_configured_claude_and_warns_about_the_version(
    tmp_path: Path,
) -> None:
    claude = fake_claude(tmp_path, "0.0.1")
    env = {"PATH": no_claude_path(tmp_path), "LEGION_CLAUDE_BIN": str(claude)}
    result = run_legion("doctor", "--json", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = {check["name"]: check for check in json.loads(result.stdout)["checks"]}
    assert checks["claude"]["detail"].startswith(
        f"0.0.1 at {claude} (claude_bin (LEGION_CLAUDE_BIN)"
    )
    assert checks["claude version"]["ok"] is False
    assert checks["claude version"]["required"] is False


def test_dispatch_without_claude_fails_in_one_line_naming_the_fix(
    project: Path, tmp_path: Path
) -> None:
    env = {"PATH": no_claude_path(tmp_path)}
    created = run_legion("issue", "create", "Something", cwd=project)
    assert created.returncode == 0
    result = run_legion("dispatch", "LEG-1", "plan", cwd=project, env=env)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert "Claude Code CLI not found" in result.stderr
    assert "legion doctor --install" in result.stderr


def fake_codex(tmp_path: Path, version: str = "0.169.0") -> Path:
    path = tmp_path / "fake" / "codex"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho 'codex-cli {version}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def codex_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A machine with git, tmux, npm and a (fake) Claude Code, but no Codex on PATH or in
    Legion's cache, a private CODEX_HOME and none of the caller's OpenAI variables."""
    home = tmp_path / "codex-home"
    home.mkdir(exist_ok=True)
    return {
        "PATH": no_claude_path(tmp_path),
        "LEGION_CLAUDE_BIN": str(fake_claude(tmp_path, "2.0.0")),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "CODEX_HOME": str(home),
        "OPENAI_API_KEY": "",
        **extra,
    }


def checks_of(stdout: str) -> dict[str, dict[str, object]]:
    return {check["name"]: check for check in json.loads(stdout)["checks"]}


CUSTOM_PROVIDER = """\
model = "gpt-5.5"
model_provider = "corp"

[model_providers.corp]
name = "Corp gateway"
base_url = "https://gw-user:gw-password@llm.example.invalid:8443/v1?api-key=in-the-query"
env_key = "CORP_LLM_KEY"
wire_api = "responses"
"""


def test_doctor_without_a_codex_role_reports_a_missing_codex_for_information(
    tmp_path: Path,
) -> None:
    env = codex_env(tmp_path)
    text = run_legion("doctor", cwd=tmp_path, env=env)
    assert text.returncode == 0, text.stdout + text.stderr
    line = next(line for line in text.stdout.splitlines() if " codex " in f"{line} ")
    assert line.split()[:2] == ["info", "codex"]
    assert "not used (no role runs on codex)" in line
    result = run_legion("doctor", "--json", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = checks_of(result.stdout)
    assert checks["codex"]["ok"] is False and checks["codex"]["required"] is False
    assert "codex config" not in checks


def test_doctor_with_a_role_on_codex_and_no_codex_fails_naming_the_fix(tmp_path: Path) -> None:
    env = codex_env(tmp_path, LEGION_RUNTIME="codex")
    text = run_legion("doctor", cwd=tmp_path, env=env)
    assert text.returncode == 1
    assert "MISSING  codex" in text.stdout
    assert "legion doctor --install" in text.stdout
    assert "Traceback" not in text.stderr
    result = run_legion(
        "doctor", "--json", cwd=tmp_path, env=codex_env(tmp_path, LEGION_RUNTIMES="review=codex")
    )
    assert result.returncode == 1
    checks = checks_of(result.stdout)
    assert checks["codex"]["required"] is True
    assert checks["codex"]["detail"] == "not found (used by review)"
    assert "legion doctor --install" in str(checks["codex"]["fix"])
    assert checks["npm"]["required"] is True


def test_doctor_reports_a_custom_codex_provider_without_showing_secrets(tmp_path: Path) -> None:
    codex = fake_codex(tmp_path)
    env = codex_env(tmp_path, LEGION_CODEX_BIN=str(codex), LEGION_RUNTIME="codex")
    (Path(env["CODEX_HOME"]) / "config.toml").write_text(CUSTOM_PROVIDER, encoding="utf-8")
    secret = "sk-very-secret-value-1234"
    hidden = (secret, "gw-password", "gw-user", "in-the-query")

    unset = run_legion("doctor", "--json", cwd=tmp_path, env={**env, "CORP_LLM_KEY": ""})
    assert unset.returncode == 1
    config = checks_of(unset.stdout)["codex config"]
    assert config["ok"] is False and config["required"] is True
    assert "key in $CORP_LLM_KEY (not set)" in str(config["detail"])
    assert "CORP_LLM_KEY" in str(config["fix"])

    env["CORP_LLM_KEY"] = secret
    result = run_legion("doctor", "--json", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = checks_of(result.stdout)
    assert checks["codex"]["ok"] is True
    assert str(checks["codex"]["detail"]).startswith(
        f"0.169.0 at {codex} (codex_bin (LEGION_CODEX_BIN)); used by controller"
    )
    assert "codex version" not in checks
    detail = str(checks["codex config"]["detail"])
    assert "model gpt-5.5, provider corp" in detail
    assert "https://llm.example.invalid:8443/v1" in detail
    assert "key in $CORP_LLM_KEY (set)" in detail
    assert "codex skills" not in checks  # Legion's part of each session's own home
    text = run_legion("doctor", cwd=tmp_path, env=env)
    assert text.returncode == 0
    assert "ok  codex config" in text.stdout
    for shown in (result.stdout, result.stderr, text.stdout, text.stderr, unset.stdout):
        for value in hidden:
            assert value not in shown


def test_doctor_reports_an_openai_login_without_showing_the_key(tmp_path: Path) -> None:
    secret = "sk-openai-secret-5678"
    env = codex_env(
        tmp_path, LEGION_CODEX_BIN=str(fake_codex(tmp_path, "0.1.0")), OPENAI_API_KEY=secret
    )
    (Path(env["CODEX_HOME"]) / "config.toml").write_text('model = "gpt-5.5"\n', encoding="utf-8")
    result = run_legion("doctor", "--json", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = checks_of(result.stdout)
    assert checks["codex"]["ok"] is True and checks["codex"]["required"] is False
    assert checks["codex version"]["ok"] is False and checks["codex version"]["required"] is False
    assert "provider openai, OPENAI_API_KEY is set" in str(checks["codex config"]["detail"])
    assert checks["codex config"]["required"] is False  # no role runs on codex
    (Path(env["CODEX_HOME"]) / "auth.json").write_text("{}", encoding="utf-8")
    text = run_legion("doctor", cwd=tmp_path, env=env)
    assert "provider openai, logged in (auth.json)" in text.stdout
    assert secret not in result.stdout + result.stderr + text.stdout + text.stderr


def test_doctor_reports_a_broken_codex_config_in_one_line(tmp_path: Path) -> None:
    env = codex_env(tmp_path, LEGION_CODEX_BIN=str(fake_codex(tmp_path)))
    config = Path(env["CODEX_HOME"]) / "config.toml"
    config.write_text('model = "gpt-5.5"\nmodel_provider = \n', encoding="utf-8")
    result = run_legion("doctor", "--json", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stdout + result.stderr  # no role runs on codex
    check = checks_of(result.stdout)["codex config"]
    assert check["ok"] is False and check["required"] is False
    assert str(check["detail"]).startswith(f"{config}: ") and "\n" not in str(check["detail"])
    text = run_legion("doctor", cwd=tmp_path, env={**env, "LEGION_RUNTIMES": "implement=codex"})
    assert text.returncode == 1
    lines = [line for line in text.stdout.splitlines() if "codex config" in line]
    assert len(lines) == 1 and lines[0].split()[0] == "MISSING"
    assert "Traceback" not in text.stderr


def test_doctor_requires_codex_when_the_project_puts_a_role_on_it(
    project: Path, tmp_path: Path
) -> None:
    config = project / ".legion" / "config.toml"
    write_trusted_config(
        project, config.read_text(encoding="utf-8") + '\n[runtimes]\nimplement = "codex"\n'
    )
    result = run_legion("doctor", "--json", cwd=project, env=codex_env(tmp_path))
    checks = checks_of(result.stdout)
    assert checks["codex"]["required"] is True
    assert checks["codex"]["detail"] == "not found (used by implement)"
    outside = run_legion("doctor", "--json", cwd=tmp_path, env=codex_env(tmp_path))
    assert checks_of(outside.stdout)["codex"]["required"] is False


def test_doctor_help_offers_installing_codex(tmp_path: Path) -> None:
    result = run_legion("doctor", "--help", cwd=tmp_path, env={"COLUMNS": "200"})
    assert result.returncode == 0
    assert "--codex" in result.stdout and "Codex" in result.stdout


def test_doctor_does_not_require_claude_code_when_every_role_runs_on_codex(
    tmp_path: Path,
) -> None:
    codex = fake_codex(tmp_path)
    env = codex_env(tmp_path, LEGION_CODEX_BIN=str(codex), LEGION_RUNTIME="codex")
    del env["LEGION_CLAUDE_BIN"]
    env["CORP_LLM_KEY"] = "set"
    (Path(env["CODEX_HOME"]) / "config.toml").write_text(CUSTOM_PROVIDER, encoding="utf-8")
    result = run_legion("doctor", "--json", cwd=tmp_path, env=env)
    checks = checks_of(result.stdout)
    assert checks["claude"]["ok"] is False and checks["claude"]["required"] is False
    assert result.returncode == 0, result.stdout
    # one role back on Claude Code, and it is required again
    result = run_legion(
        "doctor", "--json", cwd=tmp_path, env=env | {"LEGION_RUNTIMES": "review=claude-code"}
    )
    assert result.returncode == 1
    assert checks_of(result.stdout)["claude"]["required"] is True


def test_doctor_does_not_warn_about_codex_when_no_role_runs_on_it(tmp_path: Path) -> None:
    """Codex found, but an old version and not logged in: with no role on Codex that is
    information (`info`, no fix to act on), never a warning."""
    env = codex_env(tmp_path, LEGION_CODEX_BIN=str(fake_codex(tmp_path, "0.1.0")))
    text = run_legion("doctor", cwd=tmp_path, env=env).stdout
    lines = text.splitlines()
    codex = [n for n, line in enumerate(lines) if line.split()[1:2] == ["codex"]]
    assert len(codex) == 3, text  # codex, codex version, codex config
    assert {lines[n].split()[0] for n in codex} == {"ok", "info"}, text
    assert not any("fix:" in lines[n + 1] for n in codex if n + 1 < len(lines)), text
    assert "not needed: no role runs on codex" in text
    with_role = run_legion("doctor", cwd=tmp_path, env={**env, "LEGION_RUNTIME": "codex"})
    assert "warning  codex version" in with_role.stdout
    assert "MISSING  codex config" in with_role.stdout


def test_doctor_says_whether_claude_codes_sessions_have_a_credential(tmp_path: Path) -> None:
    """Sessions run in homes of their own, their first run answered by Legion: what they need
    of yours is a key the daemon holds, else your login (never shown)."""
    config = tmp_path / "your-claude"
    config.mkdir()
    env = codex_env(
        tmp_path, CLAUDE_CONFIG_DIR=str(config), ANTHROPIC_API_KEY="", ANTHROPIC_AUTH_TOKEN=""
    )
    env["CLAUDE_CODE_OAUTH_TOKEN"] = ""
    none = checks_of(run_legion("doctor", "--json", cwd=tmp_path, env=env).stdout)["claude login"]
    assert none["ok"] is False and none["required"] is False and none["detail"] == "none found"
    assert "ANTHROPIC_API_KEY" in str(none["fix"])
    (config / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "tok-secret"}}')
    result = run_legion("doctor", "--json", cwd=tmp_path, env=env)
    login = checks_of(result.stdout)["claude login"]
    assert login["ok"] is True and "your login" in str(login["detail"])
    assert "tok-secret" not in result.stdout + result.stderr
    held = run_legion("doctor", "--json", cwd=tmp_path, env={**env, "ANTHROPIC_API_KEY": "sk-k"})
    assert checks_of(held.stdout)["claude login"]["detail"] == "the daemon holds ANTHROPIC_API_KEY"
