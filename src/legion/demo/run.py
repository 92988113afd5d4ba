"""`legion demo`: the whole swarm on a throwaway repository.

It creates a git repository with a few issues, starts a scripted model server on 127.0.0.1
(or, with `--real`, uses Anthropic's or OpenAI's API with your key), and runs the daemon until
every issue went Todo -> Done through plan, implement, review (with one round of changes), retro
and finish. `--runtime` chooses the agent CLI: Claude Code (the default), Codex for every session,
or mixed (Codex implementers, Claude Code for every other role); Codex sessions get their own
scripted Responses-API server. Everything it makes lives in the demo folder: the repository,
Legion's state, the machine's state it would otherwise share (its own bus, its trust in its
config: `LEGION_STATE_HOME` is the folder's `state/`), a private Claude Code config, a private
Codex home and a private tmux server. Removing the folder leaves nothing of it behind.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from legion.backends import Backends, open_backends
from legion.config import Project
from legion.config.paths import STATE_HOME_ENV
from legion.core.model import Label, Status
from legion.demo.clean_up import clean_up
from legion.errors import LegionError, ToolMissingError
from legion.git import run_git
from legion.plugins import DEFAULT_RUNTIME, RUNTIMES, DemoPlugin, RuntimePlugin, load
from legion.runtime.npm_pin import Binary
from legion.sandbox import reported
from legion.services.projects import init_project

if TYPE_CHECKING:
    from legion.demo.model_server import FakeModelServer, RecordedRequest
    from legion.demo.responses_server import FakeResponsesServer

# The runtimes the demo runs (those the registry gives a `DemoPlugin`), the default first.
DEMO_RUNTIMES = tuple(
    sorted(
        (plugin for plugin in RUNTIMES if plugin.demo is not None),
        key=lambda plugin: plugin.name != DEFAULT_RUNTIME,
    )
)
MIXED = "mixed"  # the default runtime, and each other one in the roles it takes when mixed


def _mixed_roles() -> dict[str, str]:
    """Role -> runtime, in `--runtime mixed` (the roles not named run on the default one)."""
    return {
        role: plugin.name
        for plugin in DEMO_RUNTIMES
        if plugin.demo is not None
        for role in plugin.demo.mixed_roles
    }


# `--runtime`: the settings each choice writes into the demo project.
RUNTIME_CHOICES: dict[str, dict[str, object]] = {
    **{
        plugin.name: {} if plugin.name == DEFAULT_RUNTIME else {"runtime": plugin.name}
        for plugin in DEMO_RUNTIMES
    },
    MIXED: {"runtimes": _mixed_roles()},
}


def runtime_variables(choice: str) -> dict[str, str]:
    """`RUNTIME_CHOICES[choice]` as the variables that set it (`LEGION_RUNTIME`,
    `LEGION_RUNTIMES`): for a host of the fleet demo, whose clone's config does not say."""
    settings = RUNTIME_CHOICES[choice]
    variables = {}
    if "runtime" in settings:
        variables["LEGION_RUNTIME"] = str(settings["runtime"])
    if "runtimes" in settings:
        roles = _mixed_roles()
        variables["LEGION_RUNTIMES"] = ",".join(f"{role}={name}" for role, name in roles.items())
    return variables


# How many of `DEMO_ISSUES` `legion demo` runs unless told.
DEMO_ISSUE_COUNT = 3
DEMO_ISSUES = (
    ("Add a greet() function", "greet(name) returns 'Hello, <name>!'. With a test."),
    ("Add a farewell() function", "farewell(name) returns 'Goodbye, <name>.'. With a test."),
    ("Add a shout() helper", "shout(text) returns the text upper-cased with '!'. With a test."),
    ("Add a whisper() helper", "whisper(text) returns the text lower-cased with '...'."),
    ("Add a count_words() helper", "count_words(text) returns the number of words."),
)


def issues_text(count: int) -> str:
    """`1 issue`, `3 issues`."""
    return f"{count} issue{'' if count == 1 else 's'}"


def used_runtimes(choice: str) -> list[RuntimePlugin]:
    """The runtimes `--runtime choice` runs sessions on, the default first."""
    names = {DEFAULT_RUNTIME, *_mixed_roles().values()} if choice == MIXED else {choice}
    return [plugin for plugin in DEMO_RUNTIMES if plugin.name in names]


def _demo(plugin: RuntimePlugin) -> DemoPlugin:
    assert plugin.demo is not None, plugin.name  # DEMO_RUNTIMES have one
    return plugin.demo


def demo_binary(
    plugin: RuntimePlugin, env: Mapping[str, str], say: Callable[[str], None]
) -> Binary:
    """The CLI of `plugin` the demo runs: the one configured, else the pinned version in
    Legion's cache, installed there first if it is missing. The same resolver then finds it
    for the daemon and every worker."""
    found: Binary = load(_demo(plugin).binary)(env, say)
    return found


def make_repository(
    repo: Path, issues: int, settings: Mapping[str, object] | None = None, *, epic: bool = False
) -> tuple[Project, Backends]:
    """A throwaway repository with Legion set up and `issues` demo issues in Todo; with `epic`,
    one epic in Backlog instead, opted in (`epic`), for the architect to split."""
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
        **(settings or {}),
    }
    project, _ = init_project(repo, extra=extra)
    backends = open_backends(project)
    if epic:
        from legion.demo.swarm_script import EPIC

        title, body = EPIC
        backends.tracker.create_issue(title, body=body, status=Status.BACKLOG, labels=["epic"])
        return project, backends
    for title, body in DEMO_ISSUES[:issues]:
        backends.tracker.create_issue(title, body=body)
    return project, backends


@dataclass
class IssueSummary:
    identifier: str
    status: str
    modes: list[str]  # the workers it had, in order
    seconds: float | None  # first worker start to Done
    requests: int | None  # scripted model requests made for it (None with --real)
    pr: str  # "#3 merged", "#3 open", "none"


@dataclass
class DemoResult:
    folder: Path
    seconds: float
    statuses: dict[str, str]
    requests: int
    controller_requests: int
    issues: list[IssueSummary] = field(default_factory=list)
    paused: str | None = None  # why dispatch stopped, when a worker could not start
    kept_workspaces: list[str] = field(default_factory=list)
    interrupted: int | None = None  # the signal (SIGINT, SIGTERM) that stopped the run
    screens: dict[str, Path] = field(default_factory=dict)  # issue -> its failed worker's screen


def run_demo(
    folder: Path | None,
    *,
    issues: int,
    mode: str,
    real: bool,
    timeout: float,
    say: Callable[[str], None],
    runtime: str = DEFAULT_RUNTIME,
    web: bool = False,
    then: Callable[[DemoResult], None] | None = None,
    epic: bool = False,
) -> DemoResult:
    """Check what the demo needs, then make `folder` (None: a new temporary one) and run it
    there: a failed check leaves nothing behind. `then` is given the result while the demo's
    state is still the process's, and (`web`) its web view still serves."""
    _check_prerequisites(runtime, real)
    binaries = {
        plugin.name: demo_binary(plugin, os.environ, say) for plugin in used_runtimes(runtime)
    }
    folder = _make_folder(folder)
    with _state_home(demo_state_home(folder)), contextlib.ExitStack() as served:
        from legion.web.serve import served_beside

        beside = functools.partial(served_beside, served, say) if web else None
        result = _run(
            folder, issues, mode, real, timeout, say, runtime, binaries, beside, epic=epic
        )
        if then is not None:
            then(result)
        return result


def demo_homes(folder: Path) -> dict[str, str]:
    """Where each runtime's CLI keeps its home in the demo in `folder`, by its setting
    (`claude_config_dir`: the demo's folder for it)."""
    return {
        _demo(plugin).home_setting: str(folder / _demo(plugin).home_folder)
        for plugin in DEMO_RUNTIMES
    }


def demo_state_home(folder: Path) -> Path:
    """The demo's own machine state (`LEGION_STATE_HOME`): its bus, its trust in its config."""
    return folder / "state"


@contextlib.contextmanager
def _state_home(state: Path) -> Iterator[None]:
    """This process's `LEGION_STATE_HOME` is the demo's while it runs: every part of Legion it
    runs (`legion init`'s trust, the daemon, its sessions, which inherit it) reads and writes
    the demo's bus, never the machine's."""
    before = os.environ.get(STATE_HOME_ENV)
    os.environ[STATE_HOME_ENV] = str(state)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(STATE_HOME_ENV, None)
        else:
            os.environ[STATE_HOME_ENV] = before


def _run(
    folder: Path,
    issues: int,
    mode: str,
    real: bool,
    timeout: float,
    say: Callable[[str], None],
    runtime: str,
    binaries: Mapping[str, Binary],
    serve_web: Callable[[Path], None] | None = None,
    *,
    epic: bool = False,
) -> DemoResult:
    from legion.daemon import Daemon, DaemonConfig

    used = used_runtimes(runtime)
    repo = folder / "repo"
    # Recorded in the demo project's config: `legion issue show` and `legion workers`, run
    # there afterwards by anyone, read the demo's transcripts, not the user's own.
    homes = demo_homes(folder)
    # The embedded forge's CI, run by the daemon on each pull request's head: the table and
    # the finisher wait for it as for any forge's (`legion pr checks LEG-1`). This Python,
    # which a confined command reads (a `python3` on PATH may be a shim in $HOME). Not in the
    # fleet demo: a fleet's checks are its shared remote's.
    checks = {"checks": [f"{shlex.quote(sys.executable)} -m compileall -q ."]}
    project, backends = make_repository(
        repo, issues, {**RUNTIME_CHOICES[runtime], **homes, **checks}, epic=epic
    )
    identifiers = [issue.identifier for issue in backends.tracker.list_issues()]
    epics, what = _demo_work(identifiers, epic)
    env, servers = _environment(folder, identifiers, mode, real, used, epics=epics)
    model = "a SCRIPTED model on 127.0.0.1 (no AI involved)"
    if real:
        model = f"{' and '.join(f'{_demo(p).api}{chr(39)}s' for p in used)} API (your key)"
    say(f"Legion demo: {what}, {mode} mode, driven by {model}.")
    for plugin in used:
        binary = binaries[plugin.name]
        line = f"  {plugin.description + ':':<12} {binary.path} ({binary.source})"
        if plugin.name != DEFAULT_RUNTIME:
            roles = [role for role, name in _mixed_roles().items() if name == plugin.name]
            line += ", for " + ("every session" if runtime == plugin.name else _roles_text(roles))
        say(line)
    say(f"  files:       {folder}")
    say(f"  sandbox:     {reported(project.settings.sandbox, project.env).summary}")
    say(f"  watch live:  tmux -S {project.settings.tmux_socket} attach")
    if serve_web is not None:
        serve_web(repo)  # the web view, from here until `then` is done
    say("")

    def all_done(b: Backends) -> bool:
        return all(
            i.status is Status.DONE and Label.WORKER_ACTIVE.value not in i.labels
            for i in b.tracker.list_issues()
        )

    started = time.monotonic()
    config = DaemonConfig(
        mode=mode,
        tick=2.0,
        restart_cooldown=5.0,
        # A scripted turn takes seconds: a worker quiet for a minute is stuck, and is restarted
        # rather than left to eat the demo's time. A real model may think for longer.
        stale_after=600.0 if real else 60.0,
        run_for=timeout,
        stop_when=all_done,
        stop_on_pause=True,
        say_pause=False,
    )
    daemon = Daemon(project, config, env)
    progress = _Progress(project, servers, say, started)
    screens: dict[str, Path] = {}
    try:
        with progress:
            daemon.run()
    finally:
        if daemon.paused_reason is not None:
            screens = _save_screens(project, backends, env, folder / "screens")
        subprocess.run(
            ["tmux", "-S", str(project.settings.tmux_socket), "kill-server"],
            capture_output=True, check=False,
        )  # fmt: skip
        # A worker started just before a Ctrl-C never reads its spec: do not wait 30 s for it.
        daemon.workers.starts.cancel_handovers()
        for running in servers:
            running.stop()
    seconds = time.monotonic() - started
    kept = clean_up(project, backends, env)
    progress.poll()  # the workers the clean-up retired
    statuses = {i.identifier: i.status.value for i in backends.tracker.list_issues()}
    scripted = _model_requests(servers)
    controller = [r for r in scripted if r.scenario == "controller"]
    summaries = progress.summaries(backends, None if real else scripted)
    return DemoResult(
        folder,
        seconds,
        statuses,
        len(scripted),
        len(controller),
        summaries,
        daemon.paused_reason,
        kept,
        daemon.stopped_by,
        screens,
    )


def _demo_work(identifiers: list[str], epic: bool) -> tuple[dict[str, tuple[str, str]], str]:
    """The epic (when there is one) with its children to be, and what the demo runs, in words."""
    from legion.demo.swarm_script import epic_children

    if not epic:
        return {}, issues_text(len(identifiers))
    epic_id = identifiers[0]
    return {epic_id: epic_children(epic_id)}, f"1 epic ({epic_id}), split into 2 issues"


def _roles_text(roles: Sequence[str]) -> str:
    """`the implementers`, `the reviewers and the planners`: who runs on a mixed runtime."""
    named = {"implement": "implementers", "review": "reviewers", "plan": "planners"}
    return " and ".join(f"the {named.get(role, role + ' sessions')}" for role in roles)


def _check_prerequisites(runtime: str, real: bool) -> None:
    if runtime not in RUNTIME_CHOICES:
        raise LegionError(f"unknown runtime {runtime!r} (known: {', '.join(RUNTIME_CHOICES)})")
    if shutil.which("tmux") is None:
        raise ToolMissingError("the demo needs tmux: install it (e.g. apt-get install tmux)")
    for plugin in used_runtimes(runtime) if real else []:
        key, api = plugin.secret_variables[0], _demo(plugin).api
        if os.environ.get(key):
            continue
        if plugin.name == DEFAULT_RUNTIME:
            raise LegionError(f"--real needs {key} set to your {api} API key")
        raise LegionError(f"--real --runtime {runtime} needs {key} set to your {api} key")


def _make_folder(folder: Path | None) -> Path:
    if folder is None:
        return Path(tempfile.mkdtemp(prefix="legion-demo-"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _save_screens(
    project: Project, backends: Backends, env: Mapping[str, str], into: Path
) -> dict[str, Path]:
    """The last screen of each worker that failed to start, saved before the demo's tmux server
    goes (with it, `legion peek`): issue -> file."""
    from legion.backends import open_workers
    from legion.store.actionlog import ActionLog

    workers = open_workers(project, backends, env)
    failed = {
        entry.issue
        for entry in ActionLog(backends.db).tail(1000)
        if entry.action == "worker_start" and entry.outcome.value == "failed"
    }
    saved = {}
    for issue in sorted(failed):
        try:
            _, screen = workers.roster.peek(issue, lines=200)
        except LegionError:
            continue
        into.mkdir(parents=True, exist_ok=True)
        path = into / f"{issue}.txt"
        path.write_text(screen, encoding="utf-8")
        saved[issue] = path
    return saved


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes:02d}:{rest:02d}"


QUIET_REPORT_S = 10.0  # with nothing else to say, report what is running this often


def _environment(
    folder: Path,
    identifiers: list[str],
    mode: str,
    real: bool,
    used: Sequence[RuntimePlugin],
    *,
    implement_pause: float = 0.0,
    epics: Mapping[str, tuple[str, str]] | None = None,
) -> tuple[dict[str, str], list[Any]]:
    """The demo's private home of each runtime's CLI (each session runs in a home of its own,
    with Legion's skills: `legion.runtime.homes`), and the environment that points the CLIs at
    them; unless `real`, the scripted servers too (started): the default runtime's always, and
    that of each other runtime in `used` whose CLI speaks another API. `epics`: each epic's
    two children, which the scripted architect makes and the script then works as issues."""
    from legion.demo.model_server import FakeModelServer
    from legion.demo.offline import base_environment, network_variables
    from legion.demo.swarm_script import swarm_script

    for plugin in DEMO_RUNTIMES:
        (folder / _demo(plugin).home_folder).mkdir()
    if real:
        homes = {
            _demo(plugin).home_variable: str(folder / _demo(plugin).home_folder)
            for plugin in DEMO_RUNTIMES
        }
        return dict(os.environ, **homes), []
    # The Anthropic server always runs: it is also the proxy that catches (and refuses) any
    # request a CLI tried to send elsewhere.
    epics = dict(epics or {})
    issues = [i for i in identifiers if i not in epics] + [c for p in epics.values() for c in p]
    script_of = functools.partial(
        swarm_script, issues, mode=mode, implement_pause=implement_pause, epics=epics
    )
    server = FakeModelServer(script_of()).start()
    servers: list[Any] = [server]
    home = Path(os.environ.get("HOME") or Path.home())
    env = base_environment() | network_variables(home, server.base_url)
    for plugin in DEMO_RUNTIMES:
        demo = _demo(plugin)
        served_by = server
        if load(demo.server) is not FakeModelServer:
            if plugin not in used:
                continue
            served_by = load(demo.server)(script_of(flavor=plugin.name)).start()
            servers.append(served_by)
        env |= load(demo.offline_home)(folder / demo.home_folder, served_by.base_url)
    return env, servers


def _model_requests(servers: Sequence[Any]) -> list[Any]:
    """Every model turn the scripted servers answered."""
    return [r for s in servers for r in s.message_requests()]  # each knows its API's paths


class _Progress:
    """Prints, as the swarm goes: each issue's status changes, each worker started and
    finished (with its time), and how many model requests were made so far."""

    def __init__(
        self,
        project: Project,
        servers: Sequence[FakeModelServer | FakeResponsesServer],
        say: Callable[[str], None],
        started: float,
    ) -> None:
        self.project = project
        self.servers = list(servers)
        self.say = say
        self.started = started
        self.statuses: dict[str, str] = {}
        self.seen_workers: dict[int, float] = {}  # record id -> when first seen running
        self.ended_workers: set[int] = set()
        self.first_start: dict[str, float] = {}
        self.done_at: dict[str, float] = {}
        self.modes: dict[str, list[str]] = {}
        self.last_said = started
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _requests(self) -> int | None:
        if not self.servers:
            return None
        return len(_model_requests(self.servers))

    def _line(self, issue: str, text: str) -> None:
        now = time.monotonic()
        self.say(f"  {_clock(now - self.started)}  {issue:<7} {text}")
        self.last_said = now

    def poll(self) -> None:
        from legion.sessions.registry import Registry

        try:
            # Its own connection each time: SQLite connections stay in their thread.
            backends = open_backends(self.project)
            issues = backends.tracker.list_issues()
            history = Registry(backends.db).history()
            backends.db.close()
        except LegionError:
            return  # the database is busy: next time
        now = time.monotonic()
        for record, ended_at in history:
            if record.id not in self.seen_workers:
                self.seen_workers[record.id] = now
                self.first_start.setdefault(record.issue, now)
                self.modes.setdefault(record.issue, []).append(record.mode.value)
                if ended_at is None:
                    self._line(record.issue, f"{record.mode.value} worker started")
            if ended_at is not None and record.id not in self.ended_workers:
                self.ended_workers.add(record.id)
                took = now - self.seen_workers[record.id]
                self._line(record.issue, f"{record.mode.value} worker finished ({took:.0f} s)")
        for issue in issues:
            before = self.statuses.get(issue.identifier)
            status = issue.status.value
            if before != status:
                arrow = f"{before} -> " if before else ""
                requests = self._requests()
                count = f"  ({requests} model requests so far)" if requests and before else ""
                self._line(issue.identifier, f"{arrow}{status}{count}")
                self.statuses[issue.identifier] = status
                if issue.status is Status.DONE:
                    self.done_at[issue.identifier] = now
        if now - self.last_said >= QUIET_REPORT_S:
            running = len([r for r, ended in history if ended is None])
            requests = self._requests()
            count = f", {requests} model requests so far" if requests is not None else ""
            self._line("", f"working: {running} worker(s) running{count}")

    def summaries(
        self, backends: Backends, requests: Sequence[RecordedRequest] | None
    ) -> list[IssueSummary]:
        issues = backends.tracker.list_issues()
        prs = backends.forge.prs_by_issue([issue.identifier for issue in issues])
        result = []
        for issue in issues:
            ident = issue.identifier
            pr = prs.get(ident)
            began, done = self.first_start.get(ident), self.done_at.get(ident)
            count = None
            if requests is not None:
                count = sum(1 for r in requests if (r.scenario or "").startswith(f"{ident}:"))
            result.append(
                IssueSummary(
                    ident,
                    issue.status.value,
                    self.modes.get(ident, []),
                    None if began is None or done is None else done - began,
                    count,
                    f"#{pr.number} {pr.state.value}" if pr else "none",
                )
            )
        return result

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
