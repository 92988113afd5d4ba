"""The kill campaign: a small swarm killed (SIGKILL) at one named fault point, then run on.

One run: a project made like the demo's (`make_repository`), two issues (LEG-1 In Progress, the
whole cycle from there with idempotent scripted workers; LEG-2 in Triage, which the controller
closes when it is woken for it), the real Claude Code CLI on the scripted model, a private tmux
server, and `legion start --foreground` as a separate process with `LEGION_TEST_KILL_AT` armed.
When the armed point has killed its process (the daemon, or for the merge points the finisher's
`legion pr merge`), the daemon is started again without the fault, and the swarm must finish:

- every issue closed (the feature Done, the duplicate set aside in Icebox), none lost;
- never two live processes on one Claude session id: any session of the project (the
  controller's, every mode of every issue), sampled from /proc all through the run
  (`SessionWatch`), not only looked at in the end;
- no work lost: every commit ever at the tip of a `legion/*` branch ends up on main;
- no duplicate commits on main (each subject once, one merge per PR).

The workers are scripted the way the worker skill asks a real model to work: idempotently
(commit only what changed, open the PR only if there is none, merge only what is not merged),
since a worker may be a re-run after a crash. Used by tests/e2e/test_kill_campaign.py and
bench/faults.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from legion.demo.offline import codex_offline_home
from legion.demo.run import make_repository
from legion.demo.swarm_script import CONTROLLER_PROMPT, scripted_server, worker_prompt
from legion.diagnostics.faults import KILL_AT_VARIABLE, KILL_LOG_VARIABLE, POINTS
from legion.plugins import DEFAULT_RUNTIME
from tests.fakes.responses_server import FakeResponsesServer
from tests.support.cli import LEGION_BIN, git
from tests.support.codex_env import find_codex
from tests.support.processes import SessionWatch
from tests.support.swarm import (
    Swarm,
    failure_sections,
    issue_status,
    open_swarm,
    session_uuid,
    stop_process,
)

# Which time each point is reached to kill at (`point:N`): the occurrence that is most
# dangerous in this swarm. The 2nd worker start is the reviewer's, after a transition: a crash
# there must restart the reviewer, not the implementer whose record is the latest.
CAMPAIGN: tuple[str, ...] = (
    "after_registry_start:2",
    "after_worker_active:2",
    "after_window_started:2",
    "transition_labels_cleared",
    "transition_status_moved",
    "merge_after_git",
    "merge_recorded",
    "sweep_before_remove",
    "sweep_after_remove",
    "controller_started",
    "judgment_typed",
)
assert sorted(spec.split(":")[0] for spec in CAMPAIGN) == sorted(POINTS)
# The test suite's share: a worker start cut short after a transition, a transition cut in
# half, a merge cut before it is recorded (`QUICK_CHAIN`: one run kills at each in turn, the
# order the issue's cycle reaches them), and the daemon killed after the controller took a
# wake-up (`QUICK_ALONE`, a run of its own: when the controller takes it depends on the pace
# of the workers, so it has no place in that order).
QUICK_CHAIN: tuple[str, ...] = (
    "after_worker_active:2",
    "transition_labels_cleared",
    "merge_after_git",
)
QUICK_ALONE: tuple[str, ...] = ("judgment_typed",)
QUICK: tuple[str, ...] = QUICK_CHAIN + QUICK_ALONE

# How long the swarm has to finish once it runs unarmed: the cycle takes some 30 s alone, and
# was seen to take over 110 s on a machine loaded with the rest of the suite.
FINISH_S = 180.0
# Short times, as in tests/e2e/test_recovery.py: a worker that ended its turn without finishing
# (its command was killed) is restarted after STALE_AFTER seconds.
TICK = "0.5"
ENV = {"LEGION_STALE_AFTER": "4", "LEGION_RESTART_COOLDOWN": "1"}
DONE = "--add worker-done --remove worker-active"


def _one(command: str, summary: str, flavor: str) -> list[list[object]]:
    server = scripted_server(flavor)
    return [[server.bash(command, summary)], [server.text(summary)]]


def issue_scenarios(issue: str, flavor: str = DEFAULT_RUNTIME) -> list[Any]:
    """plan, implement, review (approves), retro and finish for `issue`, each safe to run
    again (the campaign's issue starts In Progress: its planner runs only in bench/soak.py),
    as the `flavor` runtime's scripted server plays them."""
    n = issue.split("-")[1]
    low = issue.lower()
    commit = "git add -A && (git diff --cached --quiet || git commit -qm {message})"
    # What was done is read first, and a read that fails ends the step (the daemon restarting,
    # the database down): read as "not done", it posted the plan twice in a soak.
    plan = (
        f"seen=$(legion issue comments {issue} --json)"
        f" && (printf '%s' \"$seen\" | grep -q '## Plan'"
        f" || legion issue comment {issue} --body '## Plan: add src/feature_{n}.py')"
        f" && legion issue label {issue} {DONE}"
    )
    implement = (
        f"mkdir -p src && printf 'def feature_{n}():\\n    return {n}\\n' > src/feature_{n}.py"
        f" && {commit.format(message=repr(f'{issue}: feature {n}'))}"
        f" && (legion pr view {issue} --json >/dev/null 2>&1"
        f" || legion pr create --issue {issue} --branch legion/{low})"
        f" && legion issue label {issue} {DONE}"
    )
    review = (
        f"seen=$(legion pr view {issue} --json)"
        f' && (printf \'%s\' "$seen" | grep -q \'"review": "approved"\''
        f" || legion pr review {issue} --approve --body 'Looks good.')"
        f" && legion issue label {issue} {DONE}"
    )
    retro = (
        f"mkdir -p docs/solutions && printf '# {issue}\\n\\nSmall features merge cleanly.\\n'"
        f" > docs/solutions/{low}.md && {commit.format(message=repr(f'{issue}: retro'))}"
        f" && legion issue label {issue} {DONE}"
    )
    finish = (
        f'(legion pr view {issue} --json | grep -q \'"state": "merged"\''
        f" || (legion pr ready {issue} && legion pr merge {issue}))"
        f" && legion issue move {issue} Done && legion issue label {issue} --remove worker-active"
    )
    plays = [
        ("plan", plan, "Plan posted."),
        ("implement", implement, "PR opened."),
        ("review", review, "Review recorded."),
        ("retro", retro, "Learnings committed."),
        ("finish", finish, "Merged and closed."),
    ]
    return [play(mode, issue, command, summary, flavor) for mode, command, summary in plays]


def play(mode: str, issue: str, command: str, summary: str, flavor: str = DEFAULT_RUNTIME) -> Any:
    """`mode`'s worker on `issue`: runs `command` in one turn, then says `summary`."""
    return scripted_server(flavor).Scenario(
        worker_prompt(mode, issue), _one(command, summary, flavor), name=f"{issue}:{mode}",
        regex=True,
    )  # fmt: skip


def controller_scenarios(triage: str, flavor: str = DEFAULT_RUNTIME) -> list[Any]:
    """The controller: woken for `<triage>:triage` it sets that issue aside (a duplicate);
    otherwise it has nothing to judge."""
    server = scripted_server(flavor)
    close = f"legion issue move {triage} Icebox"  # a duplicate: the controller closes none
    return [
        server.Scenario(
            rf"{CONTROLLER_PROMPT}[\s\S]*{triage}:triage",
            _one(close, f"{triage} is a duplicate: closed.", flavor),
            name="controller-triage",
            regex=True,
        ),
        server.Scenario(
            CONTROLLER_PROMPT,
            [[server.text("Nothing needs my judgment.")]],
            name="controller",
            regex=True,
        ),
    ]


@dataclass
class RunResult:
    spec: str
    killed: list[str]  # lines of the kill log: "<point> <pid>"
    seconds: float
    problems: list[str] = field(default_factory=list)

    @property
    def survived(self) -> bool:
        return bool(self.killed) and not self.problems


class _Daemon:
    """`legion start --foreground` as its own process, its output appended to a log."""

    def __init__(self, swarm: Swarm, env: dict[str, str], log: Path) -> None:
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(LEGION_BIN), "start", "--foreground", "--tick", TICK],
                cwd=swarm.repo,
                env=env,
                stdout=out,
                stderr=out,
            )

    def stop(self) -> None:
        stop_process(self.proc)


class BranchWatch:
    """Samples the tips of the `legion/*` branches of `repos` (clones or bare repositories)
    every `every` seconds: every commit a worker ever pushed there."""

    def __init__(self, *repos: Path, every: float = 0.3) -> None:
        self.repos = repos
        self.every = every
        self.tips: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        for repo in self.repos:
            out = subprocess.run(
                ["git", "for-each-ref", "--format=%(objectname)", "refs/heads/legion/"],
                cwd=repo,
                capture_output=True,
                text=True,
                check=False,
            ).stdout
            self.tips.update(out.split())

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)

    def __enter__(self) -> BranchWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.sample()


def _wait(check: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.25)
    return False


@contextmanager
def campaign_swarm(root: Path, home: Path, flavor: str = DEFAULT_RUNTIME) -> Iterator[Swarm]:
    """A demo-like project (`make_repository`) wired to the CLI, tmux and the scripted model;
    every session on the `flavor` runtime (Claude Code, or Codex)."""
    repo = root / "repo"
    make_repository(repo, 0)
    with open_swarm(root, repo, home) as swarm, contextlib.ExitStack() as codex:
        swarm.legion("issue", "create", "Feature one", "--status", "In Progress")
        swarm.legion("issue", "create", "Feature one again", "--status", "Triage")
        script: Any = swarm.server.script
        if flavor == "codex":
            served = codex.enter_context(FakeResponsesServer())
            swarm.env |= codex_offline_home(root / "codex-home", served.base_url)
            swarm.env |= {"LEGION_CODEX_BIN": str(find_codex()), "LEGION_RUNTIME": "codex"}
            script = served.script
        script.scenarios.extend(controller_scenarios("LEG-2", flavor))
        script.scenarios.extend(issue_scenarios("LEG-1", flavor))
        yield swarm


def run_point(
    spec: str, root: Path, home: Path, *, timeout: float = FINISH_S, flavor: str = DEFAULT_RUNTIME
) -> RunResult:
    """Kill the swarm at `spec` (`point` or `point:N`), start it again without the fault, and
    check what it did. Problems are returned, not raised, so a campaign can count them."""
    return run_points((spec,), root, home, timeout=timeout, flavor=flavor)


def run_points(
    specs: Sequence[str],
    root: Path,
    home: Path,
    *,
    timeout: float = FINISH_S,
    flavor: str = DEFAULT_RUNTIME,
) -> RunResult:
    """Kill the swarm at each of `specs` in turn, in one run: a daemon armed with the first
    until it is killed there, then one armed with the next, and so on (each counts `point:N`
    from its own start), then one unarmed that must finish; the checks of `run_point`, once
    at the end. Each later point is reached by a swarm that recovered from the earlier kills."""
    started = time.monotonic()
    kill_log = root / "kills.log"
    root.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    name = " then ".join(specs)
    with campaign_swarm(root, home, flavor) as swarm:
        sids = project_sessions(swarm)
        daemon_log = root / "daemon-output.log"
        base = swarm.env | ENV
        workspace = swarm.workspace_root / "leg-1"

        def killed() -> list[str]:
            return kill_log.read_text().splitlines() if kill_log.exists() else []

        def finished() -> bool:
            done = issue_status(swarm, "LEG-1") == "Done"
            return done and issue_status(swarm, "LEG-2") == "Icebox" and not workspace.exists()

        with SessionWatch(sids) as watch, BranchWatch(swarm.repo) as branches:
            for spec in specs:
                before = len(killed())
                armed = base | {KILL_AT_VARIABLE: spec, KILL_LOG_VARIABLE: str(kill_log)}
                daemon = _Daemon(swarm, armed, daemon_log)
                try:
                    if not _wait(partial(_killed_since, killed, before, daemon), timeout):
                        problems.append(f"{spec}: the point was never reached")
                    code = daemon.proc.poll()  # None: a worker's process died there
                    if code is not None and code != -9:
                        problems.append(f"the daemon armed at {spec} exited with {code}")
                finally:
                    daemon.stop()  # started again with the next point, or unarmed
            last = _Daemon(swarm, base, daemon_log)
            try:
                if not _wait(finished, timeout):
                    problems.append(_unfinished(swarm, timeout, workspace))
            finally:
                last.stop()
        problems += _check(swarm, watch, branches)
    return RunResult(name, killed(), time.monotonic() - started, problems)


def _killed_since(killed: Callable[[], list[str]], before: int, daemon: _Daemon) -> bool:
    """Whether a kill was logged past the first `before`, or `daemon` exited."""
    return len(killed()) > before or daemon.proc.poll() is not None


SESSION_MODES = ("architect", "plan", "implement", "review", "finish")  # retro: implement's


def project_sessions(swarm: Swarm, issues: tuple[str, ...] = ("LEG-1", "LEG-2")) -> set[str]:
    """Every Claude session id the project can run: the controller's, and each issue's in every
    mode."""
    keys = ["controller", *(f"{issue}:{mode}" for issue in issues for mode in SESSION_MODES)]
    return {session_uuid(swarm, key) for key in keys}


# The prober's way (issue 24, item 4): the daemon SIGKILLed at moments nobody chose, here this
# many seconds after each (re)start, when it is starting the controller and the workers.
DAEMON_KILLS: tuple[float, ...] = (1.5, 2.5, 3.5)


def run_daemon_kills(
    root: Path,
    home: Path,
    kills: tuple[float, ...] = DAEMON_KILLS,
    *,
    timeout: float = FINISH_S,
    flavor: str = DEFAULT_RUNTIME,
) -> RunResult:
    """Start the daemon, SIGKILL it `len(kills)` times (each `kills[i]` seconds after it was
    started), starting it again each time, then let it finish; the same checks as
    `run_point`."""
    started = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    done: list[str] = []
    with campaign_swarm(root, home, flavor) as swarm:
        daemon_log = root / "daemon-output.log"
        env = swarm.env | ENV
        workspace = swarm.workspace_root / "leg-1"

        def finished() -> bool:
            closed = issue_status(swarm, "LEG-1") == "Done"
            return closed and issue_status(swarm, "LEG-2") == "Icebox" and not workspace.exists()

        with SessionWatch(project_sessions(swarm)) as watch, BranchWatch(swarm.repo) as branches:
            for delay in kills:
                daemon = _Daemon(swarm, env, daemon_log)
                try:
                    time.sleep(delay)
                    if daemon.proc.poll() is None:
                        daemon.proc.kill()
                        daemon.proc.wait(10)
                        done.append(f"daemon {daemon.proc.pid} after {delay:g} s")
                finally:
                    daemon.stop()
            last = _Daemon(swarm, env, daemon_log)
            try:
                if not _wait(finished, timeout):
                    problems.append(_unfinished(swarm, timeout, workspace))
            finally:
                last.stop()
        problems += _check(swarm, watch, branches)
    return RunResult("daemon killed", done, time.monotonic() - started, problems)


def _unfinished(swarm: Swarm, timeout: float, workspace: Path) -> str:
    """Where the swarm stood when it had not finished in time, and what it showed then (its
    panes, the model requests, the daemon's log, its last actions): for a stall that does not
    come back when run again."""
    states = {i: issue_status(swarm, i) for i in ("LEG-1", "LEG-2")}
    actions = json.dumps(swarm.json("log", "-n", "30"), indent=1)
    shown = [*failure_sections(swarm), ("last actions", actions)]
    return (
        f"not finished within {timeout:g} s: {states}, "
        f"workspace {'kept' if workspace.exists() else 'removed'}; "
        f"LEG-1: {swarm.json('issue', 'show', 'LEG-1')['labels']}\n"
        + "\n".join(f"--- {title}\n{text}" for title, text in shown)
    )


def _check(swarm: Swarm, watch: SessionWatch, branches: BranchWatch) -> list[str]:
    problems = []
    if watch.overlaps:
        problems.append(
            f"two processes ran one session at once: {watch.overlaps[:2]} {watch.details[:2]}"
        )
    issues = swarm.json("issue", "list")
    if sorted(i["identifier"] for i in issues) != ["LEG-1", "LEG-2"]:
        problems.append(f"issues lost or added: {[i['identifier'] for i in issues]}")
    return problems + work_problems(swarm.repo, ["LEG-1"], branches.tips)


def work_problems(
    repo: Path, merged: list[str], tips: set[str], clones: Sequence[Path] = ()
) -> list[str]:
    """What the issues `merged` left on the main branch of `repo` (a clone, or the fleet's
    shared bare remote), where each should have landed by one merge of its one PR: duplicate
    commits (a subject twice), a merge count other than one per issue, a commit ever at a
    `legion/` branch's tip (`tips`) whose changes are not on main (work lost: neither that
    commit nor, for each of its commits, one making the same change, `git cherry`, as when a
    host was lost before its worker's commit was sent and the worker redid it elsewhere; a
    tip made on a host is looked for in `clones`), an issue's feature or learnings missing
    (the scripted workers' files, `issue_scenarios`)."""
    problems = []
    subjects = git(repo, "log", "--format=%s", "main").splitlines()
    repeated = sorted({s for s in subjects if subjects.count(s) > 1})
    if repeated:
        problems.append(f"duplicate commits on main: {repeated}")
    merges = [s for s in subjects if s.startswith("Merge PR #")]
    merged_issues = sorted(s.split(": ", 1)[1].split(":")[0] for s in merges if ": " in s)
    if len(merges) != len(merged) or merged_issues != sorted(merged):
        problems.append(f"expected one merge of each of {merged} on main: {merges}")
    for tip in sorted(tips):
        contained = subprocess.run(
            ["git", "merge-base", "--is-ancestor", tip, "main"],
            cwd=repo,
            capture_output=True,
            check=False,
        )
        if contained.returncode != 0 and not _redone(repo, tip, clones):
            problems.append(f"work lost: commit {tip[:10]} of a legion/ branch is not on main")
    for issue in merged:
        n, low = issue.split("-")[1], issue.lower()
        for path in (f"src/feature_{n}.py", f"docs/solutions/{low}.md"):
            present = subprocess.run(
                ["git", "cat-file", "-e", f"main:{path}"],
                cwd=repo,
                capture_output=True,
                check=False,
            )
            if present.returncode != 0:
                problems.append(f"{path} is not on main")
    return problems


def _redone(repo: Path, tip: str, clones: Sequence[Path]) -> bool:
    """Whether every commit of `tip` not on `repo`'s main made a change main has (the same
    patch, `git cherry`), looked at in whichever of `repo` and `clones` holds `tip`."""
    for place in (repo, *clones):
        held = subprocess.run(["git", "cat-file", "-e", f"{tip}^{{commit}}"], cwd=place,
                              capture_output=True, check=False)  # fmt: skip
        if held.returncode != 0:
            continue
        if place != repo:
            git(place, "fetch", "-q", str(repo), "+main:refs/campaign/main")
        upstream = "main" if place == repo else "refs/campaign/main"
        cherry = git(place, "cherry", upstream, tip).split()
        return "+" not in cherry[0::2]
    return False


def environment_ready() -> None:
    """The variables open_swarm reads from the process (pytest's isolated_env sets them)."""
    for name in ("XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        if name not in os.environ:
            raise RuntimeError(f"{name} must be set")
