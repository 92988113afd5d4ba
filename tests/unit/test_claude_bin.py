"""One resolver decides which Claude Code CLI Legion runs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from legion.config.resolve import machine_settings
from legion.errors import ToolMissingError
from legion.runtime.claude import binary as claude_bin
from legion.runtime.claude.runtime import ClaudeRuntime


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho '9.9.9 (Claude Code)'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def env_with(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "PATH": str(tmp_path / "bin"), **extra}


def test_the_cached_install_is_found_without_any_setting(tmp_path: Path) -> None:
    env = env_with(tmp_path)
    cached = executable(claude_bin.CLI.cached_binary(env))
    assert cached == tmp_path / "home/.cache/legion/claude-code/node_modules/.bin/claude"
    found = claude_bin.CLI.resolve(None, env)
    assert (found.path, found.source) == (cached, "cached install")


def test_xdg_cache_home_moves_the_cache(tmp_path: Path) -> None:
    env = env_with(tmp_path, XDG_CACHE_HOME=str(tmp_path / "cache"))
    assert claude_bin.CLI.cache_prefix(env) == tmp_path / "cache/legion/claude-code"


def test_the_cached_install_comes_before_path(tmp_path: Path) -> None:
    env = env_with(tmp_path)
    executable(tmp_path / "bin" / "claude")
    cached = executable(claude_bin.CLI.cached_binary(env))
    assert claude_bin.CLI.resolve(None, env).path == cached


def test_path_is_the_last_resort(tmp_path: Path) -> None:
    env = env_with(tmp_path)
    on_path = executable(tmp_path / "bin" / "claude")
    found = claude_bin.CLI.resolve(None, env)
    assert (found.path, found.source) == (on_path, "PATH")


def test_the_setting_wins_and_names_its_source(tmp_path: Path) -> None:
    env = env_with(tmp_path)
    executable(claude_bin.CLI.cached_binary(env))
    mine = executable(tmp_path / "mine" / "claude")
    env["LEGION_CLAUDE_BIN"] = str(mine)
    found = claude_bin.CLI.resolve_configured(machine_settings(env), env)
    assert (found.path, found.source) == (mine, "claude_bin (LEGION_CLAUDE_BIN)")


def test_a_bad_setting_is_an_error_naming_the_variable_and_the_fix(tmp_path: Path) -> None:
    env = env_with(tmp_path, LEGION_CLAUDE_BIN=str(tmp_path / "nope"))
    with pytest.raises(ToolMissingError) as caught:
        claude_bin.CLI.resolve_configured(machine_settings(env), env)
    message = str(caught.value)
    assert "LEGION_CLAUDE_BIN" in message and "not an executable file" in message
    assert "\n" not in message


def test_nothing_found_says_how_to_install(tmp_path: Path) -> None:
    env = env_with(tmp_path)
    with pytest.raises(ToolMissingError) as caught:
        claude_bin.CLI.resolve(None, env)
    assert "legion doctor --install" in str(caught.value)
    assert str(claude_bin.CLI.cache_prefix(env)) in str(caught.value)


def test_the_worker_runtime_uses_the_same_resolver(tmp_path: Path) -> None:
    env = env_with(tmp_path)
    cached = executable(claude_bin.CLI.cached_binary(env))
    runtime = ClaudeRuntime(settings=machine_settings(env), lookup_env=env)
    argv = runtime.command("00000000-0000-0000-0000-000000000000", "hi", resume=False)
    assert argv[0] == str(cached)


def test_version_of_reads_the_first_word(tmp_path: Path) -> None:
    binary = executable(tmp_path / "claude")
    assert claude_bin.CLI.version_of(binary) == "9.9.9"
    assert claude_bin.CLI.version_of(tmp_path / "missing") is None
    assert os.access(binary, os.X_OK)
