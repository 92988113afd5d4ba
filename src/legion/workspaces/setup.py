"""Workspace setup and refresh, run (`legion.core.workspace_setup` decides when).

Each issue's record is a folder of the project's state, `workspace-setup/<ISSUE>/`, which no
session is shown (a confined session writes only its own `sessions/<id>/` folder):

- `state.json`: the record (`SetupState`), written by the daemon (and `legion dispatch`);
- `run.json`: what the runner is to run (argv lists, folder, environment: no secret);
- `result.json`: how the run ended (`Result`), written atomically by the runner;
- `output.log`: what the commands wrote, shown by `legion peek`.

The runner (`python -m legion.workspaces.setup RUN_JSON`) is Legion's own process, outside any
sandbox, in a session of its own so a daemon's tick never waits for it: it runs each command
(confined like a session, `setup_argv`) in a process group of its own, kills that group at the
time limit, and writes the result. A daemon killed meanwhile finds the runner by its pid and
start time; one that died without a result is run again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from legion.core.model import normalize_identifier
from legion.core.workspace_setup import (
    Action,
    Commands,
    Decision,
    Kind,
    Result,
    Running,
    SetupState,
    backoff,
    decide,
    ended,
    failure_comment,
    last_change,
    started_session,
    tail,
)
from legion.daemon_link import poke
from legion.errors import ConflictError
from legion.files.private import (
    open_private,
    open_private_binary_append,
    private_folder,
    write_private,
)
from legion.sandbox import Confinement, Sandbox, bridge, wrap

logger = logging.getLogger(__name__)

FOLDER = "workspace-setup"
CACHE_FOLDER = "cache"
# Where each tool is told its cache is, under the project's cache folder.
CACHE_VARIABLES = {
    "XDG_CACHE_HOME": "",
    "UV_CACHE_DIR": "uv",
    "npm_config_cache": "npm",
    "PIP_CACHE_DIR": "pip",
}
# What of the daemon's environment a confined setup gets: nothing that may be a secret.
PASSED_VARIABLES = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME", "TERM")
# The time a runner's processes get between SIGTERM and SIGKILL at the time limit.
KILL_GRACE_S = 2.0


class SetupPendingError(ConflictError):
    """A worker's start waits for its workspace's setup (running, or backing off after a
    failure): the reconciler defers it, as for a full host. `action`: what the gate decided
    (`Action.RUN`, `WAIT` or `HOLD`; "" when unknown)."""

    def __init__(self, message: str, action: str = "") -> None:
        super().__init__(message)
        self.action = action


def shell() -> str:
    return shutil.which("bash") or "/bin/sh"


def setup_argv(
    sandbox: Sandbox | None,
    confinement: Confinement | None,
    command: str,
    egress: bridge.Egress | None,
) -> list[str]:
    """The argv that runs one setup `command` (`bash -c COMMAND`, never interpolated):
    confined, under the sandbox's bridge as its pid 1, dying with its runner, in a network of
    its own whose one way out is the daemon's egress proxy (`egress`; None: none at all);
    unconfined as it is (`sandbox` None or not confining)."""
    argv = [shell(), "-c", command]
    if sandbox is None or not sandbox.confined or confinement is None:
        return argv
    inner = bridge.command(argv, egress=egress)
    wrapped = wrap(sandbox, replace(confinement, network=False), inner)
    # Killed with its runner: the runner's own kill at the time limit reaches inside.
    return [wrapped[0], "--die-with-parent", *wrapped[1:]]


def cache_folder(state_dir: Path, issue: str) -> Path:
    """The cache folder of `issue`'s setup: its own, never another issue's. A setup runs what
    its workspace holds (a package's build script, an npm script), which its worker may have
    planted: what it writes in a cache it must not be able to leave for another issue's setup
    to install (and so into that issue's workspace and pull request)."""
    return state_dir / CACHE_FOLDER / normalize_identifier(issue)


def cache_env(cache: Path) -> dict[str, str]:
    return {name: str(cache / sub) if sub else str(cache) for name, sub in CACHE_VARIABLES.items()}


def pid_start(pid: int) -> str | None:
    """When process `pid` started (its /proc start time, in ticks since boot): a pid reused by
    another process has another. None when it runs no more (or is a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    if not fields or fields[0] == "Z" or len(fields) < 20:
        return None
    return fields[19]


class SetupFiles:
    """One issue's setup folder in the state folder."""

    def __init__(self, state_dir: Path, issue: str) -> None:
        self.folder = state_dir / FOLDER / normalize_identifier(issue)

    @classmethod
    def at(cls, folder: Path) -> SetupFiles:
        """A run's files in `folder` (a check of the embedded forge's CI keeps its own)."""
        files = cls.__new__(cls)
        files.folder = folder
        return files

    @property
    def state(self) -> Path:
        return self.folder / "state.json"

    @property
    def result(self) -> Path:
        return self.folder / "result.json"

    @property
    def log(self) -> Path:
        return self.folder / "output.log"

    @property
    def run(self) -> Path:
        return self.folder / "run.json"

    def load(self) -> SetupState:
        try:
            return SetupState.from_json(json.loads(self.state.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return SetupState()

    def save(self, state: SetupState) -> None:
        write_private(self.state, json.dumps(state.to_json(), indent=1))

    def read_result(self) -> Result | None:
        try:
            return Result.from_json(json.loads(self.result.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def output(self, lines: int = 40) -> str:
        return "\n".join(log_end(self.log).splitlines()[-lines:])


# The most of a log's end read (by `legion peek`, and by the runner for its result's tail).
LOG_END_BYTES = 64 * 1024


def log_end(log: Path) -> str:
    """The last `LOG_END_BYTES` of `log`, as text: the commands write it through the
    descriptor they were handed, and may make it as large as they like (a sparse `truncate`
    costs them nothing); "" when it cannot be read."""
    try:
        with log.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - LOG_END_BYTES))
            return handle.read(LOG_END_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


# The runners this process started, by pid: polled, so none is left a zombie.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def _alive(run: Running | None) -> bool:
    if run is None:
        return False
    child = _CHILDREN.get(run.pid)
    if child is not None and child.poll() is not None:
        _CHILDREN.pop(run.pid, None)
        return False
    return pid_start(run.pid) == run.pid_start


def current(files: SetupFiles) -> SetupState:
    """The record with its runner's end (or death) folded in."""
    state = files.load()
    return ended(state, files.read_result(), _alive(state.running))


def launch(
    files: SetupFiles,
    kind: Kind,
    want: str,
    argvs: Sequence[Sequence[str]],
    shown: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    wake: Path | None,
    capability: str | None = None,
) -> Running:
    """Start the runner for `argvs` (one command each) in a session of its own; it returns at
    once. `capability`: what the commands' bridge shows the egress proxy, handed to the runner
    in its environment (never in `run.json` or its command line)."""
    run_id = secrets.token_hex(8)
    private_folder(files.folder)
    files.result.unlink(missing_ok=True)
    spec = {
        "run_id": run_id,
        "kind": kind.value,
        "hash": want,
        "argvs": [list(argv) for argv in argvs],
        "shown": list(shown),
        "cwd": str(cwd),
        "env": dict(env),
        "timeout": timeout,
        "log": str(files.log),
        "result": str(files.result),
        "wake": None if wake is None else str(wake),
    }
    write_private(files.run, json.dumps(spec))
    write_private(files.log, "")  # this run's output alone
    # The runner's own words (a crash) go to the log too.
    with open_private_binary_append(files.log) as log:
        runner_env = {k: v for k, v in os.environ.items() if k != bridge.CAPABILITY_ENV}
        if capability:
            runner_env[bridge.CAPABILITY_ENV] = capability
        child = subprocess.Popen(
            [sys.executable, "-m", "legion.workspaces.setup", str(files.run)],
            env=runner_env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    _CHILDREN[child.pid] = child
    return Running(run_id, kind.value, want, child.pid, pid_start(child.pid) or "", time.time())


@dataclass(frozen=True)
class Plan:
    """How one issue's setup runs: its commands' argv (confined or not), folder, environment."""

    argv: Callable[[str], list[str]]
    cwd: Path
    env: Mapping[str, str]
    capability: str | None = None  # shown to the egress proxy by the commands' bridge


def gate(
    files: SetupFiles,
    issue: str,
    commands: Commands,
    plan: Callable[[], Plan],
    comment: Callable[[str], None],
    *,
    asked: bool = False,
    wake: Path | None = None,
    now: float | None = None,
) -> None:
    """Let a worker's start in `issue`'s workspace go on (returns), or raise
    SetupPendingError saying why it waits: setup or refresh just started, one runs, or the
    last failed and backs off (said on the issue once, through `comment`). `asked`: a person
    asked for the start (`legion dispatch`), which tries a failed run again at once."""
    if not commands.setup and not commands.refresh and not files.state.exists():
        return
    moment = time.time() if now is None else now
    state = current(files)
    if asked and state.running is None:  # asked while one runs: that run is the retry
        state = replace(state, retry_now=True)
    decision = decide(commands, state, moment)
    if decision.action is Action.REPORT and state.last is not None:
        comment(failure_comment(issue, state.last, state.failures, backoff(state.failures)))
        state = replace(state, reported=True)
        decision = decide(commands, state, moment)
    if decision.action is Action.START:
        if commands.setup or commands.refresh:
            files.save(started_session(state))
        return
    if decision.action is Action.RUN:
        state = _run(files, decision, state, commands, plan(), wake)
    files.save(state)
    raise SetupPendingError(
        f"{issue}: {decision.detail} (`legion peek {issue}` shows it)", decision.action.value
    )


def _run(
    files: SetupFiles,
    decision: Decision,
    state: SetupState,
    commands: Commands,
    plan: Plan,
    wake: Path | None,
) -> SetupState:
    assert decision.kind is not None and decision.hash is not None
    shown = commands.of(decision.kind)
    running = launch(
        files,
        decision.kind,
        decision.hash,
        [plan.argv(command) for command in shown],
        shown,
        cwd=plan.cwd,
        env=plan.env,
        timeout=commands.timeout,
        wake=wake,
        capability=plan.capability,
    )
    return replace(state, running=running, attempt=state.attempt + 1, retry_now=False)


def look(files: SetupFiles, commands: Commands, now: float | None = None) -> Decision | None:
    """What a start would meet now (changing nothing): None when it would go on."""
    if not commands.setup and not commands.refresh:
        return None
    decision = decide(commands, current(files), time.time() if now is None else now)
    return None if decision.action is Action.START else decision


def activity(files: SetupFiles) -> float | None:
    """When the issue's setup last did something (`last_change`): its output's last change,
    its run's start or its last run's end."""
    try:
        changed: float | None = files.log.stat().st_mtime
    except OSError:
        changed = None
    return last_change(current(files), changed)


def summary(files: SetupFiles, now: float | None = None) -> dict[str, Any]:
    """What `legion workspace list` shows of an issue's setup."""
    state = current(files)
    status = state.status()
    found: dict[str, Any] = {"status": status, "attempt": state.attempt}
    if status == "failed" and state.last is not None:
        found["why"] = state.last.why
        found["next_at"] = state.next_at
    return found


# The runner: Legion's own process, outside any sandbox.


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    for signum in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signum)
        try:
            process.wait(timeout=KILL_GRACE_S)
            if signum == signal.SIGKILL:
                return
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(OSError):
        os.killpg(process.pid, signal.SIGKILL)  # what the first left behind in the group


def run(spec: Mapping[str, Any]) -> Result:
    """Run the spec's commands in order, each in a process group of its own, until one fails
    or the time is up; their output to the log."""
    started = time.time()
    deadline = time.monotonic() + float(spec["timeout"])
    log = Path(spec["log"])
    command, code, timed_out = "", 0, False
    # The egress proxy's capability comes in the runner's environment, not in the spec.
    capability = os.environ.get(bridge.CAPABILITY_ENV)
    env = {**spec["env"], **({bridge.CAPABILITY_ENV: capability} if capability else {})}
    with open_private(log, "a") as out:
        for argv, shown in zip(spec["argvs"], spec["shown"], strict=True):
            command = shown
            out.write(f"$ {shown}\n")
            out.flush()
            try:
                process = subprocess.Popen(
                    argv,
                    cwd=spec["cwd"],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                out.write(f"legion: cannot run it: {exc}\n")
                code = 127
                break
            try:
                code = process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill_group(process)
                timed_out, code = True, -9
                out.write(f"legion: timed out after {spec['timeout']:g} s: killed\n")
                break
            if code != 0:
                break
    text = log_end(log)  # the end alone: the commands may have swelled it
    return Result(
        run_id=str(spec["run_id"]),
        kind=str(spec["kind"]),
        hash=str(spec["hash"]),
        ok=code == 0 and not timed_out,
        command=command,
        exit_code=None if timed_out else code,
        timed_out=timed_out,
        tail=tail(text),
        started=started,
        finished=time.time(),
    )


def main(args: Sequence[str]) -> int:
    if len(args) != 1:
        logger.error("usage: python -m legion.workspaces.setup RUN_JSON")
        return 2
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    result = run(spec)
    write_private(Path(spec["result"]), json.dumps(result.to_json()))
    if spec.get("wake"):
        poke(Path(spec["wake"]))
    return 0 if result.ok else 1


if __name__ == "__main__":
    from legion.diagnostics.log import setup

    setup(strict=False)  # a workspace's setup is never failed for its log
    sys.exit(main(sys.argv[1:]))
