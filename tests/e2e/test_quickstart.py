"""The README's Quickstart, run literally, as a new user on a fresh machine runs it.

A copy of the repository as a clone would have it, run as `env -i` would: a fresh empty HOME,
the system's PATH (no `claude` on it), a locale and a terminal, no other variable. The first
Quickstart line must install Legion, install Claude Code and finish the demo by itself, showing
progress as it goes.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from legion.bus import bus_path
from legion.bus.model import AgentRole, AgentStatus, EventKind
from legion.bus.stored import SqliteBus
from legion.config.paths import state_home
from legion.trust import records
from tests.support.claude_env import REPO_ROOT
from tests.support.cli import run_legion
from tests.support.proxy_watch import (
    SessionEnvironments,
    assert_no_session_held_the_key,
    assert_the_ledger_is_the_transcripts,
    session_environments,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def quickstart_lines() -> list[str]:
    """The commands of the README's Quickstart code block, comments stripped."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quickstart", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def fresh_clone(target: Path) -> Path:
    """The repository's files as a clone of the current work would have them: tracked and
    untracked-but-not-ignored files, nothing ignored (no .venv, no caches)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT, check=True, capture_output=True,
    ).stdout.decode()  # fmt: skip
    for name in filter(None, listed.split("\0")):
        source = REPO_ROOT / name
        if not source.is_file():
            continue  # deleted in the work tree
        dest = target / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest)
    return target


def user_environment(home: Path) -> dict[str, str]:
    """A new user's login on a stock system: a fresh HOME, the system's PATH (no `claude` on it,
    no virtual environment), a locale and a terminal, and nothing else (`env -i`)."""
    return {
        "HOME": str(home),
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TERM": "xterm",
    }


def test_the_quickstart_works_as_written_on_a_fresh_machine(tmp_path: Path) -> None:
    install_and_demo = quickstart_lines()[0]
    assert "legion demo" in install_and_demo
    clone = fresh_clone(tmp_path / "legion")
    home = tmp_path / "home"
    home.mkdir()
    env = user_environment(home)
    assert shutil.which("claude", path=env["PATH"]) is None

    started = time.monotonic()
    # Its sessions watched from outside as they run. The demo's folder is a new one in /tmp:
    # the user's environment names no TMPDIR (this process's may).
    with session_environments(Path("/tmp/legion-demo-")) as seen:
        proc = subprocess.Popen(
            ["bash", "-c", install_and_demo],
            cwd=clone, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        assert proc.stdout is not None
        lines: list[tuple[float, str]] = []
        for line in proc.stdout:
            lines.append((time.monotonic() - started, line.rstrip("\n")))
        proc.wait(timeout=60)
    output = "\n".join(text for _, text in lines)
    demo_folder = re.search(r"^  files:\s+(\S+)", output, re.MULTILINE)
    try:
        assert proc.returncode == 0, output[-6000:]
        assert "3 of 3 issues Done" in output
        # Legion installed Claude Code itself, into the user's cache, and said so first.
        cached = home / ".cache" / "legion" / "claude-code" / "node_modules" / ".bin" / "claude"
        assert cached.exists()
        assert f"Claude Code: {cached} (cached install)" in output
        # Whether the workers ran confined, said up front.
        sandbox = r"^  sandbox:\s+(sessions confined by bubblewrap|NONE: sessions run unconfined)"
        assert re.search(sandbox, output, re.MULTILINE), output[:2000]
        # Progress as it went: workers started and finished, status changes, requests so far.
        for issue in ("LEG-1", "LEG-2", "LEG-3"):
            assert re.search(rf"{issue}\s+plan worker started", output)
            assert re.search(rf"{issue}\s+finish worker finished \(\d+ s\)", output)
            assert re.search(rf"{issue}\s+Retro -> Done\s+\(\d+ model requests so far\)", output)
            assert re.search(rf"^{issue}\s+Done\s+plan .*finish\s+\d+ s\s+\d+\s+#\d merged", output,
                             re.MULTILINE)  # fmt: skip
        # Never silent for long once the demo runs (pip and npm may take their time before).
        demo_lines = [at for at, text in lines if text.startswith("  ") and ":" in text[:9]]
        gaps = [b - a for a, b in itertools.pairwise(demo_lines)]
        assert demo_lines and max(gaps, default=0) < 30, gaps
        # It cleaned up: no tmux server left, no workspace of a Done issue.
        assert demo_folder is not None
        folder = Path(demo_folder.group(1))
        socket = folder / "tmux.sock"
        alive = subprocess.run(
            ["tmux", "-S", str(socket), "list-windows", "-a"], capture_output=True, check=False
        )
        assert alive.returncode != 0
        workspaces = folder / "workspaces"
        assert not workspaces.exists() or not any(workspaces.iterdir())
        _the_demo_kept_its_secrets_and_its_state(seen, folder, output, env)
    finally:
        if demo_folder is not None:
            shutil.rmtree(demo_folder.group(1), ignore_errors=True)


def _the_demo_kept_its_secrets_and_its_state(
    seen: SessionEnvironments, folder: Path, output: str, user_env: dict[str, str]
) -> None:
    """What the demo promises besides its progress: none of its sessions held the model key
    (the daemon's proxy did), and the proxy metered what the transcripts say (issue 21); its
    bus and trust stay in its folder; its workers ended their modes; and every command its
    closing lines suggest works as printed, from the user's shell."""
    repo = folder / "repo"
    assert_no_session_held_the_key(seen, folder)
    # The demo's bus and its trust in its config are in its folder: nothing of it is left
    # outside once the folder goes (three demos once left 33 agents in `legion agents`).
    assert not bus_path(user_env).exists() and not records(state_home(user_env)).exists()
    own = {"LEGION_STATE_HOME": str(folder / "state")}
    assert_the_ledger_is_the_transcripts(repo, user_env | own, "LEG-1")
    assert "SCRIPTED model" in output
    assert (repo / "src" / "feature_1.py").exists()
    assert (repo / "docs" / "solutions" / "leg-2.md").exists()
    log = run_legion("log", "-n", "500", cwd=repo, env=user_env | own)
    assert "dispatch_finisher" in log.stdout
    # Stopping marks what it stopped: on the bus as the demo left it (nobody has looked since),
    # every worker ended its mode, and the controller it stopped is not running.
    bus = SqliteBus(bus_path(own))
    try:
        agents = bus.agents(include_archived=True)
        stopped = [
            (e.agent_id, e.detail) for e in bus.events() if e.kind is EventKind.AGENT_STOPPED
        ]
    finally:
        bus.close()
    workers = {(a.branch, a.name): a.status for a in agents if a.role is not AgentRole.CONTROLLER}
    assert set(workers.values()) == {AgentStatus.COMPLETE}, workers
    assert {("legion/leg-1", "finish"), ("legion/leg-3", "finish")} <= workers.keys()
    (controller,) = [a for a in agents if a.role is AgentRole.CONTROLLER]
    assert controller.status is AgentStatus.STOPPED
    assert (controller.id, "the demo ended") in stopped
    # Every command the closing lines suggest works as printed, from the user's shell (where
    # `legion` is not on PATH), and shows the demo's figures: its tokens too.
    advice = output.split("Look around", 1)[1].split("Remove them all", 1)[0]
    commands = [line.split("   (")[0].strip() for line in advice.splitlines()[1:]]
    assert commands[0] == f"cd {repo}", commands
    assert commands[1] == f"export LEGION_STATE_HOME={folder / 'state'}", commands
    shell_env = user_env | {"COLUMNS": "200"}  # a terminal's width: an address on one line
    for command in commands[2:]:
        ran = subprocess.run(
            ["bash", "-c", f"{commands[0]} && {commands[1]} && {command}"],
            env=shell_env, capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        assert ran.returncode == 0 and ran.stdout.strip(), (command, ran.stderr)
        if " issue show " in command:
            assert re.search(r"^Tokens: [\d.]+k? in", ran.stdout, re.MULTILINE), ran.stdout
        if command.endswith(" agents"):
            assert "@repo/legion/leg-1/finish" in ran.stdout, ran.stdout
    # The user's own bus has none of the demo's agents.
    assert run_legion("agents", cwd=folder.parent, env=user_env).stdout.strip() == "No agents."
