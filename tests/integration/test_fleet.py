"""The fleet in the store (`legion.fleet.hosts`), on SQLite and on a real PostgreSQL server: hosts'
heartbeats, the leader lease by the store's clock, drains, and the fence that keeps a daemon
that lost the lease from writing."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from legion.bus.model import AgentRole, Channel
from legion.bus.stored import PostgresBus
from legion.config import load_project
from legion.core.fleet import HostState, Lease
from legion.core.liveness import SessionState
from legion.core.model import Mode
from legion.daemon.bus_listener import BusListener
from legion.daemon_link import lock_held
from legion.errors import ConflictError, NotFoundError
from legion.fleet.hosts import LEASE_ENV, FencedStore, Fleet, LeaseLostError, fenced_on_lease
from legion.runtime.transcript import question_from_input
from legion.services.agent_watch import watched
from legion.sessions.placement import START, TYPE, HostSessions
from legion.sessions.registry import Registry
from legion.store import Store, open_store
from legion.store.actionlog import ActionLog, OutcomeKind
from legion.trackers.local import LocalTracker
from tests.support.claude_env import REPO_ROOT
from tests.support.cli import LEGION_BIN, LegionRunner, git, run_legion
from tests.support.waits import wait_until


def test_hosts_join_and_one_leads(open_store: Callable[[], Store], tmp_path: Path) -> None:
    fleet = Fleet(open_store())
    fleet.join("alpha", 4, 60.0)
    fleet.join("beta", 8, 60.0)
    first = fleet.lead("alpha", 30.0)
    assert first is not None and first.epoch == 1
    assert fleet.lead("beta", 30.0) is None  # alpha holds it
    again = Fleet(open_store()).lead("alpha", 30.0)  # another connection: the same lease
    assert again is not None and again.epoch == 1
    Registry(open_store()).start("LEG-1", Mode.PLAN, "sid", "LEG-1:plan", tmp_path, host="beta")
    hosts, now = fleet.hosts(60.0)
    assert [(h.name, h.leader, h.epoch, h.capacity, h.sessions) for h in hosts] == [
        ("alpha", True, 1, 4, 0),
        ("beta", False, None, 8, 1),
    ]
    assert all(h.state is HostState.UP for h in hosts)
    assert hosts[0].to_json(now)["heartbeat_age_s"] == pytest.approx(0, abs=5)
    # Stopping, alpha gives the lease up: beta leads at once, under a new epoch.
    fleet.leave("alpha")
    taken = fleet.lead("beta", 30.0)
    assert taken is not None and taken.epoch == 2
    assert fleet.leader() == taken


def alpha_leads_briefly(
    open_store: Callable[[], Store],
) -> tuple[Store, Fleet, FencedStore, Lease]:
    """Hosts alpha and beta; alpha leads, its daemon's store fenced on its lease: (the store,
    the fleet, alpha's fenced store, the lease). The lease is long, so that what a test writes
    while alpha leads is written in time however loaded the machine (`lapse` ends it)."""
    store = open_store()
    fleet = Fleet(store)
    for name in ("alpha", "beta"):
        fleet.join(name, 2, 60.0)
    fenced = FencedStore(open_store(), "alpha")
    lease = fleet.lead("alpha", 60.0)
    assert lease is not None
    fenced.epoch = lease.epoch
    return store, fleet, fenced, lease


def lapse(fleet: Fleet, holder: str) -> None:
    """The holder's lease runs out, as when its daemon paused past it: its last renewal was a
    short one (same epoch), and the store's clock has passed it."""
    assert fleet.lead(holder, 0.05) is not None
    wait_until("the lease runs out", lambda: fleet.leader() is None, interval=0.02)


def test_a_lease_that_ran_out_is_taken_and_its_old_holder_is_fenced(
    open_store: Callable[[], Store],
) -> None:
    store, fleet, old, lease = alpha_leads_briefly(open_store)
    tracker = LocalTracker(old, issue_key="LEG")
    tracker.create_issue("written while alpha leads")
    lapse(fleet, "alpha")  # alpha paused past its lease
    taken = fleet.lead("beta", 30.0)
    assert taken is not None and taken.epoch == lease.epoch + 1
    with pytest.raises(LeaseLostError, match="no longer leads"):
        tracker.create_issue("written by a leader that lost its lease")
    with pytest.raises(LeaseLostError):
        ActionLog(old).append("LEG-1", "dispatch", OutcomeKind.DONE)
    assert [i.title for i in LocalTracker(store, issue_key="LEG").list_issues()] == [
        "written while alpha leads"
    ]
    # Following (no epoch), it writes what a follower writes.
    old.epoch = None
    ActionLog(old).append("-", "fleet_follow", OutcomeKind.DONE)


def test_the_relays_writes_and_a_command_run_for_a_session_are_fenced_as_the_daemons(
    open_store: Callable[[], Store],
) -> None:
    """The relay opens the store for each call, and a command the daemon runs for the
    controller (`legion.run`) opens its own: both write under the daemon's lease (issue 35),
    so a leader that lost it writes nothing through them either."""
    store, fleet, daemons, lease = alpha_leads_briefly(open_store)
    relay_call = LocalTracker(daemons.over(open_store()), issue_key="LEG")
    assert daemons.lease == ("alpha", lease.epoch)
    command = ActionLog(fenced_on_lease(open_store(), {LEASE_ENV: f"alpha {lease.epoch}"}))
    relay_call.create_issue("a relay call's, while alpha leads")
    command.append("LEG-1", "dispatch", OutcomeKind.DONE)
    lapse(fleet, "alpha")  # alpha paused past its lease
    assert fleet.lead("beta", 30.0) is not None
    with pytest.raises(LeaseLostError):
        relay_call.create_issue("a relay call's, after alpha lost the lease")
    with pytest.raises(LeaseLostError):
        command.append("LEG-2", "dispatch", OutcomeKind.DONE)
    assert [i.title for i in LocalTracker(store, issue_key="LEG").list_issues()] == [
        "a relay call's, while alpha leads"
    ]
    daemons.epoch = None  # following: the relay writes what a follower's does
    relay_call.create_issue("a follower's relay call")
    assert fenced_on_lease(store, {LEASE_ENV: "garbage"}) is store


def test_a_draining_host_gives_up_the_lead_and_a_lost_one_is_told(
    open_store: Callable[[], Store],
) -> None:
    fleet = Fleet(open_store())
    fleet.join("alpha", 2, 60.0)
    fleet.join("beta", 2, 60.0)
    assert fleet.lead("alpha", 30.0) is not None
    fleet.drain("alpha")
    assert fleet.draining("alpha") and not fleet.draining("beta")
    assert fleet.lead("alpha", 30.0) is None  # gave it up
    assert fleet.lead("beta", 30.0) is not None
    hosts, _ = fleet.hosts(60.0)
    assert {h.name: h.state for h in hosts}["alpha"] is HostState.DRAINING
    # A daemon started again on it takes it back.
    fleet.join("alpha", 2, 60.0)
    assert not fleet.draining("alpha")
    with pytest.raises(NotFoundError, match="no host 'gamma'"):
        fleet.drain("gamma")
    time.sleep(0.3)
    hosts, _ = fleet.hosts(0.1)
    assert {h.state for h in hosts} == {HostState.LOST}


def test_hosts_and_drain_from_the_command_line(legion: LegionRunner, project: Path) -> None:
    """A project whose daemon never ran: no host yet; a host's row once one joined."""
    assert legion("hosts").stdout.startswith("No host has joined yet")
    assert json.loads(legion("hosts", "--json").stdout) == []
    unknown = legion("host", "drain", "nowhere")
    assert (unknown.returncode, unknown.stderr.strip()) == (
        2,
        "legion: error: no host 'nowhere' in the fleet (see `legion hosts`)",
    )
    store = open_store(load_project(project))
    Fleet(store).join("build-1", 3, 60.0)
    Fleet(store).lead("build-1", 60.0)
    store.close()
    table = legion("hosts").stdout.splitlines()
    assert table[0].split() == ["HOST", "STATE", "HEARTBEAT", "SESSIONS", "LEADS"]
    assert table[1].split()[:3] == ["build-1", "*", "up"] and "epoch 1" in table[1]
    assert legion("host", "drain", "build-1").stdout == "build-1: draining\n"
    [host] = json.loads(legion("hosts", "--json").stdout)
    assert (host["state"], host["draining"], host["capacity"]) == ("draining", True, 3)
    assert legion("host", "drain", "build-1", "--undo").returncode == 0
    assert json.loads(legion("hosts", "--json").stdout)[0]["state"] == "up"


def test_one_host_name_is_one_daemon(open_store: Callable[[], Store]) -> None:
    """A second daemon under a name a live one holds is refused: both would take the lease as
    theirs. A daemon that died on this machine (its pid gone), or whose heartbeat is old, is
    no obstacle: it is started again."""
    fleet = Fleet(open_store())
    fleet.join("build-1", 2, 60.0, machine="machine-a", pid=os.getpid())
    with pytest.raises(ConflictError, match="in use by a daemon on another machine"):
        fleet.join("build-1", 2, 60.0, machine="machine-b", pid=1234)
    with pytest.raises(ConflictError, match=r"another daemon on this machine \(pid"):
        fleet.join("build-1", 2, 60.0, machine="machine-a", pid=os.getpid() + 1)
    fleet.join("build-1", 2, 60.0, machine="machine-a", pid=os.getpid())  # itself, again
    # A daemon that died on its machine (kill -9: its row fresh, its pid gone) starts again.
    gone = subprocess.Popen(["true"])
    gone.wait()
    fleet.join("build-2", 2, 60.0, machine="machine-a", pid=gone.pid)
    fleet.join("build-2", 2, 60.0, machine="machine-a", pid=os.getpid())
    # A daemon that stopped left its name: the next one takes it, even while the stopping
    # process still exits.
    fleet.leave("build-1", pid=os.getpid())
    fleet.join("build-1", 2, 60.0, machine="machine-a", pid=os.getpid() + 1)
    # A name whose heartbeat is older than `host_timeout` is free, from any machine.
    fleet.join("build-3", 2, 60.0, machine="machine-a", pid=os.getpid())
    time.sleep(0.3)
    fleet.join("build-3", 2, 0.1, machine="machine-b", pid=99)


# -- the bus across hosts -------------------------------------------------------------------------


def test_a_post_on_any_host_wakes_the_addressees_daemon(postgres_url: str) -> None:
    """A post NOTIFYs each addressee's project when it commits; a daemon's listener wakes for
    its own project only, and again when it reconnects (a post may have come meanwhile)."""
    woken: list[float] = []
    app = Channel("app", "legion/leg-1")
    other = Channel("other", "main")
    poster = PostgresBus(postgres_url)  # another host's connection
    worker = poster.register_agent(
        app, "implement", role=AgentRole.IMPLEMENT, runtime="t", session_id=None
    )
    elsewhere = poster.register_agent(
        other, "implement", role=AgentRole.IMPLEMENT, runtime="t", session_id=None
    )
    listener = BusListener(postgres_url, lambda: "app", lambda: woken.append(time.monotonic()))
    listener.start()
    try:
        wait_until("listening", listener.listening.is_set)
        wait_until("the wake-up of the (re)connection", lambda: len(woken) == 1)
        poster.post(poster.human().id, other, f"@{elsewhere.address} not for app")
        posted = time.monotonic()
        poster.post(poster.human().id, app, f"@{worker.address} for app")
        wait_until("woken by the post", lambda: len(woken) == 2)
        assert woken[1] >= posted
        time.sleep(0.5)
        assert len(woken) == 2  # the other project's post woke nobody here
    finally:
        listener.stop()
        poster.close()
    assert not listener.listening.is_set()


def test_with_a_fleet_leader_no_host_but_its_watches_the_sessions(
    git_repo: Path, postgres_url: str
) -> None:
    """A host without a daemon does not deliver a project's messages, nor judge its agents'
    statuses, while the fleet has a leader: that host's sessions are not here to be seen."""
    env = {**os.environ, "LEGION_STORE": postgres_url}
    assert run_legion("init", cwd=git_repo, env=env).returncode == 0
    here = load_project(git_repo, env)
    assert not watched(here)  # no daemon anywhere: this host may watch
    store = open_store(here)
    Fleet(store).join("build-1", 3, 60.0, machine="elsewhere", pid=1)
    assert Fleet(store).lead("build-1", 60.0) is not None
    assert watched(here)
    Fleet(store).leave("build-1")
    store.close()
    assert not watched(here)


def test_starts_asked_of_a_host_and_the_hosts_reports(
    open_store: Callable[[], Store], tmp_path: Path
) -> None:
    """What the leader asks of a host is that host's to carry out, once, oldest first; what a
    host reports is written only where it changed, and a worker it no longer runs loses its
    report."""
    store = open_store()
    placement = HostSessions(store)
    registry = Registry(store)
    one = registry.start("LEG-1", Mode.PLAN, "s1", "leg-1-plan", Path(), host="beta")
    two = registry.start("LEG-2", Mode.PLAN, "s2", "leg-2-plan", Path(), host="beta")
    first = placement.ask("beta", 3, START, one.id, "plan it", wake="w")
    placement.ask("beta", 3, TYPE, two.id, "plan that", wake="w", from_host="alpha")
    assert placement.pending("gamma") == []
    asked = placement.pending("beta")
    assert [(c.worker_id, c.epoch, c.kind, c.prompt, c.from_host) for c in asked] == [
        (one.id, 3, START, "plan it", ""),
        (two.id, 3, TYPE, "plan that", "alpha"),
    ]
    placement.finish(first, "started leg-1-plan")
    placement.finish(first, "again")  # once: the first outcome stands
    assert [c.worker_id for c in placement.pending("beta")] == [two.id]
    assert placement.outcome(first) == "started leg-1-plan"
    # The host records the workspace it started the worker in.
    placement.placed(one.id, tmp_path / "leg-1")
    assert registry.current_by_id(one.id).workspace == tmp_path / "leg-1"  # type: ignore[union-attr]

    placement.report("beta", {one.id: (SessionState.RUNNING, 10.0, None)}, {})
    reports = placement.reports()
    assert (reports[one.id].host, reports[one.id].state) == ("beta", SessionState.RUNNING)
    stamped = reports[one.id].reported_at
    time.sleep(0.05)
    placement.report("beta", {one.id: (SessionState.RUNNING, 10.0, None)}, reports)  # unchanged
    assert placement.reports()[one.id].reported_at == stamped
    # A blocked worker's question goes with its report, whole.
    question = question_from_input(
        "toolu_1",
        {
            "questions": [
                {
                    "question": "Which greeting?",
                    "header": "Greeting",
                    "options": [{"label": "Hello"}, {"label": "Hi"}],
                    "multiSelect": False,
                }
            ]
        },
    )
    placement.report("beta", {two.id: (SessionState.BLOCKED, None, question)}, placement.reports())
    after = placement.reports()
    assert list(after) == [two.id] and after[two.id].last_activity is None
    assert after[two.id].question == question


# -- two daemons on one machine -------------------------------------------------------------------


def _host_env(tmp_path: Path, name: str, store_url: str, host_timeout: float) -> dict[str, str]:
    """Host `name` of a fleet on this machine, in the project's one clone: its own state
    folder, tmux server and name (what docs/fleet.md's "two hosts on one machine" sets)."""
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    return {
        "LEGION_STORE": store_url,
        "LEGION_HOST_NAME": name,
        "LEGION_STATE_DIR": str(folder / "state"),
        "LEGION_TMUX_SOCKET": str(folder / "tmux.sock"),
        "LEGION_TMUX_CONFIG": "/dev/null",
        "LEGION_HOST_TIMEOUT": str(host_timeout),
        "LEGION_WORKSPACE_ROOT": str(folder / "workspaces"),
    }


def _hosts(store: Store) -> dict[str, dict[str, object]]:
    hosts, now = Fleet(store).hosts(60.0)
    return {host.name: host.to_json(now) for host in hosts}


def _fences(socket: str) -> list[int]:
    """The fence processes of the tmux server at `socket` (`legion.fleet.fence`)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"legion.fleet.fence" in args and socket.encode() in args:
            found.append(int(proc.name))
    return found


def test_stop_all_on_the_leader_hands_the_lease_over_at_once(
    git_repo: Path, postgres_url: str, tmp_path: Path, fake_claude: Path
) -> None:
    """`legion stop --all` on the leader closes its sessions, and then gives the lease up that
    its daemon kept for them: the follower leads at its next heartbeat (a third of
    `host_timeout`), not once the lease runs out; the leader's fence ends with its sessions,
    and its host is stopped. Two real daemons on one PostgreSQL store."""
    # The lease lasts 15 s, renewed every 5 s: given up, beta leads at its next look (within
    # 5 s); run out instead, not before 10 s after the stop. A loaded machine has the gap.
    timeout = 15.0
    assert run_legion("init", cwd=git_repo, env={"LEGION_STORE": postgres_url}).returncode == 0
    alpha = _host_env(tmp_path, "alpha", postgres_url, timeout)
    beta = _host_env(tmp_path, "beta", postgres_url, timeout)
    store = open_store(load_project(git_repo, {**os.environ, **alpha}))
    try:
        started = run_legion("start", "--mode", "manual", "--json", cwd=git_repo, env=alpha)
        assert started.returncode == 0, started.stderr
        name = json.loads(started.stdout)["session"]
        wait_until("alpha leads", lambda: _hosts(store).get("alpha", {}).get("leader"))
        # A session of alpha's: a process in its project's tmux session.
        socket = alpha["LEGION_TMUX_SOCKET"]
        subprocess.run(
            ["tmux", "-S", socket, "-f", "/dev/null", "new-session", "-d", "-s", name, "sleep 600"],
            check=True,
        )
        started = run_legion("start", "--mode", "manual", cwd=git_repo, env=beta)
        assert started.returncode == 0, started.stderr
        wait_until("beta joins", lambda: "beta" in _hosts(store))
        wait_until("alpha's fence over its session", lambda: _fences(socket))

        stopped = run_legion("stop", "--all", cwd=git_repo, env=alpha)
        assert stopped.returncode == 0, stopped.stderr
        assert f"Closed tmux session {name}." in stopped.stdout
        handed = time.monotonic()
        # Given up: alpha's daemon renewed it within 5 s of its stop, for 15 s.
        lease = Fleet(store).leader()
        assert lease is None or lease.holder == "beta"
        wait_until("beta leads", lambda: _hosts(store)["beta"]["leader"], timeout=timeout)
        runs_out = handed + 2 * timeout / 3  # the soonest the lease itself could run out
        assert time.monotonic() - handed < timeout / 3 + 4  # at beta's next heartbeat
        hosts = _hosts(store)
        assert hosts["beta"]["epoch"] == 2 and hosts["alpha"]["state"] == "stopped"
        # With its sessions (it looks every second), not when the lease would have run out.
        left = max(0.5, runs_out - time.monotonic())
        wait_until("alpha's fence ends", lambda: not _fences(socket), timeout=left)
    finally:
        store.close()
        for host in (beta, alpha):
            if lock_held(Path(host["LEGION_STATE_DIR"], "daemon.lock")):
                run_legion("stop", "--all", cwd=git_repo, env=host)


def test_a_follower_says_where_the_controller_and_a_worker_run(
    git_repo: Path, postgres_url: str, tmux_socket: Path, tmp_path: Path
) -> None:
    """On a follower, the leader's controller and a worker of another host have no window
    here: `legion status` says the controller is on the leader's host (not dead), and `legion
    peek` where the worker runs."""
    env = {"LEGION_STORE": postgres_url, "LEGION_HOST_NAME": "beta"}
    assert run_legion("init", cwd=git_repo, env=env).returncode == 0
    project = load_project(git_repo, {**os.environ, **env})
    store = open_store(project)
    try:
        issue = LocalTracker(store, issue_key="LEG").create_issue("Greet").identifier
        Fleet(store).join("alpha", 2, 60.0, machine="elsewhere", pid=1)
        assert Fleet(store).lead("alpha", 60.0) is not None
        Registry(store).start(issue, Mode.PLAN, "sid", "leg-1-plan", tmp_path, host="alpha")
    finally:
        store.close()
    status = json.loads(run_legion("status", "--json", cwd=git_repo, env=env).stdout)
    assert status["controller"]["state"] == "on host alpha, the leader"
    assert status["controller"]["host"] == "alpha"
    text = run_legion("status", cwd=git_repo, env=env).stdout
    assert "controller: on host alpha, the leader (" in text
    peek = run_legion("peek", issue, cwd=git_repo, env=env)
    assert (peek.returncode, peek.stderr) == (
        2,
        f"legion: error: {issue}'s worker runs on host alpha: run `legion peek {issue}` there\n",
    )
    # On the leader's own host, the controller is this host's (here: not started).
    alpha = {**env, "LEGION_HOST_NAME": "alpha"}
    mine = json.loads(run_legion("status", "--json", cwd=git_repo, env=alpha).stdout)
    assert mine["controller"]["host"] is None and mine["controller"]["state"] != "dead"


def _doc_blocks(heading: str) -> list[str]:
    """The `sh` code blocks of docs/fleet.md's section `heading`, comments stripped."""
    doc = (REPO_ROOT / "docs" / "fleet.md").read_text(encoding="utf-8")
    section = doc.split(f"### {heading}\n", 1)[1].split("\n## ", 1)[0]
    blocks = [part.split("```", 1)[0] for part in section.split("```sh\n")[1:]]
    return [
        "\n".join(line.split("  #")[0] for line in block.splitlines() if line.strip())
        for block in blocks
    ]


def test_two_hosts_on_one_machine_as_the_docs_say(
    postgres_url: str, isolated_env: Path, fake_claude: Path
) -> None:
    """docs/fleet.md's "Two hosts on one machine", run literally under one HOME: both hosts
    join, one leads; a third start that would share a running host's state folder or tmux
    session is refused in one line naming what to set; the docs' stop lines stop both."""
    home = isolated_env
    app = home / "src" / "app"
    app.mkdir(parents=True)
    git(app, "init", "--quiet")
    (app / "README.md").write_text("# app\n", encoding="utf-8")
    git(app, "add", "README.md")
    git(app, "commit", "--quiet", "-m", "initial")
    assert run_legion("init", cwd=app, env={"LEGION_STORE": postgres_url}).returncode == 0
    git(app, "add", ".")
    git(app, "commit", "--quiet", "-m", "Legion")
    config = home / "config" / "legion" / "config.toml"  # the user config (XDG_CONFIG_HOME)
    config.parent.mkdir(parents=True)
    config.write_text(f"store = {json.dumps(postgres_url)}\n", encoding="utf-8")
    config.chmod(0o600)
    env = {
        **os.environ,
        "PATH": f"{LEGION_BIN.parent}:{os.environ['PATH']}",
        "LEGION_CONTROLLER_MODE": "manual",  # no session needed here
        "LEGION_TMUX_CONFIG": "/dev/null",
    }
    start, stop = _doc_blocks("Two hosts on one machine")
    try:
        done = subprocess.run(
            ["bash", "-ec", start],
            check=False,
            cwd=home,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()}
        assert rows["one"][1:3] == ["*", "up"] and rows["two"][1] == "up", done.stdout
        fleet = home / "fleet"
        # One's state folder from the other clone: refused, naming one's checkout.
        shared = run_legion(
            "start",
            cwd=fleet / "two",
            env={**env, "LEGION_HOST_NAME": "three", "LEGION_STATE_DIR": str(fleet / "one.state")},
        )
        assert (shared.returncode, shared.stdout) == (1, "")
        assert shared.stderr == (
            f"legion: error: the state folder {fleet / 'one.state'} is in use by Legion running "
            f"for {fleet / 'one'} (pid {_pid(fleet / 'one.state')}): give each host on this "
            "machine its own LEGION_STATE_DIR, LEGION_TMUX_SOCKET and LEGION_HOST_NAME "
            "(docs/fleet.md)\n"
        )
        # A state folder of its own, but one's tmux server: refused too.
        tmux = run_legion(
            "start",
            cwd=fleet / "two",
            env={
                **env,
                "LEGION_HOST_NAME": "three",
                "LEGION_STATE_DIR": str(fleet / "three.state"),
                "LEGION_TMUX_SOCKET": str(fleet / "one.tmux"),
            },
        )
        assert tmux.returncode == 1 and tmux.stderr.count("\n") == 1, tmux.stderr
        assert f"on {fleet / 'one.tmux'} is in use by the Legion of state folder " in tmux.stderr
        assert str(fleet / "one.state") in tmux.stderr
    finally:
        stopped = subprocess.run(
            ["bash", "-ec", stop],
            check=False,
            cwd=home,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert stopped.returncode == 0, stopped.stderr
    for name in ("one", "two"):
        assert not lock_held(home / "fleet" / f"{name}.state" / "daemon.lock")


def _pid(state: Path) -> int:
    return int((state / "daemon.pid").read_text().split()[0])


def test_the_fleet_demo_refuses_bad_options_in_one_line(tmp_path: Path) -> None:
    """`legion demo --hosts N`'s options, refused before anything is made."""
    for args, message in [
        (["--store", "postgresql://x/y"], "--store goes with --hosts N (2 or more)"),
        (["--hosts", "2", "--real"], "--hosts runs on the scripted model only: no --real"),
        (["--hosts", "2", "--runtime", "kodex"], "unknown runtime 'kodex'"),
        (["--hosts", "2", "--store", "mysql://x/y"], "--store must be a postgresql:// URL"),
    ]:
        done = run_legion("demo", *args, "--dir", str(tmp_path / "d"), cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"legion: error: {message}") and done.stderr.count("\n") == 1
        assert not (tmp_path / "d").exists()


def test_the_fleet_demo_without_postgresql_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from legion.demo import fleet
    from legion.errors import ToolMissingError
    from legion.store import private_server

    def missing() -> Path:
        raise ToolMissingError(private_server.INSTALL_HINT)

    monkeypatch.setattr(private_server, "_bin_dir", missing)
    with pytest.raises(ToolMissingError) as refused:
        fleet._check_postgres(None)
    assert str(refused.value) == (
        "the demo on several hosts needs PostgreSQL: install it (apt-get install postgresql), "
        "or give a server's URL with --store postgresql://…"
    )
    fleet._check_postgres("postgresql://db/legion")  # a server given: none needed here
