"""Two hosts of one project on a real PostgreSQL store, simulated on this machine: each its own
HOME, state folder, clone of the repository, tmux server, agent CLI config and model server
(Claude Code's, or Codex's where the subject is the fleet and not the CLI: `codex_hosts`).
One daemon leads (it alone runs the controller); when every process of the leader's host is
killed, the other leads within the lease's time, under a new epoch, and starts the controller;
a drained host gives the lead up. An issue outlives its host (its checkpoint on a shared bare
remote); a leader cut from the store, or whose daemon dies with its host alive, stops its
sessions before the other host starts them; a message said on one host reaches an agent on
the other."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from legion.demo.swarm_script import controller_scenarios, swarm_script
from tests.fakes.model_server import Scenario, ask_user_question, bash, text, tool_result_text
from tests.fakes.responses_server import FakeResponsesServer
from tests.fakes.responses_server import bash as codex_bash
from tests.fakes.responses_server import text as codex_text
from tests.support.cli import git, run_legion
from tests.support.codex_env import find_codex
from tests.support.fleet import (
    SessionSampler,
    WindowSampler,
    another_host,
    files_on_main,
    hosts_of,
    kill_host,
    leads,
    nothing_unscripted,
    on_codex,
    on_host,
    sessions_of,
    sessions_on_host,
)
from tests.support.swarm import (
    Daemon,
    Swarm,
    agent_of,
    issue_status,
    runs_until,
    session_uuid,
)
from tests.support.tcp_link import CuttableLink
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

HOST_TIMEOUT = 4.0


@pytest.fixture
def project(git_repo: Path, postgres_url: str) -> Path:
    """A project made with its store in PostgreSQL, its config committed (every host's clone
    has the same project id)."""
    made = run_legion("init", cwd=git_repo, env={"LEGION_STORE": postgres_url})
    assert made.returncode == 0, made.stderr
    git(git_repo, "add", ".legion")
    git(git_repo, "commit", "--quiet", "-m", "Legion")
    return git_repo


@pytest.fixture
def alpha(swarm: Swarm, tmp_path: Path, isolated_env: Path, postgres_url: str) -> Iterator[Swarm]:
    yield on_host(swarm, "alpha", isolated_env, postgres_url, HOST_TIMEOUT)


@pytest.fixture
def beta(project: Path, tmp_path: Path, postgres_url: str, alpha: Swarm) -> Iterator[Swarm]:
    with another_host("beta", project, tmp_path, postgres_url, HOST_TIMEOUT) as made:
        yield made


@pytest.fixture
def gamma(
    project: Path, tmp_path: Path, postgres_url: str, alpha: Swarm, beta: Swarm
) -> Iterator[Swarm]:
    with another_host("gamma", project, tmp_path, postgres_url, HOST_TIMEOUT) as made:
        yield made


@pytest.fixture
def codex_hosts(
    alpha: Swarm, beta: Swarm, tmp_path: Path
) -> Iterator[dict[str, FakeResponsesServer]]:
    """Alpha's and beta's sessions on Codex, each host's controller scripted (for a test whose
    subject is the fleet, not the agent CLI); nothing unscripted asked of either at the end."""
    with contextlib.ExitStack() as running:
        codex = on_codex({"alpha": alpha, "beta": beta}, tmp_path, running)
        for served in codex.values():
            served.script.scenarios.extend(controller_scenarios("auto", "codex"))
        yield codex
        nothing_unscripted(codex)


def _controller_windows(swarm: Swarm) -> list[str]:
    listed = swarm.tmux("list-windows", "-a", "-F", "#{window_name}\t#{pane_dead}")
    return [line for line in listed.splitlines() if line.startswith("main\t0")]


def test_one_leads_and_the_other_takes_over_when_its_host_dies(
    alpha: Swarm, beta: Swarm, codex_hosts: dict[str, FakeResponsesServer]
) -> None:
    """Every session on Codex: the subject is the lead, not the agent CLI."""
    first = Daemon(alpha).start()
    try:
        wait_until("alpha leads", lambda: leads(alpha, "alpha"))
        with Daemon(beta) as second:
            wait_until("beta joins", lambda: "beta" in hosts_of(beta))
            second.ticks(2)
            hosts = hosts_of(beta)
            assert hosts["alpha"]["leader"] and hosts["alpha"]["epoch"] == 1
            assert not hosts["beta"]["leader"] and hosts["beta"]["state"] == "up"
            wait_until("alpha's controller", lambda: _controller_windows(alpha))
            assert _controller_windows(beta) == []  # a follower runs no controller
            # The controller's session id is deterministic: uuid5(project id, "controller"),
            # the same on every host (one project id, committed in its config).
            controller = session_uuid(alpha, "controller")
            assert session_uuid(beta, "controller") == controller
            on_alpha = wait_until(
                "alpha's controller process", lambda: sessions_on_host("alpha", alpha.repo.parent)
            )
            assert on_alpha == {controller: {controller}}, on_alpha
            status = run_legion("status", cwd=beta.repo, env=beta.env).stdout
            assert "hosts:      alpha (up, leads" in status and "beta (up" in status

            # Every process of alpha's host dies: its daemon, its tmux server and sessions.
            kill_host(alpha, first)
            wait_until(
                "beta leads",
                lambda: hosts_of(beta)["beta"]["leader"] is True,
                timeout=3 * HOST_TIMEOUT + 10,
            )
            assert hosts_of(beta)["beta"]["epoch"] == 2
            wait_until("beta's controller", lambda: _controller_windows(beta), timeout=60)
            # The new leader's controller goes on in the same session, not a new one.
            on_beta = wait_until(
                "beta's controller process", lambda: sessions_on_host("beta", beta.repo.parent)
            )
            assert on_beta == {controller: {controller}}, on_beta
            wait_until(
                "alpha lost",
                lambda: hosts_of(beta)["alpha"]["state"] == "lost",
                timeout=2 * HOST_TIMEOUT + 10,
            )
            led = [
                e["detail"] for e in beta.json("log", "-n", "200") if e["action"] == "fleet_lead"
            ]
            assert led == ["host alpha leads (epoch 1)", "host beta leads (epoch 2)"], led

            # Drained, beta gives the lead up and stops its controller; taken back, leads.
            drained = run_legion("host", "drain", "beta", cwd=beta.repo, env=beta.env)
            assert drained.returncode == 0, drained.stderr
            wait_until(
                "beta gives up the lead",
                lambda: not hosts_of(beta)["beta"]["leader"],
                timeout=2 * HOST_TIMEOUT + 10,
            )
            wait_until("beta's controller stops", lambda: not _controller_windows(beta))
            run_legion("host", "drain", "beta", "--undo", cwd=beta.repo, env=beta.env)
            wait_until(
                "beta leads again",
                lambda: hosts_of(beta)["beta"]["epoch"] == 3,
                timeout=2 * HOST_TIMEOUT + 10,
            )
    finally:
        if first.proc is not None and first.proc.poll() is None:
            first.stop()
    unknown = run_legion("host", "drain", "gamma", cwd=beta.repo, env=beta.env)
    assert unknown.returncode == 2 and "no host 'gamma'" in unknown.stderr


@pytest.fixture
def shared_remote(project: Path, tmp_path: Path) -> Path:
    """A bare repository both hosts reach as `origin`: where checkpoints go."""
    remote = tmp_path / "shared.git"
    git(tmp_path, "init", "--quiet", "--bare", str(remote))
    git(project, "remote", "add", "origin", str(remote))
    git(project, "push", "--quiet", "origin", "main")
    return remote


def test_an_issue_outlives_its_host(shared_remote: Path, alpha: Swarm, beta: Swarm) -> None:
    """An implementer works on alpha (a file written, not committed) when every process of
    alpha is killed and its folders deleted: beta leads, restores the workspace and the session
    from the checkpoint on the shared remote, and the implementer goes on in the same session
    id, in the same conversation, with the file there. At no sample (every 0.3 s) do two live
    processes run that session."""
    for swarm in (alpha, beta):
        swarm.env["LEGION_CHECKPOINT_EVERY"] = "1"
    release = alpha.workspace_root / "leg-1" / ".release"  # never made: alpha dies mid-turn
    alpha.server.add_scenario(
        "plan mode for LEG-1",
        [
            [
                bash(
                    "legion issue comment LEG-1 --body '## Plan' && legion issue label LEG-1 "
                    "--add worker-done --remove worker-active"
                )
            ],
            [text("Planned.")],
        ],
    )
    alpha.server.add_scenario(
        "implement mode for LEG-1",
        [
            [bash("mkdir -p src && echo kept > src/kept.txt")],
            [bash(runs_until(release))],
            [text("never reached")],
        ],
    )
    beta.server.add_scenario(
        "implement mode for LEG-1",
        [
            [
                bash(
                    "test -f src/kept.txt && git add -A && git commit -qm 'LEG-1: kept' "
                    "&& legion pr create --issue LEG-1 --branch legion/leg-1 "
                    "&& legion issue label LEG-1 --add worker-done --remove worker-active"
                )
            ],
            [text("Implemented on beta.")],
        ],
    )
    alpha.legion("issue", "create", "Keep a file")
    project_id = alpha.json("config")["settings"]["project_id"]["value"]
    implementer = str(uuid.uuid5(uuid.UUID(project_id), "LEG-1:implement"))
    sampled = SessionSampler([implementer]).start()
    first = Daemon(alpha).start()
    try:
        wait_until("alpha leads", lambda: leads(alpha, "alpha"))
        with Daemon(beta):

            def checkpointed() -> bool:
                shown = subprocess.run(
                    [
                        "git",
                        "--git-dir",
                        str(shared_remote),
                        "show",
                        "refs/legion/checkpoints/LEG-1:workspace/src/kept.txt",
                    ],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                return shown.returncode == 0 and shown.stdout == "kept\n"

            wait_until("the checkpoint on the shared remote", checkpointed, timeout=120)
            assert sessions_of(implementer), "the implementer runs on alpha"
            # Every process of alpha's host dies, and its folders go.
            kill_host(alpha, first)
            alpha.close_reader()
            for folder in (alpha.workspace_root, alpha.repo, Path(alpha.env["XDG_STATE_HOME"])):
                shutil.rmtree(folder)
            wait_until(
                "LEG-1 implemented on beta",
                lambda: issue_status(beta, "LEG-1") in ("Needs Review", "Retro", "Done"),
                timeout=120,
            )
    finally:
        sampled.stop()
        if first.proc is not None and first.proc.poll() is None:
            first.stop()
    assert sampled.most == {implementer: 1}, sampled.most
    # The same session: beta's first implement turn carried alpha's conversation.
    [resumed, *_] = beta.server.requests_for_scenario("implement mode for LEG-1")
    assert "echo kept > src/kept.txt" in json.dumps(resumed.messages)
    transcripts = beta.transcripts(implementer)
    assert len(transcripts) == 1
    # The file the checkpoint held is in the PR's branch, on beta.
    assert git(beta.repo, "show", "legion/leg-1:src/kept.txt") == "kept\n"
    moved = [c["body"] for c in beta.json("issue", "show", "LEG-1")["comments"]]
    assert any("moved LEG-1 from host alpha to beta" in body for body in moved), moved


def test_a_message_said_on_one_host_reaches_an_agent_on_another(
    alpha: Swarm, beta: Swarm, codex_hosts: dict[str, FakeResponsesServer]
) -> None:
    """The bus is in the store: `legion say` on beta, a host with no daemon, reaches a worker
    that runs on alpha, whose daemon the post's NOTIFY wakes (its ticks are 60 s apart, so
    nothing else would deliver it within the test's wait). On Codex: the subject is the bus."""
    served = codex_hosts["alpha"]
    with Daemon(alpha, tick=60, mode="manual") as hosting:
        wait_until("alpha leads", lambda: leads(alpha, "alpha"))
        alpha.legion("issue", "create", "Talkative")
        served.add_scenario("plan mode for LEG-1", [[codex_text("Planned.")]], name="plan")
        alpha.legion("dispatch", "LEG-1", "plan")
        worker = wait_until(
            "the worker idle on alpha",
            lambda: (w := alpha.worker("LEG-1")) and w["state"] == "idle" and w,
        )
        hosting.wait_between_ticks()
        agent = agent_of(beta, worker["session_id"])  # beta reads the same bus
        served.add_scenario("zebra-cross", [[codex_text("Heard across hosts.")]], name="cross")
        said = beta.json("say", f"@{agent['address']} zebra-cross: hello from beta")
        assert said["delivery"][agent["address"]] == "daemon", said
        wait_until(
            "the message reached alpha's worker",
            lambda: served.requests_for_scenario("cross"),
            timeout=15,
        )
    assert beta.tmux("list-windows", "-a") == ""  # beta ran no session


def test_a_partitioned_leader_stops_its_sessions_and_the_other_host_takes_them_once(
    alpha: Swarm, beta: Swarm, postgres_url: str, codex_hosts: dict[str, FakeResponsesServer]
) -> None:
    """Alpha leads, its link to the store cut for longer than `host_timeout`, then restored:
    alpha closes its controller before its lease can pass, beta takes the lease (epoch 2) and
    starts the controller under the same session id, and alpha, back, follows. At no sample
    (every 0.2 s, from /proc) do two live processes run the controller's session. Every
    session on Codex: the subject is the lease."""
    port = postgres_url.rsplit(":", 1)[1].split("/", 1)[0]
    link = CuttableLink(int(port))
    alpha.env["LEGION_STORE"] = postgres_url.replace(f":{port}/", f":{link.port}/")
    controller = session_uuid(beta, "controller")
    sampled = SessionSampler([controller]).start()
    try:
        with Daemon(alpha), Daemon(beta):
            wait_until("alpha leads", lambda: leads(beta, "alpha"))
            wait_until("beta joins", lambda: "beta" in hosts_of(beta))
            wait_until("alpha's controller", lambda: sessions_of(controller), timeout=60)
            assert _controller_windows(alpha) and not _controller_windows(beta)
            link.cut()
            wait_until("alpha closes its controller", lambda: not _controller_windows(alpha))
            wait_until(
                "beta leads",
                lambda: hosts_of(beta)["beta"]["leader"] is True,
                timeout=3 * HOST_TIMEOUT + 10,
            )
            assert hosts_of(beta)["beta"]["epoch"] == 2
            wait_until("beta's controller", lambda: _controller_windows(beta), timeout=60)
            # The new leader's controller goes on in the same session, not a new one.
            on_beta = wait_until(
                "beta's controller process", lambda: sessions_on_host("beta", beta.repo.parent)
            )
            assert on_beta == {controller: {controller}}, on_beta
            link.restore()
            wait_until(
                "alpha back, following",
                lambda: (
                    hosts_of(beta)["alpha"]["state"] == "up"
                    and not hosts_of(beta)["alpha"]["leader"]
                ),
                timeout=3 * HOST_TIMEOUT + 10,
            )
            time.sleep(HOST_TIMEOUT)  # a while back on the link: it takes nothing again
            assert hosts_of(beta)["beta"]["leader"] and not _controller_windows(alpha)
            led = [
                e["detail"] for e in beta.json("log", "-n", "300") if e["action"] == "fleet_lead"
            ]
            assert led == ["host alpha leads (epoch 1)", "host beta leads (epoch 2)"], led
    finally:
        sampled.stop()
        link.close()
    assert sampled.most == {controller: 1}, sampled.most


def test_a_leader_killed_mid_pass_is_fenced_and_its_issues_go_on_once(
    alpha: Swarm, beta: Swarm, codex_hosts: dict[str, FakeResponsesServer]
) -> None:
    """Alpha's daemon, the leader, is killed mid-pass (as it starts LEG-2's implementer, while
    LEG-1's works), and its host lives on, its tmux and sessions with it: its fence closes them
    when the lease runs out, beta leads, and starts each implementer again under its session
    id; both issues go on to review. At no sample (every 0.2 s) do two live processes run
    either session. Every session on Codex: the subject is the lease and its fence."""
    release = alpha.workspace_root / "leg-1" / ".release"  # never made
    codex_hosts["alpha"].add_scenario(
        "implement mode for LEG-1",
        [[codex_bash(runs_until(release))], [codex_text("never reached")]],
    )
    for issue in ("LEG-1", "LEG-2"):
        codex_hosts["beta"].add_scenario(
            f"implement mode for {issue}",
            [
                [
                    codex_bash(
                        "echo done > done.txt && git add -A && git commit -qm 'done' "
                        f"&& legion pr create --issue {issue} --branch legion/{issue.lower()} "
                        f"&& legion issue label {issue} --add worker-done --remove worker-active"
                    )
                ],
                [codex_text(f"Implemented {issue} on beta.")],
            ],
        )
    sessions = [session_uuid(beta, f"{issue}:implement") for issue in ("LEG-1", "LEG-2")]
    sampled = SessionSampler(sessions).start()
    # Killed by itself at its second worker start: LEG-2's window, mid-pass.
    armed = Daemon(alpha, extra_env={"LEGION_TEST_KILL_AT": "after_window_started:2"})
    try:
        armed.start()
        beta.legion("issue", "create", "First", "--status", "In Progress")
        wait_until("LEG-1's implementer at work on alpha", lambda: sessions_of(sessions[0]))
        alphas = codex_hosts["alpha"]
        wait_until("its turn", lambda: alphas.requests_for_scenario("implement mode for LEG-1"))
        beta.legion("issue", "create", "Second", "--status", "In Progress")
        assert armed.proc is not None
        armed.proc.wait(60)
        assert sessions_of(sessions[0]), "alpha's host lives on: its implementer too"
        with Daemon(beta):
            wait_until(
                "alpha's fence closes its sessions",
                lambda: not sessions_of(sessions[0]) and not _controller_windows(alpha),
                timeout=2 * HOST_TIMEOUT + 10,
            )
            for issue in ("LEG-1", "LEG-2"):
                wait_until(
                    f"{issue} implemented on beta",
                    lambda issue=issue: issue_status(beta, issue) in ("Needs Review", "Done"),
                    timeout=120,
                )
            assert hosts_of(beta)["beta"]["epoch"] == 2
    finally:
        sampled.stop()
        armed.stop()
    assert set(sampled.most.values()) == {1}, sampled.most


def _worker_windows(swarm: Swarm) -> set[str]:
    """The names of the worker windows on `swarm`'s host (its tmux server), live or dead."""
    listed = swarm.tmux("list-windows", "-a", "-F", "#{window_name}")
    return {name for name in listed.split() if name not in ("main", "legion")}


def stood(*hosts: Swarm) -> str:
    """Where LEG-1 stood, as each host saw it: for a fleet test that did not finish in time."""
    said = []
    for host in hosts:
        shown = host.json("issue", "show", "LEG-1")
        workers = [(w["host"], w["mode"], w["state"]) for w in host.json("workers")]
        actions = [f"{e['at']} {e['action']}: {e['detail']}" for e in host.json("log", "-n", "12")]
        said.append(
            f"{host.repo}: {shown['status']} {shown['labels']} workers={workers}\n  "
            + "\n  ".join(actions)
        )
    return "\n".join(said)


@pytest.mark.timeout(400)  # alone it takes a minute; beside the suite's other swarms, four
def test_workers_run_on_another_host_than_the_leaders(
    shared_remote: Path, alpha: Swarm, beta: Swarm, tmp_path: Path
) -> None:
    """The leader's host has room for its controller only (`max_sessions` 1): every worker of
    LEG-1's whole cycle (plan, implement, review, the implementer resumed with the changes
    asked, retro, finish) is placed on beta, started there by beta's daemon when alpha asks,
    seen from alpha as beta reports it, and its window closed by beta when alpha retires it.
    The PR is merged through the shared remote, and beta sweeps the Done issue's workspace.
    No session ever runs twice. Every session on Codex: the subject is where they run."""
    alpha.env["LEGION_MAX_SESSIONS"] = "1"
    with contextlib.ExitStack() as running:
        codex = on_codex({"alpha": alpha, "beta": beta}, tmp_path, running)
        for served in codex.values():  # each host's model answers whatever runs there
            served.script.scenarios.extend(swarm_script(["LEG-1"], flavor="codex").scenarios)
        _run_on_beta_alone(shared_remote, alpha, beta)
        nothing_unscripted(codex)


def _run_on_beta_alone(shared_remote: Path, alpha: Swarm, beta: Swarm) -> None:
    project_id = alpha.json("config")["settings"]["project_id"]["value"]
    modes = ("plan", "implement", "review", "finish")
    sessions = [str(uuid.uuid5(uuid.UUID(project_id), f"LEG-1:{mode}")) for mode in modes]
    sampled = SessionSampler(sessions).start()
    seen_on_alpha: set[tuple[str, str]] = set()  # (host, state) of LEG-1's worker, from alpha
    alpha_windows: set[str] = set()
    beta_windows: set[str] = set()

    def done() -> bool:
        for worker in alpha.json("workers"):
            seen_on_alpha.add((worker["host"], worker["state"]))
        alpha_windows.update(_worker_windows(alpha))
        beta_windows.update(_worker_windows(beta))
        return issue_status(alpha, "LEG-1") == "Done"

    alpha.legion("issue", "create", "Feature one", "--body", "Add feature one.")
    try:
        with Daemon(alpha):
            wait_until("alpha leads", lambda: leads(alpha, "alpha"))
            with Daemon(beta):
                wait_until("LEG-1 Done", done, timeout=300, explain=lambda: stood(alpha, beta))
                wait_until("beta closes the last window", lambda: not _worker_windows(beta))
                workspace = beta.workspace_root / "leg-1"
                wait_until("beta sweeps LEG-1's workspace", lambda: not workspace.exists())
    finally:
        sampled.stop()
    assert alpha_windows == set(), alpha_windows  # alpha ran its controller only
    assert {"leg-1-plan", "leg-1-implement", "leg-1-review", "leg-1-finish"} <= beta_windows
    assert ("beta", "running") in seen_on_alpha, seen_on_alpha
    assert all(host == "beta" for host, _ in seen_on_alpha), seen_on_alpha
    assert max(sampled.most.values()) == 1, sampled.most
    started = [e["detail"] for e in alpha.json("log", "-n", "500") if e["action"] == "host_start"]
    assert len(started) >= 6 and all(": started leg-1-" in d for d in started), started
    pr = alpha.json("issue", "show", "LEG-1")["pr"]
    assert pr["state"] == "merged"
    assert [r["outcome"] for r in pr["reviews"]] == ["changes_requested", "approved"]
    # Merged through the shared remote: the feature and the retro's learnings are on its main.
    shown = files_on_main(shared_remote)
    assert {"src/feature_1.py", "docs/solutions/leg-1.md"} <= shown, shown
    assert alpha.json("workers") == []


def planned_with_the_answer(swarm: Swarm) -> bool:
    """The planner's last turn done: its plan posted, and `worker-active` off."""
    shown = swarm.json("issue", "show", "LEG-1")
    said = [c["body"] for c in shown["comments"]]
    return "## Plan: say Hello" in said and "worker-active" not in shown["labels"]


def test_a_humans_answer_is_typed_into_a_worker_on_another_host(alpha: Swarm, beta: Swarm) -> None:
    """A planner placed on beta asks a human and ends its turn, still running. The answer
    (`legion feedback`, on alpha) is relayed by alpha, the leader, into that live session:
    alpha asks beta, whose daemon types it in. The planner goes on in the same session."""
    alpha.env["LEGION_MAX_SESSIONS"] = "1"
    alpha.server.script.scenarios.extend(controller_scenarios("auto"))
    beta.server.add_scenario(
        "plan mode for LEG-1",
        [
            [
                bash(
                    "legion issue comment LEG-1 --body 'Which greeting?' "
                    "&& legion issue label LEG-1 --add user-input-needed"
                )
            ],
            [text("Waiting for a human's answer.")],
        ],
    )
    answered = Scenario(
        # The answer comes fenced, named: who wrote it, as the tracker says.
        r"A human answered your question:\s*<<<legion-quoted \w+: comment by [^>]+>>>\s*Hello",
        [
            [
                bash(
                    "legion issue comment LEG-1 --body '## Plan: say Hello' "
                    "&& legion issue label LEG-1 --add user-input-needed --remove worker-active"
                )
            ],
            [text("Planned with the answer.")],
        ],
        name="answered",
        regex=True,
    )
    beta.server.script.scenarios.insert(0, answered)
    alpha.legion("issue", "create", "Greeter")
    with Daemon(alpha):
        wait_until("alpha leads", lambda: leads(alpha, "alpha"))
        with Daemon(beta):
            wait_until(
                "the planner on beta asks",
                lambda: "user-input-needed" in alpha.json("issue", "show", "LEG-1")["labels"],
                timeout=90,
            )
            [worker] = alpha.json("workers")
            assert worker["host"] == "beta"
            wait_until(
                "its turn ended", lambda: alpha.json("workers")[0]["state"] == "idle", timeout=30
            )
            alpha.legion("feedback", "LEG-1", "Hello")
            beta.server.wait_for_turn("answered", 0, timeout=60)
            wait_until("LEG-1 planned", lambda: planned_with_the_answer(alpha))
    typed = [e["detail"] for e in alpha.json("log", "-n", "200") if e["action"] == "host_type"]
    assert typed and "typed into leg-1-plan" in typed[0], typed
    # One session: the answer went into the planner's conversation on beta, which asked.
    [request] = beta.server.requests_for_scenario("answered")[:1]
    assert "Which greeting?" in json.dumps(request.messages)
    assert _worker_windows(alpha) == set()


def test_a_message_to_a_worker_on_another_host_is_delivered_by_that_host(
    alpha: Swarm, beta: Swarm, codex_hosts: dict[str, FakeResponsesServer]
) -> None:
    """Each host delivers to its own sessions: a worker placed on beta, idle, gets a message
    said on alpha (the leader), typed in by beta's daemon; alpha, which watches only its own
    sessions, leaves it to beta. On Codex: the subject is who delivers."""
    alpha.env["LEGION_MAX_SESSIONS"] = "1"
    served = codex_hosts["beta"]
    served.add_scenario("plan mode for LEG-1", [[codex_text("Thinking about the plan.")]])
    served.add_scenario(
        "zebra-cross", [[codex_text("Heard from the leader's host.")]], name="cross"
    )
    alpha.legion("issue", "create", "Talkative")
    with Daemon(alpha):
        wait_until("alpha leads", lambda: leads(alpha, "alpha"))
        with Daemon(beta, tick=60):
            worker = wait_until(
                "the worker idle on beta",
                lambda: (w := alpha.worker("LEG-1")) and w["state"] == "idle" and w,
                timeout=90,
            )
            assert worker["host"] == "beta"
            agent = agent_of(alpha, worker["session_id"])
            said = alpha.json("say", f"@{agent['address']} zebra-cross: hello from alpha")
            assert said["delivery"][agent["address"]] == "daemon", said
            wait_until(
                "the message reached beta's worker",
                lambda: served.requests_for_scenario("cross"),
                timeout=30,
            )
    delivered = [
        e["detail"] for e in alpha.json("log", "-n", "200") if e["action"] == "deliver_messages"
    ]
    assert delivered, "no delivery logged"
    assert _worker_windows(alpha) == set()


def test_a_question_of_a_worker_on_another_host_is_answered_from_the_leaders(
    alpha: Swarm, beta: Swarm
) -> None:
    """A planner placed on beta waits on a question screen: alpha shows the question (beta's
    report carries it), and `legion answer` on alpha passes the answer to beta, whose daemon
    types it in; the command returns once beta says it was taken."""
    alpha.env["LEGION_MAX_SESSIONS"] = "1"
    alpha.server.script.scenarios.extend(controller_scenarios("auto"))
    beta.server.add_scenario(
        "plan mode for LEG-1",
        [[ask_user_question("Which fruit?", ["Apple", "Banana"])], [text("Banana it is.")]],
        name="fruit",
    )
    alpha.legion("issue", "create", "Pick a fruit")
    with Daemon(alpha):
        wait_until("alpha leads", lambda: leads(alpha, "alpha"))
        with Daemon(beta):
            blocked = wait_until(
                "the planner on beta blocked",
                lambda: (w := alpha.worker("LEG-1")) and w["state"] == "blocked" and w,
                timeout=90,
            )
            assert blocked["host"] == "beta"
            assert blocked["question"]["text"] == "Which fruit?"
            assert blocked["question"]["items"][0]["options"] == ["Apple", "Banana"]
            alpha.legion("answer", "LEG-1", "banana")
            request = beta.server.wait_for_turn("fruit", 1, timeout=30)
            assert any("Banana" in tool_result_text(block) for block in request.tool_results())
    answered = [e["detail"] for e in alpha.json("log", "-n", "200") if e["action"] == "host_answer"]
    assert answered and "answered in leg-1-plan" in answered[0], answered
    assert _worker_windows(alpha) == set()


def test_a_question_of_the_leaders_worker_is_answered_from_another_host(
    alpha: Swarm, beta: Swarm
) -> None:
    """The other way round: a planner on alpha, the leader's host, waits on a question screen;
    `legion answer` on beta (no daemon there) passes the answer to alpha, whose daemon types
    it in."""
    alpha.server.script.scenarios.extend(controller_scenarios("auto"))
    alpha.server.add_scenario(
        "plan mode for LEG-1",
        [[ask_user_question("Which fruit?", ["Apple", "Banana"])], [text("Apple it is.")]],
        name="fruit",
    )
    alpha.legion("issue", "create", "Pick a fruit")
    with Daemon(alpha):
        wait_until("alpha leads", lambda: leads(alpha, "alpha"))
        blocked = wait_until(
            "the planner on alpha blocked, as beta sees it",
            lambda: (w := beta.worker("LEG-1")) and w["state"] == "blocked" and w,
            timeout=90,
        )
        assert blocked["host"] == "alpha" and blocked["question"]["text"] == "Which fruit?"
        beta.legion("answer", "LEG-1", "apple")
        request = alpha.server.wait_for_turn("fruit", 1, timeout=30)
        assert any("Apple" in tool_result_text(block) for block in request.tool_results())
    assert beta.tmux("list-windows", "-a") == ""  # beta ran no session


DEMO_ISSUES = ["LEG-1", "LEG-2", "LEG-3"]
# The roles the three-host demo runs on Codex: the planners ask (AskUserQuestion) and the
# controller's Oracle answers, on Claude Code; the rest, whose subject here is only where they
# run, on Codex, a tenth of a Claude Code session's CPU (a retro follows its implementer).
DEMO_ON_CODEX = "implement=codex,review=codex,finish=codex"


def _demo_script(oracle: dict[str, str], flavor: str) -> list[object]:
    """`legion demo`'s script for three issues, every mode of each, for the `flavor` runtime's
    server: whose planners of LEG-2 and LEG-3 ask a question the controller's Oracle answers;
    each implementer also tells the controller (`@legion`) which host it ran on."""
    asks = tuple(oracle) if flavor == "claude-code" else ()
    script = swarm_script(DEMO_ISSUES, ask=asks, oracle=oracle, flavor=flavor)
    note = ' && legion say "@legion zebra-note: {issue} implemented on $LEGION_HOST"'
    for scenario in script.scenarios:
        if scenario.name.endswith(":implement"):
            issue = scenario.name.split(":")[0]
            [call] = scenario.turns[0]
            if flavor == "claude-code":
                call.input["command"] += note.format(issue=issue)
            else:
                call.arguments["cmd"] += note.format(issue=issue)
    return list(script.scenarios)


@pytest.mark.timeout(420)
def test_the_demo_spread_over_three_hosts(
    shared_remote: Path, alpha: Swarm, beta: Swarm, gamma: Swarm, tmp_path: Path
) -> None:
    """The demo's three issues, every mode of each, on three hosts with room for three
    workers in all: alpha leads and runs its controller and one worker (`max_sessions` 2),
    beta and gamma one worker each. Every issue is Done and merged through the shared remote;
    no host ever runs more sessions than its capacity, each runs workers, and no session runs
    twice. Messages cross hosts: the planners on beta and gamma ask questions the controller's
    Oracle, on alpha, answers (typed in by their hosts), and the implementers' `legion say
    @legion` reaches the controller on alpha. The planners and the controller run Claude
    Code, the other roles Codex (`DEMO_ON_CODEX`)."""
    hosts = {"alpha": alpha, "beta": beta, "gamma": gamma}
    alpha.env["LEGION_MAX_SESSIONS"] = "2"
    for swarm in (beta, gamma):
        swarm.env["LEGION_MAX_SESSIONS"] = "1"
    oracle = {"LEG-2": "Hello", "LEG-3": "Hi"}
    with contextlib.ExitStack() as running:
        codex = on_codex(hosts, tmp_path, running, DEMO_ON_CODEX)
        for name, swarm in hosts.items():  # each host's models answer whatever runs there
            swarm.server.script.scenarios.extend(_demo_script(oracle, "claude-code"))  # type: ignore[arg-type]
            codex[name].script.scenarios.extend(_demo_script(oracle, "codex"))  # type: ignore[arg-type]
        _run_the_demo_on(hosts, shared_remote)
        nothing_unscripted(codex)
    assert all(served.message_requests() for served in codex.values())


def _run_the_demo_on(hosts: dict[str, Swarm], shared_remote: Path) -> None:
    alpha = hosts["alpha"]
    # The controller hears the implementers' notes, from whichever host.
    alpha.server.script.scenarios.insert(
        0, Scenario("zebra-note:", [[text("Noted.")]], name="note")
    )
    project_id = alpha.json("config")["settings"]["project_id"]["value"]
    modes = ("plan", "implement", "review", "finish")
    sessions = [
        str(uuid.uuid5(uuid.UUID(project_id), f"{issue}:{mode}"))
        for issue in DEMO_ISSUES
        for mode in modes
    ]
    for n in (1, 2, 3):
        alpha.legion("issue", "create", f"Feature {n}", "--body", f"Add feature {n}.")
    sampled = SessionSampler(sessions).start()
    windows = WindowSampler(hosts).start()
    try:
        with Daemon(alpha):
            wait_until("alpha leads", lambda: leads(alpha, "alpha"))
            with Daemon(hosts["beta"]), Daemon(hosts["gamma"]):
                wait_until(
                    "every issue Done",
                    lambda: all(issue_status(alpha, i) == "Done" for i in DEMO_ISSUES),
                    timeout=360,
                )
    finally:
        sampled.stop()
        windows.stop()
    assert windows.most == {"alpha": 1, "beta": 1, "gamma": 1}, windows.most  # and each ran some
    assert max(sampled.most.values()) == 1, sampled.most
    assert set(sampled.most.values()) == {1}, sampled.most  # every session was seen running
    for issue in DEMO_ISSUES:
        pr = alpha.json("issue", "show", issue)["pr"]
        assert pr["state"] == "merged", (issue, pr)
    shown = files_on_main(shared_remote)
    for n in (1, 2, 3):
        assert {f"src/feature_{n}.py", f"docs/solutions/leg-{n}.md"} <= shown, shown
    # The questions asked on beta and gamma were answered by alpha's controller.
    answered = [e for e in alpha.json("log", "-n", "1000") if e["action"] == "host_answer"]
    assert answered, "no answer crossed hosts"
    # Each in a wake of its own, or both in one (asked close together).
    oracle_woken = [
        name
        for name in ("LEG-2:oracle", "LEG-3:oracle", "LEG-2:LEG-3:oracle")
        if alpha.server.requests_for_scenario(name)
    ]
    assert oracle_woken in (["LEG-2:oracle", "LEG-3:oracle"], ["LEG-2:LEG-3:oracle"]), oracle_woken
    notes = json.dumps([r.messages for r in alpha.server.requests_for_scenario("note")])
    implemented_on = {
        name
        for name, swarm in hosts.items()
        if any(w.startswith("leg-") and w.endswith("-implement") for w in windows.seen[name])
    }
    for name in implemented_on - {"alpha"}:
        assert f"implemented on {name}" in notes, (name, notes[-2000:])
    assert len(implemented_on) >= 2, windows.seen


@pytest.mark.timeout(300)
def test_the_fleet_demo_moves_an_issue_when_its_host_dies(
    tmp_path: Path, postgres_url: str
) -> None:
    """`legion demo --hosts 2 --runtime codex` (`legion.demo.fleet`): two hosts on one store;
    the host running the implementer is killed, and the issue goes on to Done on the other.
    The store's password is never printed. On Codex: the subject is the fleet, and a Codex
    session costs a tenth of a Claude Code one's CPU (the fleet tests above run Claude Code)."""
    done = run_legion(
        "demo", "--hosts", "2", "--issues", "1", "--runtime", "codex", "--store", postgres_url,
        "--dir", str(tmp_path / "demo"), cwd=tmp_path,
        env={"LEGION_CODEX_BIN": str(find_codex())}, timeout=280,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Legion demo on 2 hosts (alpha, beta)" in done.stdout
    assert "Codex:" in done.stdout
    assert "killing host alpha" in done.stdout
    assert "LEG-1 moves: its implement worker starts again on beta" in done.stdout
    assert "1 of 1 issues Done" in done.stdout
    assert "LEG-1: Done, ran on alpha, beta" in done.stdout
    password = postgres_url.split(":")[2].split("@", maxsplit=1)[0]
    assert password not in done.stdout + done.stderr
