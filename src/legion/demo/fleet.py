"""`legion demo --hosts N`: the demo's issues on a fleet of N hosts simulated on this machine,
on one PostgreSQL store, and one host killed mid-work so you watch its issue move.

Each host is what docs/fleet.md's "Two hosts on one machine" says: its own clone of the demo
repository (from a bare repository, the fleet's shared remote), state folder, tmux server and
name, its own `legion start --foreground` daemon. They share the store (the one `--store`
names, else a private PostgreSQL server started in the demo folder) and the scripted model
server. Once an implementer has worked a few seconds, every process
of the host running the first implementer is killed (the leader, as often as not: another
host then leads): once its heartbeat is `host_timeout` old, the leader takes the issue over on
another host, from its checkpoint on the shared remote.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from legion.core.model import Label, Status
from legion.errors import InputError, LegionError, ToolMissingError
from legion.git import run_git
from legion.plugins import DEFAULT_RUNTIME, RUNTIMES

if TYPE_CHECKING:
    from legion.backends import Backends
    from legion.sessions.registry import Registry

HOST_NAMES = ("alpha", "beta", "gamma", "delta", "epsilon")
# The settings of the demo's config each host sets for itself.
HOST_OWN = (
    "state_dir",
    "workspace_root",
    "tmux_socket",
    "tmux_config",
    *(plugin.demo.home_setting for plugin in RUNTIMES if plugin.demo is not None),
)
VICTIM_AFTER_S = 2.0  # an implementer works this long on its host before the host is killed
# How long the scripted implementer works before it writes anything: past the kill, however
# fast its CLI (a Codex session does the rest in a second).
IMPLEMENT_PAUSE_S = VICTIM_AFTER_S + 3.0
HOST_TIMEOUT = 6.0  # seconds: how soon a dead host's issue moves (the default is a minute)


@dataclass
class Host:
    name: str
    folder: Path
    repo: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    killed: bool = False

    @property
    def socket(self) -> Path:
        return Path(self.env["LEGION_TMUX_SOCKET"])


@dataclass
class FleetDemoResult:
    folder: Path
    seconds: float
    statuses: dict[str, str]
    hosts_of: dict[str, list[str]]  # issue -> the hosts its workers ran on, in order
    killed: str | None  # the host killed mid-work
    moved: list[str] = field(default_factory=list)  # issues that went on on another host
    interrupted: int | None = None  # the signal that stopped it (SIGINT, SIGTERM)


def check_store(url: str) -> None:
    if not url.startswith(("postgresql://", "postgres://")):
        raise InputError("--store must be a postgresql:// URL")


def run_fleet_demo(
    folder: Path,
    *,
    hosts: int,
    issues: int,
    mode: str,
    store: str | None,
    timeout: float,
    say: Callable[[str], None],
    runtime: str = DEFAULT_RUNTIME,
) -> FleetDemoResult:
    """Run the demo on `hosts` hosts in `folder` (made already), its sessions on `runtime` (as
    `legion demo --runtime` takes it); `store`: a PostgreSQL URL, None: a private server in
    `folder`, stopped at the end."""
    from legion.demo.run import (
        _environment,
        demo_binary,
        demo_homes,
        issues_text,
        make_repository,
        runtime_variables,
        used_runtimes,
    )
    from legion.store.postgres import where

    _check_postgres(store)
    used = used_runtimes(runtime)
    binaries = [(plugin, demo_binary(plugin, os.environ, say)) for plugin in used]
    server = None
    if store is None:
        from legion.store.private_server import PrivatePostgres

        server = PrivatePostgres()  # in the temporary folder: its own user must reach it
        store = server.database()
    names = HOST_NAMES[:hosts]
    started = time.monotonic()
    try:
        os.environ["LEGION_STORE"] = store  # this process's own reads (the demo's tracker)
        homes = demo_homes(folder)
        repo = folder / "repo"
        _, backends = make_repository(repo, issues, homes)
        identifiers = [issue.identifier for issue in backends.tracker.list_issues()]
        _share(repo, folder / "remote.git")
        env, servers = _environment(
            folder, identifiers, mode, False, used, implement_pause=IMPLEMENT_PAUSE_S
        )
        # What runs each session is each host's own choice (as where its CLI homes are): set
        # alike on every host, by variables, so that no clone's config needs `legion trust`.
        host_env = env | runtime_variables(runtime)
        host_env |= {f"LEGION_{setting.upper()}": value for setting, value in homes.items()}
        fleet = [
            _host(name, folder, repo, host_env, store, first=n == 0) for n, name in enumerate(names)
        ]
        say(
            f"Legion demo on {hosts} hosts ({', '.join(names)}): "
            f"{issues_text(len(identifiers))}, {mode} mode, a SCRIPTED model on 127.0.0.1."
        )
        for plugin, binary in binaries:
            say(f"  {plugin.description + ':':<12} {binary.path} ({binary.source})")
        say(f"  store:       {where(store)}{' (private, removed at the end)' if server else ''}")
        say(f"  files:       {folder}")
        for host in fleet:
            say(f"  watch {host.name}: tmux -S {host.socket} attach")
        say("")
        try:
            result = _run(fleet, backends, identifiers, folder, timeout, started, say)
        finally:
            for host in fleet:
                _stop(host)
            for running in servers:
                running.stop()
            backends.db.close()
        return result
    finally:
        os.environ.pop("LEGION_STORE", None)
        if server is not None:
            server.close()


def _check_postgres(store: str | None) -> None:
    """psycopg, and PostgreSQL itself unless a store is given: one line each when missing."""
    from legion.store.postgres import INSTALL_HINT

    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise ToolMissingError(f"the demo on several hosts needs psycopg: {INSTALL_HINT}") from None
    if store is None:
        from legion.store.private_server import _bin_dir

        try:
            _bin_dir()
        except ToolMissingError:
            raise ToolMissingError(
                "the demo on several hosts needs PostgreSQL: install it (apt-get install "
                "postgresql), or give a server's URL with --store postgresql://…"
            ) from None


def _share(repo: Path, remote: Path) -> None:
    """The demo repository, its project's config committed, pushed to a bare repository: the
    fleet's shared remote, which every host clones. What only a host's user chooses (where
    its state, workspaces, tmux server and Claude Code config are) leaves the committed config:
    each host sets its own (`_host`), and a clone's config needs no `legion trust`."""
    config = repo / ".legion" / "config.toml"
    kept = [
        line
        for line in config.read_text(encoding="utf-8").splitlines()
        if line.split("=", 1)[0].strip() not in HOST_OWN
    ]
    config.write_text("\n".join(kept) + "\n", encoding="utf-8")
    run_git(repo, "add", "--force", ".legion/config.toml")
    run_git(repo, "commit", "--quiet", "-m", "Legion")
    run_git(repo.parent, "clone", "--quiet", "--bare", str(repo), str(remote))
    run_git(repo, "remote", "add", "origin", str(remote))
    run_git(repo, "fetch", "--quiet", "origin")
    run_git(repo, "branch", "--quiet", "--set-upstream-to=origin/main", "main")


def _host(
    name: str, folder: Path, repo: Path, env: dict[str, str], store: str, *, first: bool
) -> Host:
    """Host `name`: the demo repository itself for the first, else a clone of the remote; its
    own state folder, tmux server, workspaces and name."""
    own = folder / "hosts" / name
    own.mkdir(parents=True)
    clone = repo
    if not first:
        clone = own / "repo"
        run_git(own, "clone", "--quiet", str(folder / "remote.git"), str(clone))
        run_git(clone, "config", "user.name", "Legion Demo")
        run_git(clone, "config", "user.email", "demo@legion.invalid")
    return Host(
        name,
        own,
        clone,
        {
            **env,
            "LEGION_STORE": store,
            "LEGION_HOST_NAME": name,
            "LEGION_STATE_DIR": str(own / "state"),
            "LEGION_TMUX_SOCKET": str(own / "tmux.sock"),
            "LEGION_TMUX_CONFIG": "/dev/null",
            "LEGION_WORKSPACE_ROOT": str(own / "workspaces"),
            "LEGION_HOST_TIMEOUT": str(HOST_TIMEOUT),
            # Room for two sessions each: the leader's controller and a worker, two workers.
            "LEGION_MAX_SESSIONS": "2",
            "LEGION_STALE_AFTER": "60",
        },
    )


def _start(host: Host) -> None:
    """Its daemon, as `legion start --foreground` (its log in its folder)."""
    argv = [sys.executable, "-m", "legion", "--repo", str(host.repo), "start", "--foreground"]
    argv += ["--tick", "2"]
    with (host.folder / "daemon.log").open("ab") as log:
        host.process = subprocess.Popen(
            argv,
            env=host.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _kill(host: Host) -> None:
    """Every process of the host at once: its daemon, its fence, its tmux server and sessions."""
    host.killed = True
    if host.process is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(host.process.pid, signal.SIGKILL)
        host.process.wait()
    _fences_and_tmux(host, signal.SIGKILL)


def _stop(host: Host) -> None:
    if host.process is not None and host.process.poll() is None:
        host.process.send_signal(signal.SIGTERM)
        try:
            host.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(host.process.pid, signal.SIGKILL)
            host.process.wait()
    _fences_and_tmux(host, signal.SIGTERM)


def _fences_and_tmux(host: Host, how: int) -> None:
    from legion.runtime.tmux import process_args

    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        args = process_args(int(entry.name))
        if args is not None and "legion.fleet.fence" in args and str(host.socket) in args:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), how)
    subprocess.run(
        ["tmux", "-S", str(host.socket), "kill-server"], capture_output=True, check=False
    )


def _run(
    fleet: list[Host],
    backends: Backends,
    identifiers: list[str],
    folder: Path,
    timeout: float,
    started: float,
    say: Callable[[str], None],
) -> FleetDemoResult:
    from legion.fleet.hosts import Fleet
    from legion.sessions.registry import Registry

    tracker, registry = backends.tracker, Registry(backends.db)
    _start(fleet[0])
    deadline = time.monotonic() + timeout
    while Fleet(backends.db).leader() is None:
        if time.monotonic() > deadline or fleet[0].process is None or _exited(fleet[0]):
            raise LegionError(
                f"host {fleet[0].name} did not start: see its log, {fleet[0].folder / 'daemon.log'}"
            )
        time.sleep(0.5)
    for host in fleet[1:]:
        _start(host)
    others = ", ".join(host.name for host in fleet[1:])
    say(f"{_clock(started)} {fleet[0].name} leads; {others} follow{'s' if len(fleet) == 2 else ''}")
    statuses: dict[str, str] = {}
    seen: dict[int, tuple[str, str, str]] = {}
    hosts_of: dict[str, list[str]] = {issue: [] for issue in identifiers}
    victim: Host | None = None
    first_seen: dict[int, float] = {}
    moved: list[str] = []
    interrupted: int | None = None
    try:
        while time.monotonic() < deadline:
            issues = tracker.list_issues()
            for issue in issues:
                if statuses.get(issue.identifier) != issue.status.value:
                    statuses[issue.identifier] = issue.status.value
                    say(f"{_clock(started)} {issue.identifier}: {issue.status.value}")
            for record in registry.current():
                if record.id in seen:
                    continue
                seen[record.id] = (record.issue, record.mode.value, record.host)
                ran = hosts_of.setdefault(record.issue, [])
                moving = victim is not None and victim.name in ran and record.host != victim.name
                if moving and record.issue not in moved:
                    assert victim is not None
                    moved.append(record.issue)
                    say(
                        f"{_clock(started)} {record.issue} moves: its {record.mode.value} "
                        f"worker starts again on {record.host}, from what {victim.name} pushed"
                    )
                else:
                    say(f"{_clock(started)} {record.issue}: {record.mode.value} on {record.host}")
                if record.host not in ran:
                    ran.append(record.host)
            if victim is None:
                victim = _a_victim(fleet, registry, first_seen)
                if victim is not None:
                    say(
                        f"{_clock(started)} killing host {victim.name} (its daemon, tmux "
                        f"server and sessions): its issue moves once its heartbeat is "
                        f"{HOST_TIMEOUT:g} s old"
                    )
                    _kill(victim)
            if issues and all(
                i.status is Status.DONE and Label.WORKER_ACTIVE.value not in i.labels
                for i in issues
            ):
                break
            time.sleep(0.5)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (`legion.cli.demo`): the hosts stop
        interrupted = signal.SIGINT if type(exc) is KeyboardInterrupt else signal.SIGTERM
    return FleetDemoResult(
        folder,
        time.monotonic() - started,
        statuses,
        hosts_of,
        None if victim is None else victim.name,
        moved,
        interrupted,
    )


def _a_victim(fleet: list[Host], registry: Registry, first_seen: dict[int, float]) -> Host | None:
    """The host whose implementer has worked a few seconds (its first checkpoint's chance):
    the leader, as often as not, so another host takes the lead and the issue over."""
    from legion.core.model import Mode

    live = {host.name: host for host in fleet if not host.killed}
    now = time.monotonic()
    for record in registry.current():
        first_seen.setdefault(record.id, now)
        working = now - first_seen[record.id] >= VICTIM_AFTER_S
        if record.mode is Mode.IMPLEMENT and record.host in live and working:
            return live[record.host]
    return None


def _exited(host: Host) -> bool:
    return host.process is not None and host.process.poll() is not None


def _clock(started: float) -> str:
    return f"[{time.monotonic() - started:5.1f}s]"
