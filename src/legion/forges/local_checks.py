"""The embedded forge's CI: each command of the `checks` setting is a check, which the daemon
runs on every open pull request's head whenever that head changes. The decision table, `legion
pr merge`, `legion pr checks`, `legion state` and the boards read them as any forge's checks,
so the default backend has CI in the loop with nothing else installed.

The head is the one a merge would land: the worker's newest commits are brought home first
(`LocalForge.branch_head`). A run copies that head's files out of git (its index checked out
under a prefix: no `.git`, and none of `git archive`'s `export-ignore` or `export-subst`, which
would let a branch show its checks other files than it merges; at most `MAX_TREE_BYTES`) into
the state folder, `local-checks/<PR>/trees/<head>/`, and runs each command there as `bash -c
COMMAND` through the workspace setup's runner (`legion.workspaces.setup.launch`: a process of
its own, outside the daemon's tick, killed at `checks_timeout`, its output in a log), confined
like a session (`legion.sessions.confinement.check_plan`): it writes only the copy and its
cache, has no network and no secret. The pull request's code is a worker's, so its checks are
run as a worker's commands are.

Each check's latest run is a row of `local_checks` (the head it ran on, its state); its files
are under `local-checks/<PR>/runs/<N>/`. A head with no run of a check yet shows it pending: a
pull request's checks are never "none" while a command is set, so nothing moves on a head its
checks have not seen. A head that cannot be copied fails its checks, said once.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from legion.core.model import ChecksState
from legion.core.text import log_tail
from legion.core.workspace_setup import Kind, SetupState
from legion.errors import GitError, LegionError, NotFoundError
from legion.files.private import private_folder
from legion.forges.base import Check, CheckLog, PrChecks, PrState, PullRequest, named_check
from legion.store import Store, now
from legion.workspaces.setup import Plan, SetupFiles, current, launch, log_end, pid_start

FOLDER = "local-checks"
NO_CI = "the embedded forge runs no CI unless the `checks` setting names commands"
# The most a head's files may weigh to be copied for its checks.
MAX_TREE_BYTES = 2 * 2**30
# How a check that has not run on this head yet is shown (the daemon runs it).
QUEUED = "queued"


@dataclass(frozen=True, slots=True)
class Run:
    """A check's latest run: on which head, and how it stands."""

    pr: int
    name: str
    head: str
    state: ChecksState
    exit_code: int | None


def _folder(state_dir: Path, pr: int) -> Path:
    return state_dir / FOLDER / str(pr)


def run_files(state_dir: Path, pr: int, index: int) -> SetupFiles:
    """The files of the `index`-th check's latest run on PR `pr`."""
    return SetupFiles.at(_folder(state_dir, pr) / "runs" / str(index))


class LocalChecks:
    """The checks' latest runs, as the embedded forge shows them."""

    def __init__(self, db: Store, state_dir: Path, commands: Sequence[str]) -> None:
        self.db = db
        self.state_dir = state_dir
        self.commands = tuple(commands)

    def runs(self, pr: int) -> dict[str, Run]:
        with self.db.read() as conn:
            rows = conn.execute("SELECT * FROM local_checks WHERE pr = ?", (pr,)).fetchall()
        return {
            row["name"]: Run(
                row["pr"], row["name"], row["head"], ChecksState(row["state"]), row["exit_code"]
            )
            for row in rows
        }

    def checks(self, pr: int, head: str | None) -> tuple[Check, ...]:
        """PR `pr`'s checks on `head`: each command's run there, or pending (queued) when it
        has not run there yet (or there is no head to run on)."""
        runs = self.runs(pr)
        found = []
        for command in self.commands:
            run = runs.get(command)
            if run is None or head is None or run.head != head:
                found.append(Check(command, ChecksState.PENDING, status=QUEUED))
                continue
            status = "in_progress" if run.state is ChecksState.PENDING else "completed"
            conclusion = {
                ChecksState.PASSING: "success",
                ChecksState.FAILING: "failure",
            }.get(run.state, "")
            found.append(
                Check(command, run.state, status=status, conclusion=conclusion, log_id=command)
            )
        return tuple(found)

    def log(self, pr: int, head: str | None, name: str) -> CheckLog:
        """The end of check `name`'s latest log on PR `pr` (NotFoundError: no such check, or
        it has not run on this head yet)."""
        check = named_check(self.checks(pr, head), name, pr)
        if check.status == QUEUED:
            raise NotFoundError(
                f"PR #{pr}'s check {check.name!r} has not run on its head yet (the daemon runs "
                "it: `legion start`)"
            )
        files = run_files(self.state_dir, pr, self.commands.index(check.name))
        text, cut = log_tail(log_end(files.log))
        return CheckLog(check.name, text, cut)


def checks_of(checks: LocalChecks | None, pr: PullRequest, head: str, log: str | None) -> PrChecks:
    """`legion pr checks` on the embedded forge: the PR's checks on `head`, with one's log
    when asked; none, saying why, when no command is set."""
    if checks is None:
        if log is not None:
            raise NotFoundError(f"PR #{pr.number} has no check {log!r}: {NO_CI}")
        return PrChecks(pr.number, head, (), None, NO_CI)
    found = None if log is None else checks.log(pr.number, head or None, log)
    return PrChecks(pr.number, head, pr.check_runs, found)


def with_checks(
    checks: LocalChecks | None, repo: Path, prs: list[PullRequest]
) -> list[PullRequest]:
    """`prs`, each open one with its checks on its branch's head (one git call for all)."""
    if checks is None or not any(pr.state is PrState.OPEN for pr in prs):
        return prs
    heads = branch_heads(repo)
    return [
        replace(pr, check_runs=checks.checks(pr.number, heads.get(pr.branch)))
        if pr.state is PrState.OPEN
        else pr
        for pr in prs
    ]


class CheckRunner:
    """What the daemon's `local_checks` step does: start each check due on an open pull
    request's head, and record each run that ended. `plan`: how a command runs confined in a
    tree, with its cache folder (`ConfinementPlanner.check_plan`)."""

    def __init__(
        self,
        checks: LocalChecks,
        repo: Path,
        plan: Callable[[Path, Path], Plan],
        head_of: Callable[[int], str | None],
        *,
        timeout: float,
        wake: Path | None = None,
    ) -> None:
        """`head_of`: a pull request's head now, its worker's commits brought home first
        (`LocalForge.branch_head`): the head a merge would land, never an older copy."""
        self.checks = checks
        self.repo = repo
        self.plan = plan
        self.head_of = head_of
        self.timeout = timeout
        self.wake = wake

    def run(self, open_prs: Sequence[int]) -> list[str]:
        """One look at every open pull request; what changed, in words. One whose head cannot
        be read or copied fails its checks on that head, said once; the others go on."""
        said: list[str] = []
        for number in open_prs:
            head = None
            try:
                head = self.head_of(number)
                if head is not None:
                    said += self._look(number, head)
            except (LegionError, OSError) as exc:
                if head is None:
                    continue  # its branch cannot be read now: looked at again next tick
                # The head cannot be copied out (or a run not started): its checks fail on
                # this head, said once; a new head tries again.
                runs = self.checks.runs(number)
                said_before = runs and all(
                    r.head == head and r.state is ChecksState.FAILING for r in runs.values()
                )
                if said_before:
                    continue  # said already
                for command in self.checks.commands:
                    self._record(number, command, head, ChecksState.FAILING, None, started=True)
                said.append(f"#{number}: its checks could not run on {head[:12]}: {exc}")
        return said

    def _look(self, pr: int, head: str) -> list[str]:
        state_dir = self.checks.state_dir
        runs = self.checks.runs(pr)
        said = []
        for index, command in enumerate(self.checks.commands):
            files = run_files(state_dir, pr, index)
            run = runs.get(command)
            if run is None or run.head != head:
                _stop(files)
                tree = self._tree(pr, head)
                plan = self.plan(tree, _folder(state_dir, pr) / "cache")
                private_folder(files.folder)
                running = launch(
                    files,
                    Kind.CHECK,
                    head,
                    [plan.argv(command)],
                    [command],
                    cwd=plan.cwd,
                    env=plan.env,
                    timeout=self.timeout,
                    wake=self.wake,
                )
                files.save(SetupState(running=running))
                self._record(pr, command, head, ChecksState.PENDING, None, started=True)
                said.append(f"#{pr}: {command}: started on {head[:12]}")
                continue
            if run.state is not ChecksState.PENDING:
                continue
            state = current(files)
            result = state.last if state.last is not None else files.read_result()
            if result is not None and result.hash == head and state.running is None:
                outcome = ChecksState.PASSING if result.ok else ChecksState.FAILING
                self._record(pr, command, head, outcome, result.exit_code)
                said.append(f"#{pr}: {command}: {outcome.value}")
            elif state.running is None and (result is None or result.hash != head):
                # Its runner died without a result (the machine restarted): run it again.
                self._record(pr, command, "", ChecksState.PENDING, None)
        self._sweep(pr, head)
        return said

    def _record(
        self,
        pr: int,
        name: str,
        head: str,
        state: ChecksState,
        exit_code: int | None,
        *,
        started: bool = False,
    ) -> None:
        stamp = now()
        with self.checks.db.write() as conn:
            if started or not head:
                conn.execute(
                    "INSERT INTO local_checks (pr, name, head, state, exit_code, started_at) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (pr, name) DO UPDATE SET "
                    "head = excluded.head, state = excluded.state, exit_code = NULL, "
                    "started_at = excluded.started_at, finished_at = NULL",
                    (pr, name, head, state.value, exit_code, stamp),
                )
            else:
                conn.execute(
                    "UPDATE local_checks SET state = ?, exit_code = ?, finished_at = ? "
                    "WHERE pr = ? AND name = ? AND head = ?",
                    (state.value, exit_code, stamp, pr, name, head),
                )

    def _tree(self, pr: int, head: str) -> Path:
        """A copy of `head`'s files, made once per head: its index checked out under a prefix
        (no `.git`, so none of the repository's records go with it; not `git archive`, whose
        `export-ignore` and `export-subst` would let a branch show its checks other files than
        it merges). Made beside, then moved in whole: a copy cut short is never used."""
        trees = _folder(self.checks.state_dir, pr) / "trees"
        tree = trees / head
        if tree.is_dir():
            return tree
        size = _tree_size(self.repo, head)
        if size > MAX_TREE_BYTES:
            raise GitError(
                f"its files are {size:,} bytes, over the {MAX_TREE_BYTES:,} a check's copy may take"
            )
        private_folder(trees)
        making = trees / f".{head}.{os.getpid()}"
        shutil.rmtree(making, ignore_errors=True)
        index = trees / f".{head}.index"
        env = dict(os.environ) | {"GIT_INDEX_FILE": str(index)}
        try:
            for argv in (
                ["read-tree", head],
                ["checkout-index", "--all", "--force", f"--prefix={making}/"],
            ):
                done = subprocess.run(
                    ["git", "-C", str(self.repo), *argv], env=env, capture_output=True, check=False
                )
                if done.returncode != 0:
                    raise GitError(
                        f"cannot copy {head[:12]} out of git for its checks: "
                        f"{done.stderr.decode(errors='replace').strip()}"
                    )
            private_folder(making)  # a head with no file
            making.rename(tree)
        finally:
            index.unlink(missing_ok=True)
            shutil.rmtree(making, ignore_errors=True)
        return tree

    def _sweep(self, pr: int, head: str) -> None:
        """The copies of older heads, once no check runs in them."""
        trees = _folder(self.checks.state_dir, pr) / "trees"
        with contextlib.suppress(OSError):
            for old in trees.iterdir():
                if old.name != head and old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)

    def forget(self, pr: int) -> None:
        """A pull request merged or closed: its runs stop and its folder goes."""
        for index in range(len(self.checks.commands)):
            _stop(run_files(self.checks.state_dir, pr, index))
        shutil.rmtree(_folder(self.checks.state_dir, pr), ignore_errors=True)


def _stop(files: SetupFiles) -> None:
    """Kill a run still going (its head is not the PR's any more), by its process group."""
    running = current(files).running
    if running is None or pid_start(running.pid) != running.pid_start:
        return
    with contextlib.suppress(OSError):
        os.killpg(running.pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while pid_start(running.pid) is not None and time.monotonic() < deadline:
        time.sleep(0.02)


def _tree_size(repo: Path, head: str) -> int:
    """The bytes of `head`'s files (a tiny branch can hold a file of zeros gigabytes long)."""
    listed = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "-l", "-z", head],
        capture_output=True,
        check=False,
    )
    total = 0
    for entry in listed.stdout.split(b"\0"):
        fields = entry.split(None, 4)
        if len(fields) >= 4 and fields[3].isdigit():
            total += int(fields[3])
    return total


def branch_heads(repo: Path) -> dict[str, str]:
    """Every local branch's head, in one git call."""
    found = subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "for-each-ref",
            "--format=%(objectname) %(refname:short)",
            "refs/heads/",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    heads = {}
    for line in found.stdout.splitlines():
        sha, _, branch = line.partition(" ")
        if branch:
            heads[branch] = sha
    return heads
