"""The model key stays with the daemon: every session of a project looked at from outside
while it runs (`/proc/PID/environ`, as any process of the user could), then the usage the
daemon's proxy recorded set against what the transcripts say. Used by the demo's end-to-end
test (`tests/e2e/test_demo.py`), which runs the real Claude Code CLI."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from legion.backends import open_backends, open_workers
from legion.config import load_project
from legion.demo.offline import FAKE_API_KEY
from tests.support.cli import run_legion

Environ = dict[str, str]


@dataclass
class SessionEnvironments:
    """What was seen: the Claude Code CLIs themselves, and everything else of a session
    (launchers, hooks, tool commands), by pid."""

    clis: dict[int, Environ] = field(default_factory=dict)
    others: dict[int, Environ] = field(default_factory=dict)
    command_lines: dict[int, bytes] = field(default_factory=dict)  # every one of them
    # The project's tmux server, looked at while it runs: its global and session environments
    # and every pane's whole scrollback (kept only where a secret is in one).
    tmux_read: dict[str, int] = field(default_factory=dict)  # kind: how many times
    tmux_texts: list[tuple[str, str]] = field(default_factory=list)  # (where, text) to check


def _look_at_tmux(socket: Path, seen: SessionEnvironments) -> None:
    """One look at the tmux server on `socket`, if it runs."""
    import subprocess

    def tmux(*args: str) -> str:
        argv = ["tmux", "-S", str(socket), *args]
        return subprocess.run(argv, capture_output=True, text=True, check=False).stdout

    def keep(kind: str, where: str, text: str) -> None:
        seen.tmux_read[kind] = seen.tmux_read.get(kind, 0) + 1
        if any(secret in text for secret in (FAKE_API_KEY, *SENTINELS.values())):
            seen.tmux_texts.append((where, text))

    if not socket.exists():
        return
    keep("environments", "tmux show-environment -g", tmux("show-environment", "-g"))
    for session in tmux("list-sessions", "-F", "#{session_name}").split():
        keep(
            "environments", f"the environment of {session}", tmux("show-environment", "-t", session)
        )
    for pane in tmux("list-panes", "-a", "-F", "#{pane_id}").split():
        screen = tmux("capture-pane", "-p", "-J", "-S", "-", "-t", pane)
        keep("scrollbacks", f"the scrollback of pane {pane}", screen)


def _watch(root: Path, seen: SessionEnvironments, stop: threading.Event) -> None:
    """Every process of a session of the project under `root` (its environment names a
    session and that project: other tests run beside this one)."""
    project = f"LEGION_REPO={root}".encode()
    looks = 0
    while not stop.wait(0.2):
        looks += 1
        if looks % 5 == 0:  # the demo's tmux server, beside its repository
            _look_at_tmux(root.parent / "tmux.sock", seen)
        for proc in Path("/proc").iterdir():
            pid = int(proc.name) if proc.name.isdigit() else None
            if pid is None or pid in seen.clis or pid in seen.others:
                continue
            with contextlib.suppress(OSError):
                raw = (proc / "environ").read_bytes()
                if b"LEGION_SESSION_ID=" not in raw or project not in raw:
                    continue
                command_line = (proc / "cmdline").read_bytes()
                seen.command_lines[pid] = command_line
                argv0 = command_line.split(b"\0")[0]
                pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
                environ = {k.decode(): v.decode(errors="replace") for k, _, v in pairs}
                cli = argv0.rsplit(b"/", 1)[-1].startswith(b"claude")
                (seen.clis if cli else seen.others)[pid] = environ


@contextlib.contextmanager
def session_environments(root: Path) -> Iterator[SessionEnvironments]:
    seen = SessionEnvironments()
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(root, seen, stop), daemon=True)
    watcher.start()
    try:
        yield seen
    finally:
        stop.set()
        watcher.join(5)


def assert_no_session_held_the_key(seen: SessionEnvironments, demo: Path) -> None:
    """No process of any session had the model key; each CLI had its capability and the
    proxy's URL instead, and no first-run dialog approved a capability as a key."""
    modes = {environ.get("LEGION_MODE") for environ in seen.clis.values()}
    assert {"controller", "plan", "implement", "review", "retro", "finish"} <= modes, modes
    for pid, environ in [*seen.clis.items(), *seen.others.items()]:
        assert not any(FAKE_API_KEY in value for value in environ.values()), pid
    for environ in seen.clis.values():
        assert "ANTHROPIC_API_KEY" not in environ and "CLAUDE_CODE_OAUTH_TOKEN" not in environ
        assert environ["ANTHROPIC_AUTH_TOKEN"] != FAKE_API_KEY
        assert environ["ANTHROPIC_BASE_URL"].startswith("http://127.0.0.1:")
    # A bearer token is no key the CLI asks about: no dialog was answered for a capability
    # (the CLI would have kept its last 20 characters as approved).
    homes = sorted(demo.rglob("cli/claude-code/sessions/*/.claude.json"))
    assert homes, "no session's own home"
    tokens = {environ["ANTHROPIC_AUTH_TOKEN"][-20:] for environ in seen.clis.values()}
    for home in homes:
        config = json.loads(home.read_text())
        approved = config.get("customApiKeyResponses", {}).get("approved", [])
        assert not tokens & set(approved), approved


# Credentials a user may have in the environment they run Legion from: none may reach a session
# (the daemon holds the tracker's and forge's; the demo's tracker and forge need none).
SENTINELS = {
    "GITHUB_TOKEN": "ghp_lgsentinel0123456789abcdefabcdef01",
    "GH_TOKEN": "gho_lgsentinel0123456789abcdefabcdef02",
    "LINEAR_API_KEY": "lin_api_lgsentinel0123456789abcdef03",
}


def assert_no_session_held_a_secret(seen: SessionEnvironments) -> set[str]:
    """No process of any session (whatever its CLI: Claude Code, Codex, its turn loop, the
    commands it ran) had the model key or one of `SENTINELS` in its environment or on its
    command line; returns the modes seen."""
    everyone = [*seen.clis.items(), *seen.others.items()]
    secrets = (FAKE_API_KEY, *SENTINELS.values())
    for pid, environ in everyone:
        held = [name for name, value in environ.items() if any(s in value for s in secrets)]
        assert not held, (pid, environ.get("LEGION_MODE"), held)
    for pid, command_line in seen.command_lines.items():
        assert not any(secret.encode() in command_line for secret in secrets), pid
    assert seen.tmux_texts == [], [where for where, _ in seen.tmux_texts]
    return {environ.get("LEGION_MODE", "") for _, environ in everyone}


def assert_no_file_holds_a_secret(root: Path) -> int:
    """No file under `root` (a demo's folder: its repository, state, workspaces, and both
    CLIs' homes with their transcripts and rollouts) holds the model key or one of
    `SENTINELS`; returns how many files were read."""
    secrets = [value.encode() for value in (FAKE_API_KEY, *SENTINELS.values())]
    read = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            read += 1
            assert not any(secret in data for secret in secrets), path
    return read


def assert_the_ledger_is_the_transcripts(repo: Path, env: dict[str, str], issue: str) -> None:
    """The ledger the proxy kept is what the transcripts say, phase by phase (the transcripts
    read alone, not the merged figures `legion issue show` prints)."""
    usage = json.loads(run_legion("usage", "--json", cwd=repo, env=env).stdout)
    loaded = load_project(repo, env=dict(os.environ) | env)
    roster = open_workers(loaded, open_backends(loaded), dict(os.environ) | env).roster
    read = roster.transcript_usage(issue)[issue]
    by_phase: dict[str, dict[str, int]] = {}
    for row in usage:
        if row["issue"] == issue:
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
