"""Each session's own CLI home (`legion.runtime.homes`, issue 35): what a start makes of it,
what a session left there that is replaced, never followed, and what of yours it is shown."""

from __future__ import annotations

import json
import os
from pathlib import Path

from legion.runtime.claude.paths import transcript_path
from legion.runtime.claude.runtime import ClaudeRuntime
from legion.runtime.codex.runtime import CodexRuntime

SID = "3f0c8a52-7a1e-5d2b-9c41-0d6f3b2e8a11"
KEY = "sk-test-0123456789abcdefghij"


def fake_bin(tmp_path: Path) -> dict[str, str]:
    """A PATH with an executable `claude` and `codex` (the sandbox shows the CLI's install)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name in ("claude", "codex"):
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)
    return {"PATH": str(folder)}


def claude(tmp_path: Path) -> tuple[ClaudeRuntime, dict[str, str], Path]:
    """A Claude Code runtime whose project state is in `tmp_path`, the daemon's environment
    (your own config folder, a key) and a workspace."""
    user = tmp_path / "your-claude"
    user.mkdir()
    env = {"CLAUDE_CONFIG_DIR": str(user), "ANTHROPIC_API_KEY": KEY, "HOME": str(tmp_path)}
    workspace = tmp_path / "ws"
    workspace.mkdir()
    runtime = ClaudeRuntime(state_dir=tmp_path / "state", lookup_env=fake_bin(tmp_path))
    return runtime, env, workspace


def test_a_start_makes_the_sessions_own_home_with_its_first_run_answered(tmp_path: Path) -> None:
    runtime, env, workspace = claude(tmp_path)
    variables = runtime.prepare(env, workspace, SID, own_login=False, confined=True)
    home = runtime.home(SID)
    # Confined, with the daemon's key: its network has no way to the CLI's telemetry.
    assert variables == {
        "CLAUDE_CONFIG_DIR": str(home),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    unconfined = runtime.prepare(env, workspace, SID, own_login=False, confined=False)
    assert unconfined == {"CLAUDE_CONFIG_DIR": str(home)}
    assert home == tmp_path / "state" / "cli" / "claude-code" / "sessions" / SID
    state = json.loads((home / ".claude.json").read_text())
    assert state["hasCompletedOnboarding"] is True
    assert state["projects"][os.path.realpath(workspace)]["hasTrustDialogAccepted"] is True
    assert state["customApiKeyResponses"]["approved"] == [KEY[-20:]]
    assert (home / ".claude.json").stat().st_mode & 0o777 == 0o600
    assert runtime.transcript(workspace, SID) == transcript_path(home, workspace, SID)
    assert list(Path(env["CLAUDE_CONFIG_DIR"]).iterdir()) == []  # yours: not touched


def test_what_a_session_left_in_its_home_is_replaced_never_followed(tmp_path: Path) -> None:
    runtime, env, workspace = claude(tmp_path)
    runtime.prepare(env, workspace, SID, own_login=False, confined=True)
    home = runtime.home(SID)
    victim = tmp_path / "victim"
    victim.write_text("yours\n")
    # What a hostile session writes for whoever starts in its home next (a retro resumes its
    # implementer's conversation there): an MCP server, hooks, links to your files.
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps({"mcpServers": {"x": {"command": "evil"}}}))
    (home / ".claude.json").unlink()
    (home / ".claude.json").symlink_to(planted)
    (home / "settings.json").write_text(json.dumps({"hooks": {"Stop": []}}))
    os.rename(home / "skills", home / "old-skills")
    (home / "skills").symlink_to(victim.parent)
    (home / "CLAUDE.md").unlink()
    (home / "CLAUDE.md").symlink_to(victim)
    (home / ".credentials.json").symlink_to(victim)
    runtime.prepare(env, workspace, SID, own_login=False, confined=True)
    assert not (home / ".claude.json").is_symlink()
    assert "mcpServers" not in json.loads((home / ".claude.json").read_text())
    assert "evil" in planted.read_text()  # replaced, not written through
    for name in ("settings.json", "CLAUDE.md"):
        assert not (home / name).is_symlink() and (home / name).read_bytes() == b""
    assert (home / "skills").is_dir() and not (home / "skills").is_symlink()
    assert (
        not (home / ".credentials.json").exists() and not (home / ".credentials.json").is_symlink()
    )
    assert victim.read_text() == "yours\n"


def test_confined_legions_part_is_shown_read_only_over_the_configuration(tmp_path: Path) -> None:
    runtime, env, workspace = claude(tmp_path)
    runtime.prepare(env, workspace, SID, own_login=False, confined=True)
    home, legion = runtime.home(SID), tmp_path / "state" / "cli" / "claude-code" / "legion"
    access = runtime.sandbox_access(env, SID, own_login=False)
    assert home in access.writable and Path(env["CLAUDE_CONFIG_DIR"]) not in access.writable
    shown = dict(access.replaced)
    for name in ("settings.json", "CLAUDE.md", "skills", "agents", "commands", "plugins"):
        assert shown[home / name] == legion / name
    assert json.loads((legion / "settings.json").read_text()) == {}
    assert (legion / "skills" / "legion-worker" / "SKILL.md").is_file()
    assert home / ".credentials.json" not in shown


def test_unconfined_its_configuration_links_to_legions_part(tmp_path: Path) -> None:
    runtime, env, workspace = claude(tmp_path)
    runtime.prepare(env, workspace, SID, own_login=False, confined=False)
    home, legion = runtime.home(SID), tmp_path / "state" / "cli" / "claude-code" / "legion"
    assert os.readlink(home / "skills") == str(legion / "skills")
    assert (home / "skills" / "legion-worker" / "SKILL.md").is_file()


def test_your_login_is_shown_read_only_only_when_the_daemon_holds_no_key(tmp_path: Path) -> None:
    runtime, env, workspace = claude(tmp_path)
    login = Path(env["CLAUDE_CONFIG_DIR"]) / ".credentials.json"
    login.write_text('{"claudeAiOauth": {}}')
    home = runtime.home(SID)
    runtime.prepare(env, workspace, SID, own_login=True, confined=True)
    assert (home / ".credentials.json").read_bytes() == b""  # bubblewrap shows yours over it
    access = runtime.sandbox_access(env, SID, own_login=True)
    assert dict(access.replaced)[home / ".credentials.json"] == login
    assert login not in access.writable
    runtime.prepare(env, workspace, SID, own_login=True, confined=False)
    assert os.readlink(home / ".credentials.json") == str(login)
    runtime.prepare(env, workspace, SID, own_login=False, confined=True)
    assert not (home / ".credentials.json").exists()
    assert home / ".credentials.json" not in dict(
        runtime.sandbox_access(env, SID, own_login=False).replaced
    )


def test_a_session_an_older_legion_ran_in_your_folder_is_carried_over(tmp_path: Path) -> None:
    runtime, env, workspace = claude(tmp_path)
    old = transcript_path(Path(env["CLAUDE_CONFIG_DIR"]), workspace, SID)
    old.parent.mkdir(parents=True)
    old.write_text('{"type": "user"}\n')
    runtime.prepare(env, workspace, SID, own_login=False, confined=True)
    assert runtime.transcript(workspace, SID).read_text() == '{"type": "user"}\n'
    other = "9a1b2c3d-0000-5000-8000-000000000001"
    linked = transcript_path(Path(env["CLAUDE_CONFIG_DIR"]), workspace, other)
    linked.symlink_to(tmp_path / "victim-not-read")
    (tmp_path / "victim-not-read").write_text("secret")
    runtime.prepare(env, workspace, other, own_login=False, confined=True)
    assert not runtime.transcript(workspace, other).exists()


def test_a_codex_session_gets_your_config_read_only_and_its_own_rollouts(tmp_path: Path) -> None:
    user = tmp_path / "your-codex"
    (user / "sessions" / "2026" / "11" / "29").mkdir(parents=True)
    (user / "config.toml").write_text('model = "gpt-5.5"\n')
    rollout = user / "sessions" / "2026" / "11" / "29" / f"rollout-x-{SID}.jsonl"
    rollout.write_text('{"type": "event_msg"}\n')
    (user / "legion").mkdir()
    (user / "legion" / f"{SID}.jsonl").symlink_to(rollout)
    env = {"CODEX_HOME": str(user), "HOME": str(tmp_path)}
    runtime = CodexRuntime(state_dir=tmp_path / "state", lookup_env=fake_bin(tmp_path))
    workspace = tmp_path
    variables = runtime.prepare(env, workspace, SID, own_login=False, confined=True)
    home = runtime.home(SID)
    assert variables == {"CODEX_HOME": str(home)}
    legion = tmp_path / "state" / "cli" / "codex" / "legion"
    assert (legion / "config.toml").read_text() == 'model = "gpt-5.5"\n'
    shown = dict(runtime.sandbox_access(env, SID, own_login=False).replaced)
    assert shown[home / "config.toml"] == legion / "config.toml"
    assert shown[home / "skills"] == legion / "skills"
    transcript = runtime.transcript(workspace, SID)
    assert transcript == home / "legion" / f"{SID}.jsonl"
    assert transcript.read_text() == '{"type": "event_msg"}\n'  # carried over, linked in its home
    assert Path(os.readlink(transcript)).is_relative_to(home / "sessions")
