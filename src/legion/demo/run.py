"""`legion demo`: the whole swarm on a throwaway repository.

It creates a git repository with a few issues, starts a scripted model server on 127.0.0.1
(or, with `--real`, uses Anthropic's API with your key), and runs the daemon until every issue
went Todo -> Done through plan, implement, review (with one round of changes), retro and finish.
Everything it makes lives in the demo folder: the repository, Legion's state, a private Claude
Code config and a private tmux server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from legion.backends import Backends, open_backends
from legion.config import Project
from legion.core.model import Label, Status
from legion.errors import LegionError, ToolMissingError
from legion.git import run_git
from legion.projects import init_project

CLAUDE_CODE_VERSION = "2.1.328"  # the version the tests pin (scripts/claude-code-version)

DEMO_ISSUES = (
    ("Add a greet() function", "greet(name) returns 'Hello, <name>!'. With a test."),
    ("Add a farewell() function", "farewell(name) returns 'Goodbye, <name>.'. With a test."),
    ("Add a shout() helper", "shout(text) returns the text upper-cased with '!'. With a test."),
    ("Add a whisper() helper", "whisper(text) returns the text lower-cased with '...'."),
    ("Add a count_words() helper", "count_words(text) returns the number of words."),
)


def cache_dir(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "legion" / "claude-code"


def find_or_install_claude(env: Mapping[str, str], say: Callable[[str], None]) -> Path:
    """The Claude Code CLI: `LEGION_CLAUDE_BIN`, Legion's cached copy, or a fresh npm install of
    the pinned version into the cache (the demo's scripted model expects that version)."""
    explicit = env.get("LEGION_CLAUDE_BIN")
    if explicit:
        return Path(explicit)
    cached = cache_dir(env) / "node_modules" / ".bin" / "claude"
    if cached.exists():
        return cached
    npm = shutil.which("npm")
    if npm is None:
        raise ToolMissingError(
            "the demo needs the Claude Code CLI, and npm to install it: install Node.js and npm "
            "(e.g. apt-get install npm), or set LEGION_CLAUDE_BIN"
        )
    say(f"Installing Claude Code {CLAUDE_CODE_VERSION} (once) into {cached.parents[2]} with npm...")
    result = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix",
         str(cached.parents[2]), f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0 or not cached.exists():
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise ToolMissingError(f"npm could not install Claude Code: {last}")
    return cached


def make_repository(repo: Path, issues: int) -> tuple[Project, Backends]:
    repo.mkdir(parents=True, exist_ok=True)
    run_git(repo, "init", "--quiet", "--initial-branch=main")
    run_git(repo, "config", "user.name", "Legion Demo")
    run_git(repo, "config", "user.email", "demo@legion.invalid")
    (repo / "README.md").write_text("# A tiny greeting library\n", encoding="utf-8")
    (repo / ".gitignore").write_text(".legion/\n", encoding="utf-8")
    run_git(repo, "add", "README.md", ".gitignore")
    run_git(repo, "commit", "--quiet", "-m", "A tiny greeting library")
    extra = {
        "state_dir": str(repo / ".legion" / "state"),
        "workspace_root": str(repo.parent / "workspaces"),
        "tmux_socket": str(repo.parent / "tmux.sock"),
        "tmux_config": "/dev/null",
        "tick": 2,
        "restart_cooldown": 5,
    }
    project, _ = init_project(repo, extra=extra)
    backends = open_backends(project)
    for title, body in DEMO_ISSUES[:issues]:
        backends.tracker.create_issue(title, body=body)
    return project, backends


@dataclass
class DemoResult:
    seconds: float
    statuses: dict[str, str]
    requests: int
    controller_requests: int


def run_demo(
    folder: Path,
    *,
    issues: int,
    mode: str,
    real: bool,
    timeout: float,
    say: Callable[[str], None],
) -> DemoResult:
    from legion.daemon import Daemon, DaemonConfig
    from legion.demo.model_server import FakeModelServer
    from legion.demo.offline import base_environment, offline_variables
    from legion.demo.swarm_script import swarm_script

    if shutil.which("tmux") is None:
        raise ToolMissingError("the demo needs tmux: install it (e.g. apt-get install tmux)")
    if real and not os.environ.get("ANTHROPIC_API_KEY"):
        raise LegionError("--real needs ANTHROPIC_API_KEY set to your Anthropic API key")
    claude = find_or_install_claude(os.environ, say)
    repo = folder / "repo"
    project, backends = make_repository(repo, issues)
    identifiers = [issue.identifier for issue in backends.tracker.list_issues()]
    config_dir = folder / "claude-config"
    config_dir.mkdir()
    # A private config the demo owns, past the CLI's one-time onboarding screen.
    (config_dir / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True}))
    server = None
    if real:
        env = dict(os.environ, CLAUDE_CONFIG_DIR=str(config_dir))
    else:
        server = FakeModelServer(swarm_script(identifiers, mode=mode)).start()
        env = base_environment() | offline_variables(
            server.base_url, home=Path(os.environ.get("HOME") or Path.home()),
            config_dir=config_dir, proxy_url=server.base_url,
        )  # fmt: skip
    env["LEGION_CLAUDE_BIN"] = str(claude)
    from legion import skills

    skills.install(config_dir / "skills")
    say(f"Demo repository: {repo}")
    model = (
        "Anthropic's API (your key)" if real else "a SCRIPTED model on 127.0.0.1 (no AI involved)"
    )
    say(
        f"{len(identifiers)} issues; workers are real Claude Code sessions in tmux, "
        f"driven by {model}."
    )
    say(f"Watch them live: tmux -S {project.settings.tmux_socket} attach\n")

    def all_done(b: Backends) -> bool:
        return all(
            i.status is Status.DONE and Label.WORKER_ACTIVE.value not in i.labels
            for i in b.tracker.list_issues()
        )

    started = time.monotonic()
    config = DaemonConfig(
        mode=mode, tick=2.0, restart_cooldown=5.0, run_for=timeout, stop_when=all_done
    )
    daemon = Daemon(project, config, env)
    try:
        with _Progress(project, say):
            daemon.run()
    finally:
        subprocess.run(
            ["tmux", "-S", str(project.settings.tmux_socket), "kill-server"],
            capture_output=True, check=False,
        )  # fmt: skip
        if server is not None:
            server.stop()
    seconds = time.monotonic() - started
    statuses = {i.identifier: i.status.value for i in backends.tracker.list_issues()}
    requests = server.snapshot() if server is not None else []
    scripted = [r for r in requests if r.path.startswith("/v1/messages")]
    controller = [r for r in scripted if r.scenario == "controller"]
    return DemoResult(seconds, statuses, len(scripted), len(controller))


class _Progress:
    """Prints each issue's status changes as the swarm makes them."""

    def __init__(self, project: Project, say: Callable[[str], None]) -> None:
        self.project = project
        self.say = say
        self.seen: dict[str, str] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def poll(self) -> None:
        try:
            # Its own connection each time: SQLite connections stay in their thread.
            issues = open_backends(self.project).tracker.list_issues()
        except LegionError:
            return  # the database is busy: next time
        for issue in issues:
            before = self.seen.get(issue.identifier)
            if before != issue.status.value:
                arrow = f"{before} -> " if before else ""
                clock = time.strftime("%H:%M:%S")
                self.say(f"  {clock}  {issue.identifier}  {arrow}{issue.status.value}")
                self.seen[issue.identifier] = issue.status.value

    def _loop(self) -> None:
        while not self.stop.is_set():
            self.poll()
            self.stop.wait(0.5)

    def __enter__(self) -> _Progress:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)
        self.poll()
