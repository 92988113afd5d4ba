"""The real `legion` console script and `git`, run as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LEGION_BIN = Path(sys.executable).with_name("legion")


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


LegionRunner = Callable[..., Result]


def run_legion(
    *args: str,
    cwd: Path,
    input_text: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> Result:
    """The real `legion` console script, as a user runs it: a process of its own, forked from
    a server that has imported Legion already unless `LEGION_TEST_FORKS=0`
    (`tests/support/cli_forks.py`)."""
    return legion_process(list(args), cwd, {**os.environ, **(env or {})}, input_text, timeout)


def legion_process(
    args: list[str], cwd: Path, env: dict[str, str], input_text: str | None, timeout: float
) -> Result:
    """`legion ARGS` run in `cwd` with exactly the environment `env`."""
    from tests.support import cli_forks

    argv = [str(LEGION_BIN), *args]
    server = cli_forks.server_for(env)
    if server is not None:
        code, out, err = server.run(argv, cwd, env, input_text, timeout)
        return Result(code, out, err)
    proc = subprocess.run(
        argv, check=False, cwd=cwd, capture_output=True, text=True, input=input_text, env=env,
        timeout=timeout,
    )  # fmt: skip
    return Result(proc.returncode, proc.stdout, proc.stderr)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def write_trusted_config(root: Path, text: str) -> None:
    """Write the project's .legion/config.toml as `text` and trust it, as its user would after
    writing it (`legion trust`): for a test that sets what only the user chooses (`tmux_socket`,
    `claude_config_dir`, `github_repo`, …)."""
    from legion.config.paths import state_home
    from legion.trust import trust

    config = root / ".legion" / "config.toml"
    config.write_text(text, encoding="utf-8")
    trust(state_home(os.environ), config, config.read_bytes())


def sleeping_claude(tmp_path: Path, environ: dict[str, str]) -> Path:
    """A `claude` that only sleeps, and a Claude Code config that has seen its first run and is
    logged in (it never reaches a model), named in `environ` (`LEGION_CLAUDE_BIN`,
    `CLAUDE_CONFIG_DIR`)."""
    binary = tmp_path / "bin" / "claude"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\nexec sleep 600\n")
    binary.chmod(0o755)
    config = tmp_path / "claude-config"
    config.mkdir()
    (config / ".claude.json").write_text('{"hasCompletedOnboarding": true}')
    (config / ".credentials.json").write_text("{}")
    environ["LEGION_CLAUDE_BIN"] = str(binary)
    environ["CLAUDE_CONFIG_DIR"] = str(config)
    return binary
