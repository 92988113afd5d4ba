"""Hosts of a fleet simulated on one machine, for the fleet's end-to-end tests and its bench:
each host its own HOME, state folder, clone, workspace root, tmux server and model server, on
one store; what runs each session, read from /proc; and a host lost at once (SIGKILL)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Self

from tests.fakes.responses_server import FakeResponsesServer
from tests.support.cli import git, run_legion
from tests.support.swarm import Daemon, Swarm, open_swarm


def shared_project(folder: Path, store_url: str) -> tuple[Path, Path]:
    """A project in `folder` / repo whose store is at `store_url`, its config committed (every
    host's clone has the same project id) and pushed to a bare repository every host reaches
    as `origin` (`folder` / shared.git), where checkpoints and merges go: the project and the
    shared remote, as the fleet's end-to-end tests make them (`project`, `shared_remote`)."""
    repo = folder / "repo"
    repo.mkdir()
    git(repo, "init", "--quiet")
    (repo / "README.md").write_text("# bench\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "--quiet", "-m", "initial")
    made = run_legion("init", cwd=repo, env={"LEGION_STORE": store_url})
    assert made.returncode == 0, made.stderr
    remote = folder / "shared.git"
    git(folder, "init", "--quiet", "--bare", str(remote))
    git(repo, "add", ".legion")
    git(repo, "commit", "--quiet", "-m", "Legion")
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "--quiet", "origin", "main")
    return repo, remote


def on_codex(
    hosts: dict[str, Swarm], folder: Path, stack: contextlib.ExitStack, roles: str | None = None
) -> dict[str, FakeResponsesServer]:
    """Each of `hosts` with a scripted Codex server of its own (started in `stack`), its Codex
    home in `folder` / <name>, and its sessions on Codex: every one, or those of `roles`
    (`LEGION_RUNTIMES`' form, "implement=codex,…"). The servers, by host, to script."""
    from legion.demo.offline import codex_offline_home
    from tests.support.codex_env import find_codex

    served = {}
    for name, swarm in hosts.items():
        server = stack.enter_context(FakeResponsesServer())
        swarm.env |= codex_offline_home(folder / name / "codex-home", server.base_url)
        swarm.env["LEGION_CODEX_BIN"] = str(find_codex())
        if roles is None:
            swarm.env["LEGION_RUNTIME"] = "codex"
        else:
            swarm.env["LEGION_RUNTIMES"] = roles
        served[name] = server
    return served


def nothing_unscripted(servers: dict[str, FakeResponsesServer]) -> None:
    """No request a scripted Codex server did not expect, and none for elsewhere."""
    for server in servers.values():
        assert server.outbound_attempts() == [], server.outbound_attempts()
        assert server.unknown_requests() == [], server.unknown_requests()


def on_host(made: Swarm, name: str, home: Path, store_url: str, host_timeout: float) -> Swarm:
    """`made` as host `name` of the fleet on the store at `store_url`: its HOME and state folder."""
    (home / "state").mkdir(parents=True, exist_ok=True)
    made.env |= {
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "LEGION_STORE": store_url,
        "LEGION_HOST_NAME": name,
        "LEGION_HOST_TIMEOUT": str(host_timeout),
    }
    return made


@contextlib.contextmanager
def another_host(
    name: str, project: Path, tmp_path: Path, store_url: str, host_timeout: float
) -> Iterator[Swarm]:
    """Host `name`: its own HOME, state folder, clone, workspace root, tmux server and model
    server, on the project's store."""
    folder = tmp_path / name
    folder.mkdir()
    home = folder / "home"
    home.mkdir()
    (home / ".gitconfig").write_text((Path(os.environ["HOME"]) / ".gitconfig").read_text())
    clone = folder / "repo"
    # From the shared remote when the project has one (`shared_remote`), else from alpha's.
    origin = subprocess.run(
        ["git", "remote", "get-url", "origin"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    source = origin.stdout.strip() if origin.returncode == 0 else str(project)
    git(folder, "clone", "--quiet", source, str(clone))
    with open_swarm(folder, clone, home) as made:
        made.env["LEGION_WORKSPACE_ROOT"] = str(folder / "work spaces")
        yield on_host(made, name, home, store_url, host_timeout)


class Sampler:
    """Samples something every `every` seconds in a thread, between `start` and `stop`."""

    every = 0.2

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def sample(self) -> None:
        raise NotImplementedError


class SessionSampler(Sampler):
    """How many live processes run each of `sessions` at once, at most (`most`), from /proc
    every 0.2 s: two would be one session run twice."""

    def __init__(self, sessions: list[str]) -> None:
        super().__init__()
        self.most = dict.fromkeys(sessions, 0)

    def sample(self) -> None:
        running = session_processes()
        for sid in self.most:
            self.most[sid] = max(self.most[sid], len(running.get(sid, ())))


class WindowSampler(Sampler):
    """The live worker windows of each host, every 0.3 s: the most at once on each (`most`),
    and every worker window seen on each (`seen`)."""

    every = 0.3

    def __init__(self, hosts: dict[str, Swarm]) -> None:
        super().__init__()
        self.hosts = hosts
        self.most = dict.fromkeys(hosts, 0)
        self.seen: dict[str, set[str]] = {name: set() for name in hosts}

    def sample(self) -> None:
        for name, swarm in self.hosts.items():
            listed = swarm.tmux("list-windows", "-a", "-F", "#{window_name}\t#{pane_dead}")
            live = {
                window
                for window, dead in (line.split("\t") for line in listed.splitlines())
                if dead == "0" and window not in ("main", "legion")
            }
            self.most[name] = max(self.most[name], len(live))
            self.seen[name] |= live


def files_on_main(remote: Path) -> set[str]:
    """Every file on the main branch of the bare repository `remote`."""
    listed = subprocess.run(
        ["git", "--git-dir", str(remote), "ls-tree", "-r", "--name-only", "main"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(listed.stdout.split())


def kill_host(swarm: Swarm, daemon: Daemon) -> None:
    """Every process of the host `swarm` dies at once, with SIGKILL, as when its machine is
    lost: its daemon, its tmux server, and every process of its sessions (they name their host
    in their environment; on a real machine nothing would be left to find)."""
    assert daemon.proc is not None
    os.kill(daemon.proc.pid, signal.SIGKILL)
    daemon.proc.wait(10)
    host = f"LEGION_HOST={swarm.env['LEGION_HOST_NAME']}".encode()
    server = (swarm.tmux("list-sessions", "-F", "#{pid}").split() or [""])[0]
    for proc in Path("/proc").iterdir():
        try:
            mine = host in (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if mine or proc.name == server:
            with contextlib.suppress(OSError):
                os.kill(int(proc.name), signal.SIGKILL)


def hosts_of(swarm: Swarm) -> dict[str, dict[str, object]]:
    """`legion hosts --json` on `swarm`'s host, by name."""
    found = run_legion("hosts", "--json", cwd=swarm.repo, env=swarm.env)
    assert found.returncode == 0, found.stderr
    return {host["name"]: host for host in json.loads(found.stdout)}


def leads(swarm: Swarm, name: str) -> bool:
    """Whether host `name` leads, as `legion hosts` on `swarm`'s host says."""
    return hosts_of(swarm).get(name, {}).get("leader") is True


# What runs a Codex session: Legion's turn loop, which runs `codex exec` for each turn.
CODEX_LOOP = [b"-m", b"legion.runtime.codex.session"]


def _runs_a_session(argv: list[bytes]) -> bool:
    """Whether a process's command line is a session's CLI: Claude Code, or Codex's turn loop."""
    return argv[0].rsplit(b"/", 1)[-1].startswith(b"claude") or argv[1:3] == CODEX_LOOP


def session_processes() -> dict[str, list[int]]:
    """The live Claude Code processes, and Codex turn loops, of each session id (as any process
    of the user could see them, from /proc): each once, not the helper processes it forks of
    itself."""
    found: dict[int, tuple[str, int]] = {}  # pid: its session id, its parent's pid
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if not _runs_a_session(argv):
            continue
        for variable in environ:
            if variable.startswith(b"LEGION_SESSION_ID="):
                found[int(proc.name)] = (variable.split(b"=", 1)[1].decode(), parent)
    sessions: dict[str, list[int]] = {}
    for pid, (sid, parent) in found.items():
        if parent not in found:
            sessions.setdefault(sid, []).append(pid)
    return sessions


def sessions_of(sid: str) -> list[int]:
    """The live Claude Code processes running session `sid`."""
    return session_processes().get(sid, [])


def sessions_on_host(host: str, under: Path) -> dict[str, set[str]]:
    """What the live Claude Code processes and Codex turn loops of fleet host `host` (its name
    as `LEGION_HOST` in their environment) run: by the session id in their environment
    (`LEGION_SESSION_ID`), the session ids their command lines name (after `--session-id` or
    `--resume`, a turn loop's `--session`). A session resumed under a new id would show the new
    one here, whatever its environment says. Only processes with a variable naming a path in
    `under` (the test's folder: their home, their folder), since another test's fleet runs on
    this machine with hosts of the same names."""
    mine = f"LEGION_HOST={host}".encode()
    ours = f"={under}/".encode()
    found: dict[str, set[str]] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if mine not in environ or not _runs_a_session(argv):
            continue
        if not any(ours in variable for variable in environ):
            continue
        variables = [v for v in environ if v.startswith(b"LEGION_SESSION_ID=")]
        if not variables:
            continue
        sid = variables[0].split(b"=", 1)[1].decode()
        named = {
            value.decode(errors="replace")
            for flag, value in itertools.pairwise(argv)
            if flag in (b"--session-id", b"--resume", b"--session")
        }
        found.setdefault(sid, set()).update(named)
    return found
