"""Workspace setup and refresh: the pure decisions (docs/workspaces.md).

A new workspace runs the `workspace_setup` commands (say `uv sync`, `npm ci`) before its first
session; each later session in it runs the `workspace_refresh` commands first. Either runs as
a process of its own (`legion.workspaces.setup`), never in the daemon's tick; what is decided
here is, from the workspace's record and the commands configured now, what a worker's start
does: start, run setup or refresh first, or wait (one runs; a failure's back-off).

A failure waits 1, 2, 4 … minutes (at most `CAP_S`) after each failure in a row; a change of
the commands (their hash) or a person's `legion dispatch` tries again at once, and a success
forgets the failures.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

from legion.core.backoff import delay
from legion.core.marks import defanged

BASE_S = 60.0
CAP_S = 60 * 60.0
DEFAULT_TIMEOUT_S = 900.0
TAIL_LINES = 20


class Kind(StrEnum):
    SETUP = "setup"
    REFRESH = "refresh"
    CHECK = "check"  # one of the embedded forge's CI checks (`legion.forges.local_checks`)


def commands_hash(commands: Sequence[str]) -> str:
    """What identifies a list of commands (a change of any, or of their order, is a change)."""
    return hashlib.sha256(json.dumps(list(commands)).encode()).hexdigest()[:16]


def backoff(failures: int) -> float:
    """How long to wait after the `failures`-th failure in a row: 1, 2, 4 … minutes, capped."""
    return delay(failures, base=BASE_S, cap=CAP_S) if failures > 0 else 0.0


@dataclass(frozen=True)
class Result:
    """What a run ended with, written by its runner (`legion.workspaces.setup`)."""

    run_id: str
    kind: str
    hash: str
    ok: bool
    command: str  # the command that failed, or the last one run
    exit_code: int | None
    timed_out: bool
    tail: tuple[str, ...]
    started: float
    finished: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Result:
        return cls(
            run_id=str(data["run_id"]),
            kind=str(data["kind"]),
            hash=str(data["hash"]),
            ok=bool(data["ok"]),
            command=str(data["command"]),
            exit_code=None if data.get("exit_code") is None else int(data["exit_code"]),
            timed_out=bool(data.get("timed_out", False)),
            tail=tuple(str(line) for line in data.get("tail", ())),
            started=float(data["started"]),
            finished=float(data["finished"]),
        )

    @property
    def why(self) -> str:
        if self.ok:
            return "ok"
        if self.timed_out:
            return f"`{self.command}` timed out after {self.finished - self.started:.0f} s"
        return f"`{self.command}` exited with {self.exit_code}"


@dataclass(frozen=True)
class Running:
    """A run under way: its runner's pid and start time (a reused pid is told apart)."""

    run_id: str
    kind: str
    hash: str
    pid: int
    pid_start: str
    started: float


@dataclass(frozen=True)
class SetupState:
    """One workspace's setup record, kept by the daemon (`legion.workspaces.setup`)."""

    setup_hash: str | None = None  # the setup commands that last succeeded here
    consumed: bool = False  # a session started since the last success
    failures: int = 0  # in a row
    attempt: int = 0  # runs so far
    last: Result | None = None
    running: Running | None = None
    reported: bool = False  # the last failure was said on the issue
    retry_now: bool = False  # a person asked (`legion dispatch`): no back-off

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["last"] = None if self.last is None else self.last.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SetupState:
        last = data.get("last")
        running = data.get("running")
        return cls(
            setup_hash=data.get("setup_hash"),
            consumed=bool(data.get("consumed", False)),
            failures=int(data.get("failures", 0)),
            attempt=int(data.get("attempt", 0)),
            last=None if not last else Result.from_json(last),
            running=None if not running else Running(**running),
            reported=bool(data.get("reported", False)),
            retry_now=bool(data.get("retry_now", False)),
        )

    @property
    def next_at(self) -> float | None:
        """When a failed run may run again (None: not failed, or at once when asked)."""
        if self.last is None or self.last.ok or self.failures == 0:
            return None
        return self.last.finished + backoff(self.failures)

    def status(self) -> str:
        """none, running, ok or failed: what `legion workspace list` shows."""
        if self.running is not None:
            return "running"
        if self.last is None:
            return "none"
        return "ok" if self.last.ok else "failed"


def ended(state: SetupState, result: Result | None, alive: bool) -> SetupState:
    """The record once its runner is seen again: its result folded in, or (dead without one: a
    daemon or machine killed during setup) a run that is to run again, not counted a failure."""
    run = state.running
    if run is None:
        return state
    if result is not None and result.run_id == run.run_id:
        if result.ok:
            setup_hash = result.hash if result.kind == Kind.SETUP.value else state.setup_hash
            return replace(
                state,
                running=None,
                last=result,
                failures=0,
                consumed=False,
                reported=False,
                setup_hash=setup_hash,
            )
        return replace(
            state, running=None, last=result, failures=state.failures + 1, reported=False
        )
    if alive:
        return state
    return replace(state, running=None)  # its next start runs it again


class Action(StrEnum):
    START = "start"  # nothing to run: the session starts
    RUN = "run"  # run `kind`'s commands, then start
    WAIT = "wait"  # a run is under way
    HOLD = "hold"  # the last run failed: back off until `until`
    REPORT = "report"  # the last run failed and is not yet said on the issue


@dataclass(frozen=True)
class Decision:
    action: Action
    kind: Kind | None = None
    hash: str | None = None
    until: float | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "detail", self.detail or self.action.value)


@dataclass(frozen=True)
class Commands:
    setup: tuple[str, ...] = ()
    refresh: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT_S

    def of(self, kind: Kind) -> tuple[str, ...]:
        return self.setup if kind is Kind.SETUP else self.refresh


def due(commands: Commands, state: SetupState) -> tuple[Kind, str] | None:
    """What must run before a session starts in the workspace: its setup when the setup
    commands have not succeeded there (none, or others than now), else its refresh when a
    session started since the last success; None when nothing."""
    if commands.setup:
        setup_hash = commands_hash(commands.setup)
        if state.setup_hash != setup_hash:
            return Kind.SETUP, setup_hash
    if commands.refresh and state.consumed:
        return Kind.REFRESH, commands_hash(commands.refresh)
    return None


def decide(commands: Commands, state: SetupState, now: float) -> Decision:
    """What a worker's start does now, given the workspace's record (`ended` folded in)."""
    if state.running is not None:
        return Decision(Action.WAIT, detail="waiting for workspace setup (it runs)")
    needed = due(commands, state)
    if needed is None:
        return Decision(Action.START)
    kind, want = needed
    last = state.last
    failed_same = last is not None and not last.ok and last.kind == kind.value and last.hash == want
    if failed_same and state.failures > 0:
        if not state.reported:
            return Decision(Action.REPORT, kind, want, detail=f"workspace {kind.value} failed")
        until = state.next_at
        if not state.retry_now and until is not None and now < until:
            return Decision(
                Action.HOLD,
                kind,
                want,
                until=until,
                detail=f"workspace {kind.value} failed ({last.why if last else ''}); "
                f"tried again in {until - now:.0f} s",
            )
    return Decision(Action.RUN, kind, want, detail=f"waiting for workspace {kind.value}")


def last_change(state: SetupState, log_changed: float | None) -> float | None:
    """When the workspace's setup last did something: its output's last change (`log_changed`,
    the log's mtime), its run's start, or its last run's end, whichever came last; None for a
    setup that never ran. What a fleet's host reports as the activity of a worker whose start
    waits for it (`legion.core.fleet.hosted_state`)."""
    times = [
        moment
        for moment in (
            log_changed,
            None if state.running is None else state.running.started,
            None if state.last is None else state.last.finished,
        )
        if moment is not None
    ]
    return max(times) if times else None


def started_session(state: SetupState) -> SetupState:
    """A session started in the workspace: its next start runs the refresh commands."""
    return replace(state, consumed=True, retry_now=False)


def tail(text: str, lines: int = TAIL_LINES) -> tuple[str, ...]:
    return tuple(text.splitlines()[-lines:])


def code_block(text: str) -> str:
    """`text` as a Markdown code block no line of it can close (a fence longer than any run of
    backticks in it)."""
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def failure_comment(issue: str, result: Result, failures: int, retry_in: float) -> str:
    """What Legion says on the issue, once, when its workspace's setup (or refresh) failed."""
    kind = "setup" if result.kind == Kind.SETUP.value else "refresh"
    # The output of commands the workspace's own files may say: no marker of Legion's in it.
    lines = defanged("\n".join(line.replace("\0", "") for line in result.tail)) or "(no output)"
    minutes = max(1, round(retry_in / 60))
    return (
        f"Legion's workspace {kind} for {issue} failed: {result.why}, so no worker started "
        f"(failure {failures} in a row; the workspace is kept). Its last lines of output, "
        f"as the command wrote them:\n\n{code_block(lines)}\n\n"
        f"Legion tries again in about {minutes} min, at once when the `workspace_{kind}` "
        f"commands change, or now with `legion dispatch {issue} MODE`. "
        f"`legion peek {issue}` shows the whole output."
    )
