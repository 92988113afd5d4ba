"""The model key stays with the daemon: `legion demo` on the real Claude Code CLI, its sessions
looked at from outside while they run (`/proc/PID/environ`, as any process of the user could),
and the usage its proxy recorded set against what the transcripts say."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path

import pytest

from legion.backends import open_backends, open_workers
from legion.config import load_project
from legion.demo.offline import FAKE_API_KEY
from tests.support.claude_env import find_claude
from tests.support.cli import run_legion

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


Environ = dict[str, str]


def session_environments(
    root: Path, clis: dict[int, Environ], others: dict[int, Environ], stop: threading.Event
) -> None:
    """Every process of a session of the project under `root` (its environment names a
    session and that project: other tests run beside this one), as it was seen: the Claude
    Code CLIs themselves, and everything else (launchers, hooks, tool commands)."""
    project = f"LEGION_REPO={root}".encode()
    while not stop.wait(0.2):
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) in clis or int(proc.name) in others:
                continue
            with contextlib.suppress(OSError):
                raw = (proc / "environ").read_bytes()
                if b"LEGION_SESSION_ID=" not in raw or project not in raw:
                    continue
                argv0 = (proc / "cmdline").read_bytes().split(b"\0")[0]
                pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
                environ = {k.decode(): v.decode(errors="replace") for k, _, v in pairs}
                cli = argv0.rsplit(b"/", 1)[-1].startswith(b"claude")
                (clis if cli else others)[int(proc.name)] = environ


def test_no_session_holds_the_model_key_and_the_proxy_meters_what_the_transcripts_say(
    tmp_path: Path,
) -> None:
    seen: dict[int, Environ] = {}
    others: dict[int, Environ] = {}
    stop = threading.Event()
    watcher = threading.Thread(
        target=session_environments, args=(tmp_path, seen, others, stop), daemon=True
    )
    watcher.start()
    env = {"LEGION_CLAUDE_BIN": str(find_claude())}
    try:
        result = run_legion(
            "demo", "--dir", str(tmp_path / "demo"), "--issues", "1", cwd=tmp_path, env=env
        )
    finally:
        stop.set()
        watcher.join(5)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 of 1 issue Done" in result.stdout
    # Every session: the controller and the six workers of one issue at least.
    modes = {environ.get("LEGION_MODE") for environ in seen.values()}
    assert {"controller", "plan", "implement", "review", "retro", "finish"} <= modes, modes
    for pid, environ in [*seen.items(), *others.items()]:  # nothing of a session has it
        assert not any(FAKE_API_KEY in value for value in environ.values()), pid
    for environ in seen.values():
        assert "ANTHROPIC_API_KEY" not in environ and "CLAUDE_CODE_OAUTH_TOKEN" not in environ
        assert environ["ANTHROPIC_AUTH_TOKEN"] != FAKE_API_KEY
        assert environ["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:")
    repo = tmp_path / "demo" / "repo"
    # A bearer token is no key the CLI asks about: no dialog was answered for a capability
    # (the CLI would have kept its last 20 characters as approved).
    config = json.loads((tmp_path / "demo" / "claude-config" / ".claude.json").read_text())
    approved = config.get("customApiKeyResponses", {}).get("approved", [])
    tokens = {environ["ANTHROPIC_AUTH_TOKEN"][-20:] for environ in seen.values()}
    assert not tokens & set(approved), approved
    # The ledger the proxy kept is what the transcripts say, phase by phase.
    usage = json.loads(run_legion("usage", "--json", cwd=repo, env=env).stdout)
    loaded = load_project(repo, env=dict(os.environ) | env)
    roster = open_workers(loaded, open_backends(loaded), dict(os.environ) | env).roster
    read = roster.transcript_usage("LEG-1")["LEG-1"]
    by_phase: dict[str, dict[str, int]] = {}
    for row in usage:
        if row["issue"] == "LEG-1":
            phase = by_phase.setdefault(row["phase"], {"input": 0, "output": 0})
            phase["input"] += row["input_tokens"] + row["cache_read_tokens"]
            phase["input"] += row["cache_creation_tokens"]
            phase["output"] += row["output_tokens"]
    transcripts = {
        phase: {"input": used.input + used.cache_read + used.cache_write, "output": used.output}
        for phase, used in read.items()
    }
    assert by_phase == transcripts
    assert any(row["phase"] == "controller" for row in usage)
