"""What the benchmarks share: a git repository to run on, the offline Claude Code
environment of a swarm on the scripted model, and how times are summed up and printed."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from legion.demo.offline import base_environment, offline_variables
from legion.skills import install


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) > 1 else values[0]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return int(probe.getsockname()[1])


def wait_for(port: int) -> None:
    """Until something listens on `port` of 127.0.0.1 (a bridge, say)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listened on {port}")


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def make_repo(repo: Path) -> Path:
    """An empty git repository with one commit on main and a local identity."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "--initial-branch=main")
    git(repo, "config", "user.name", "Bench")
    git(repo, "config", "user.email", "bench@legion.invalid")
    git(repo, "commit", "-q", "--allow-empty", "-m", "initial")
    return repo


def bench_environment(home: Path) -> None:
    """This process's environment as the tests' (`isolated_env`): a HOME of its own, git's
    identity, and no LEGION_ or GIT_ variable of the caller's."""
    for name in list(os.environ):
        if name.startswith(("LEGION_", "GIT_")):
            del os.environ[name]
    home.mkdir(parents=True)
    os.environ |= {
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Bench\n\temail = bench@example.invalid\n[init]\n\tdefaultBranch = main\n"
    )


def swarm_env(root: Path, base_url: str, socket: Path, claude: Path) -> dict[str, str]:
    """A private Claude Code config (onboarded, with Legion's skills) and the environment that
    points workers at the scripted server and a private tmux server."""
    config = root / "claude-config"
    config.mkdir(parents=True, exist_ok=True)
    (config / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True}))
    install(config / "skills")
    env = base_environment() | offline_variables(
        base_url, home=root, config_dir=config, proxy_url=base_url
    )
    return env | {
        "XDG_STATE_HOME": os.environ["XDG_STATE_HOME"],
        "LEGION_TMUX_SOCKET": str(socket),
        "LEGION_TMUX_CONFIG": "/dev/null",
        "LEGION_CLAUDE_BIN": str(claude),
    }


@contextlib.contextmanager
def hosting_daemon(repo: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """`legion start --foreground --mode manual` for the project at `repo`: the daemon the
    sessions a benchmark starts by hand run under (no session starts without one), with no
    controller and no reconcile pass of its own."""
    legion = Path(sys.executable).with_name("legion")
    argv = [str(legion), "start", "--foreground", "--mode", "manual", "--tick", "60"]
    daemon = subprocess.Popen(
        argv, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status = subprocess.run(
                [str(legion), "status", "--json"],
                cwd=repo,
                env=env,
                capture_output=True,
                check=False,
            )
            if status.returncode == 0 and json.loads(status.stdout)["daemon"]["pid"]:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("the daemon did not start")
        yield daemon
    finally:
        daemon.terminate()
        daemon.wait(30)


def median_seconds(args: list[str], cwd: Path, runs: int) -> float:
    """The median wall time of `legion ARGS` in `cwd` (this venv's `legion`), over `runs`."""
    legion = Path(sys.executable).with_name("legion")
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([str(legion), *args], cwd=cwd, check=True, capture_output=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
