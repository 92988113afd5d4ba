"""The full cycle with `tracker = "linear"` and `forge = "github"`: the daemon, real Codex
sessions (scripted model), real tmux and git, against the fake Linear and GitHub servers on
127.0.0.1, the GitHub remote a local bare repository. On Codex: the subject is the backends and
where their credentials go, and a Codex session costs a tenth of a Claude Code one's CPU
(tests/e2e/test_swarm.py runs the same cycle on Claude Code).

The credentials are in the daemon's environment only. Every worker's `legion` command goes
through the daemon's relay with a capability for its own issue; while the swarm runs, the live
sessions' environments are read from /proc, and afterwards the workspace, the transcripts and
the state folder are searched: no token anywhere a worker could see it.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from legion.demo.swarm_script import swarm_script
from tests.fakes.github_server import check_run
from tests.fakes.responses_server import FakeResponsesServer, bash, text
from tests.support.cli import git
from tests.support.linear_github import (
    SECRETS,
    LinearAndGitHub,
    init_on_linear_and_github,
)
from tests.support.processes import session_processes
from tests.support.swarm import Daemon, Swarm, session_uuid
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture
def project(git_repo: Path, linear_github: LinearAndGitHub) -> Path:
    """The project is on Linear and GitHub (the fakes)."""
    return init_on_linear_and_github(git_repo, linear_github)


@pytest.fixture
def swarm_variables(linear_github: LinearAndGitHub) -> dict[str, str]:
    return linear_github.env()


@dataclass
class EnvironWatch:
    """Reads, in a thread, the environment of every live process of the given sessions."""

    session_ids: set[str]
    seen: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    leaks: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def _run(self) -> None:
        while not self._stop.is_set():
            for sid, pids in session_processes(self.session_ids).items():
                for pid in pids:
                    try:
                        raw = Path(f"/proc/{pid}/environ").read_bytes()
                    except OSError:
                        continue
                    if any(secret in raw for secret in SECRETS):
                        self.leaks.append(f"session {sid} (pid {pid})")
                    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
                    self.seen.setdefault(sid, []).append(
                        {
                            k.decode(errors="replace"): v.decode(errors="replace")
                            for k, _, v in pairs
                        }
                    )
            self._stop.wait(0.2)

    def __enter__(self) -> EnvironWatch:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def files_with_secrets(*roots: Path) -> list[str]:
    found = []
    for root in roots:
        for path in root.rglob("*") if root.exists() else ():
            if path.is_file() and not path.is_symlink():
                try:
                    data = path.read_bytes()
                except OSError:
                    continue
                if any(secret in data for secret in SECRETS):
                    found.append(str(path))
    return found


def test_full_cycle_on_linear_and_github(
    swarm: Swarm, linear_github: LinearAndGitHub, codex_server: FakeResponsesServer
) -> None:
    swarm.env["LEGION_RUNTIME"] = "codex"  # every session, the controller's too
    linear, github = linear_github.linear, linear_github.github
    issue = linear.add_issue("Feature one", state="Todo", description="Add feature one.")
    assert issue == "ENG-1"
    # CI on every push, passing; the finisher reads its log through the daemon (issue 38),
    # from its sandbox, and comments it before it merges.
    test = check_run("test", url="https://ci.example/test")
    github.head_checks = [test]
    github.set_job_log(test, "collected 1 item\n\ntest_feature_1.py .\n1 passed in 0.01s\n")
    scenarios = swarm_script([issue], flavor="codex").scenarios
    at = next(n for n, s in enumerate(scenarios) if s.name == f"{issue}:finish")
    merge = scenarios[at].turns[0][0].arguments["cmd"]
    read_log = f'legion issue comment {issue} --body "$(legion pr checks {issue} --log test)"'
    turns = [[bash(f"{read_log} && {merge}", "Merged.")], [text("Merged.")]]
    scenarios[at] = dataclasses.replace(scenarios[at], turns=turns)
    codex_server.script.scenarios.extend(scenarios)
    modes = ("plan", "implement", "review", "finish")
    sids = {session_uuid(swarm, f"{issue}:{mode}") for mode in modes}
    workspace = swarm.workspace_root / "eng-1"
    seen: set[str] = set()

    def done() -> bool:
        seen.add(linear.state_name(issue))
        return linear.state_name(issue) == "Done"

    with EnvironWatch(sids) as watch, Daemon(swarm) as daemon:
        wait_until("ENG-1 Done on Linear", done, timeout=240)
        wait_until("workspace swept", lambda: not workspace.exists(), timeout=60)
    assert {"Todo", "In Progress", "In Review", "Retro", "Done"} <= seen, seen
    assert "Traceback" not in daemon.output()

    # Linear: the plan as Legion's (marked) comment, no workflow label left behind.
    comments = linear.comments_of(issue)
    assert any("## Plan" in c["body"] and "<!-- legion:" in c["body"] for c in comments)
    assert linear.label_names(issue) & {"worker-done", "worker-active"} == set()
    # GitHub: the branch pushed, the PR reviewed twice through labels, merged by squash.
    assert git(linear_github.remote, "rev-parse", "--verify", "refs/heads/legion/eng-1").strip()
    assert github.merges == [(1, "SQUASH")]
    assert github.label_names(1) == ["worker-approved"]
    reviews = [body for body in github.comments(1) if "Legion review" in body]
    assert len(reviews) == 2, github.comments(1)
    assert "Please add a docstring." in reviews[0] and "Looks good now." in reviews[1]
    # The finisher read the CI log's end through the daemon; the storage host saw no token.
    assert any("test_feature_1.py .\n1 passed in 0.01s" in c["body"] for c in comments)
    assert github.storage is not None and github.storage.seen
    assert all(auth is None for _path, auth, _range in github.storage.seen)

    # The credentials never reached a session: not in any live environment the watch read,
    # while every session had its capability and the relay's socket instead.
    assert watch.leaks == []
    assert set(watch.seen) >= {session_uuid(swarm, f"{issue}:{m}") for m in ("implement", "review")}
    for environs in watch.seen.values():
        assert all("LEGION_CAPABILITY" in env and "LEGION_RELAY_SOCKET" in env for env in environs)
        assert all(not env.keys() & {"LINEAR_API_KEY", "GITHUB_TOKEN"} for env in environs)
    # Nor in any file a worker could read: the repository, the transcripts, Legion's state.
    state_dir = Path(swarm.json("config")["settings"]["state_dir"]["value"])
    codex_home = Path(swarm.env["CODEX_HOME"])
    found = files_with_secrets(swarm.repo, swarm.workspace_root, codex_home, state_dir)
    assert found == []
