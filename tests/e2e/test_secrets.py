"""No secret leaks: a full run of a small swarm with sentinel keys in the environment of the
`legion` processes (ANTHROPIC_API_KEY, which the CLI uses against the scripted model, and
GITHUB_TOKEN and LINEAR_API_KEY), then every place a secret could end up is searched for them:
the state folder, the repository and the workspaces, the Claude Code config folder, the
daemon's output, tmux's global and session environments, every pane's scrollback, and every
process's command line, once mid-run (workers running) and once at the end.

Allowed: the last 20 characters of the API key, which Claude Code itself keeps as the approval
of the key (`customApiKeyResponses.approved` in `.claude.json`), in a file only its owner can
read. The sentinels are built so that their unique part is outside those 20 characters.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.campaign import ENV, FINISH_S, TICK, campaign_swarm
from tests.support.cli import LEGION_BIN
from tests.support.processes import session_processes
from tests.support.swarm import Swarm, issue_status, session_uuid

pytestmark = [pytest.mark.e2e]

FINGERPRINT_CHARS = 20  # what Claude Code keeps of an approved key


@dataclass
class Sentinels:
    values: dict[str, str]  # variable: value
    markers: dict[str, str]  # variable: the unique part searched for

    @classmethod
    def make(cls) -> Sentinels:
        marks = {name: f"lgsentinel{secrets.token_hex(10)}" for name in VARIABLES}
        values = {
            # The unique part, then 20 more characters: the fingerprint holds none of it.
            "ANTHROPIC_API_KEY": f"sk-ant-api03-{marks['ANTHROPIC_API_KEY']}-fingerprint-tail-20",
            "GITHUB_TOKEN": f"ghp_{marks['GITHUB_TOKEN']}",
            "LINEAR_API_KEY": f"lin_api_{marks['LINEAR_API_KEY']}",
        }
        return cls(values, marks)

    def found_in(self, data: bytes) -> list[str]:
        return [name for name, mark in self.markers.items() if mark.encode() in data]


VARIABLES = ("ANTHROPIC_API_KEY", "GITHUB_TOKEN", "LINEAR_API_KEY")


@dataclass
class Findings:
    sentinels: Sentinels
    leaks: list[str] = field(default_factory=list)  # "<where>: <variables>"
    places: dict[str, int] = field(default_factory=dict)  # kind of place: how many searched
    worker_env: dict[str, set[str]] = field(default_factory=dict)  # variable: session ids
    environments_read: set[str] = field(default_factory=set)  # the sessions looked at
    claude_json: list[Path] = field(default_factory=list)  # each session home's

    def search(self, where: str, kind: str, data: bytes) -> None:
        self.places[kind] = self.places.get(kind, 0) + 1
        found = self.sentinels.found_in(data)
        if found:
            self.leaks.append(f"{where}: {', '.join(found)}")


def _files(root: Path) -> Iterator[Path]:
    """Every regular file under `root`, read while the swarm runs: a folder that vanishes
    during the walk (Claude Code's `.claude.json.lock`, a lock made and removed in
    milliseconds) is skipped, never an error. (`Path.rglob` raised FileNotFoundError for one
    once in CI.)"""
    found: list[Path] = []
    for folder, _dirs, names in os.walk(root, onerror=lambda _error: None):
        found += (Path(folder) / name for name in names)
    for path in sorted(found):
        try:
            if path.is_file() and not path.is_symlink() and not path.is_socket():
                yield path
        except OSError:
            continue  # gone meanwhile


def scan(
    swarm: Swarm,
    findings: Findings,
    moment: str,
    extra_files: list[Path],
    *,
    while_running: bool = False,
) -> bool:
    """Search every place for the sentinels; False when `while_running` and no tmux server ran
    at that moment (between two workers there may be none): the caller looks again later."""
    state = swarm.repo / ".legion" / "state"
    for label, root in (
        ("state folder", state),
        ("repository", swarm.repo),
        ("workspaces", swarm.workspace_root),
        ("claude config", swarm.config_dir),
    ):
        for path in _files(root):
            try:
                data = path.read_bytes()
            except OSError:
                continue  # gone meanwhile (a lock)
            findings.search(f"{moment}: {label}: {path}", "files", data)
    for path in extra_files:
        if path.exists():
            findings.search(f"{moment}: {path}", "files", path.read_bytes())
    # tmux: the server's global environment, each session's, and every pane's whole scrollback.
    glob = swarm.tmux("show-environment", "-g")
    if while_running and "PATH=" not in glob:
        return False
    assert "PATH=" in glob, "tmux did not answer"
    findings.search(f"{moment}: tmux show-environment -g", "tmux environments", glob.encode())
    for session in swarm.tmux("list-sessions", "-F", "#{session_name}").split():
        env = swarm.tmux("show-environment", "-t", session)
        findings.search(
            f"{moment}: tmux environment of {session}", "tmux environments", env.encode()
        )
    for pane in swarm.tmux("list-panes", "-a", "-F", "#{pane_id}").split():
        screen = swarm.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", pane)
        findings.search(f"{moment}: scrollback of pane {pane}", "pane scrollbacks", screen.encode())
    # Every process's command line.
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                args = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            findings.search(f"{moment}: command line of pid {entry}", "command lines", args)
    return True


def watch_worker_environments(
    findings: Findings, sids: set[str], stop: threading.Event
) -> threading.Thread:
    """Which sentinels each worker's process environment holds (/proc/PID/environ)."""

    def run() -> None:
        while not stop.is_set():
            for sid, pids in session_processes(sids).items():
                for pid in pids:
                    try:
                        environ = Path(f"/proc/{pid}/environ").read_bytes()
                    except OSError:
                        continue
                    findings.environments_read.add(sid)
                    for name in findings.sentinels.found_in(environ):
                        findings.worker_env.setdefault(name, set()).add(sid)
            stop.wait(0.2)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Findings]:
    """One full run of the swarm with the sentinels, scanned mid-run and at the end."""
    import subprocess

    root = tmp_path_factory.mktemp("secrets")
    home = root / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test User\n\temail = test@example.invalid\n"
        "[init]\n\tdefaultBranch = main\n"
    )
    sentinels = Sentinels.make()
    result = Findings(sentinels)
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith(("LEGION_", "GIT_")):
                patch.delenv(name)
        patch.setenv("HOME", str(home))
        patch.setenv("XDG_STATE_HOME", str(home / "state"))
        patch.setenv("XDG_CONFIG_HOME", str(home / "config"))
        patch.setenv("GIT_CONFIG_NOSYSTEM", "1")
        with campaign_swarm(root, home) as swarm:
            env = swarm.env | ENV | sentinels.values
            keys = ["controller", *(f"LEG-1:{mode}" for mode in ("implement", "review", "finish"))]
            sids = {session_uuid(swarm, key) for key in keys}
            log = root / "daemon-output.log"
            stop = threading.Event()
            watcher = watch_worker_environments(result, sids, stop)
            with log.open("ab") as out:
                daemon = subprocess.Popen(
                    [str(LEGION_BIN), "start", "--foreground", "--tick", TICK],
                    cwd=swarm.repo,
                    env=env,
                    stdout=out,
                    stderr=out,
                )
            try:
                deadline = time.monotonic() + FINISH_S  # as long as any campaign swarm may take
                scanned_mid_run = False
                workspace = swarm.workspace_root / "leg-1"
                while time.monotonic() < deadline:
                    status = issue_status(swarm, "LEG-1")
                    if not scanned_mid_run and status in ("In Progress", "Needs Review", "Retro"):
                        scanned_mid_run = scan(swarm, result, "mid-run", [log], while_running=True)
                    # The duplicate is set aside by the controller, on its own schedule.
                    aside = issue_status(swarm, "LEG-2") == "Icebox"
                    if status == "Done" and not workspace.exists() and aside:
                        break
                    time.sleep(0.3)
                assert scanned_mid_run, "the swarm never reached review"
                assert issue_status(swarm, "LEG-1") == "Done", log.read_text()[-3000:]
                assert issue_status(swarm, "LEG-2") == "Icebox"  # the duplicate, set aside
                scan(swarm, result, "end", [log])
            finally:
                stop.set()
                watcher.join(5)
                daemon.terminate()
                daemon.wait(30)
            scan(swarm, result, "after stop", [log])
            homes = root.rglob("cli/claude-code/sessions/*/.claude.json")
            result.claude_json = sorted(homes)
            yield result


def no_sentinel_anywhere_a_secret_could_leak(findings: Findings) -> None:
    assert findings.leaks == [], "\n".join(findings.leaks[:20])
    # The scan saw what it claims: files, tmux environments, panes, processes, twice over.
    assert findings.places["files"] > 50
    assert findings.places["tmux environments"] >= 4
    assert findings.places["pane scrollbacks"] >= 3
    assert findings.places["command lines"] > 20


def claude_keeps_no_part_of_the_key_in_a_sessions_home(findings: Findings) -> None:
    """The daemon holds the key: no session's own `.claude.json` approves it, not even by its
    last characters (the CLI's fingerprint), and each is private."""
    assert len(findings.claude_json) >= 3, findings.claude_json
    key = findings.sentinels.values["ANTHROPIC_API_KEY"]
    for path in findings.claude_json:
        config = json.loads(path.read_text())
        assert config.get("customApiKeyResponses", {}).get("approved", []) == []
        assert key[-FINGERPRINT_CHARS:] not in path.read_text()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def no_session_holds_the_model_key(findings: Findings) -> None:
    # The daemon's model proxy holds it: each session has its capability in its place.
    assert len(findings.environments_read) >= 3
    assert findings.worker_env.get("ANTHROPIC_API_KEY", set()) == set()


def tracker_and_forge_tokens_do_not_reach_workers(findings: Findings) -> None:
    assert findings.worker_env.keys() & {"GITHUB_TOKEN", "LINEAR_API_KEY"} == set()


# One test over the one run: as several, pytest-xdist would hand them to several processes,
# each running the swarm again for its copy of the module's fixture.
@pytest.mark.timeout(420)  # its swarm, in the fixture, may take FINISH_S
def test_no_secret_reaches_a_session_or_anywhere_it_could_leak(findings: Findings) -> None:
    no_sentinel_anywhere_a_secret_could_leak(findings)
    claude_keeps_no_part_of_the_key_in_a_sessions_home(findings)
    no_session_holds_the_model_key(findings)
    tracker_and_forge_tokens_do_not_reach_workers(findings)
