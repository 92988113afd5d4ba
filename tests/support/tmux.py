"""tmux for tests: a private server per test (its own socket, no config), and a `tmux` first
on PATH that misbehaves on cue."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def private_tmux_socket(folder: Path | None = None) -> Iterator[Path]:
    """The socket of a tmux server no one else uses (`LEGION_TMUX_SOCKET`): in `folder`, or in
    a short-named temporary folder (a unix socket's path must stay short) removed afterwards.
    The server, if anything started one, is killed afterwards."""
    own = folder is None
    where = Path(tempfile.mkdtemp(prefix="lgt-")) if folder is None else folder
    socket = where / "tmux.sock"
    try:
        yield socket
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True, check=False)
        if own:
            shutil.rmtree(where, ignore_errors=True)


SHIM = '''#!{python}
"""tmux, misbehaving on cue: files in {control} switch the faults on."""
import os, subprocess, sys, time

REAL = {real!r}
CONTROL = {control!r}
args = sys.argv[1:]


def on(name):
    return os.path.exists(os.path.join(CONTROL, name))


def note(line):
    with open(os.path.join(CONTROL, "events.log"), "a") as out:
        out.write(line + "\\n")


def window_name():
    return args[args.index("-n") + 1] if "-n" in args[:-1] else ""


if "list-windows" in args and on("fail-list-windows"):
    note("failed list-windows")
    sys.stderr.write("lost server\\n")
    sys.exit(1)
if "new-window" in args and on("slow-before-" + window_name()):
    parent = os.getppid()
    note("holding new-window " + window_name())
    time.sleep(float(open(os.path.join(CONTROL, "slow-before-" + window_name())).read() or 4))
    if os.getppid() != parent:
        sys.exit(1)  # the caller died meanwhile: as if it had crashed before asking
if "new-window" in args and on("slow-after-" + window_name()):
    done = subprocess.run([REAL, *args], capture_output=True, text=True)
    note("made " + window_name())
    time.sleep(float(open(os.path.join(CONTROL, "slow-after-" + window_name())).read() or 4))
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    sys.exit(done.returncode)
os.execv(REAL, [REAL, *args])
'''


class TmuxShim:
    """A `tmux` first on PATH that passes every call to the real one, except the faults switched
    on by `set(...)`: `fail-list-windows`, `slow-before-<window>` (hold a new-window before it
    reaches tmux), `slow-after-<window>` (hold its answer after the window exists)."""

    def __init__(self, folder: Path) -> None:
        real = shutil.which("tmux")
        assert real is not None
        self.bin = folder / "bin"
        self.control = folder / "control"
        self.bin.mkdir(parents=True)
        self.control.mkdir()
        shim = self.bin / "tmux"
        shim.write_text(SHIM.format(python=sys.executable, real=real, control=str(self.control)))
        shim.chmod(0o755)
        self.path_prefix = str(self.bin) + os.pathsep

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """The PATH that puts this `tmux` first in `base` (a swarm's `env`)."""
        return {"PATH": self.path_prefix + base["PATH"]}

    def set(self, fault: str, value: str = "") -> None:
        (self.control / fault).write_text(value)

    def clear(self, fault: str) -> None:
        (self.control / fault).unlink(missing_ok=True)

    def events(self) -> list[str]:
        log = self.control / "events.log"
        return log.read_text().splitlines() if log.exists() else []


@contextmanager
def start_environment(tmp_path: Path) -> Iterator[dict[str, str]]:
    """What `legion start` runs with in a test: this process's environment, a private tmux
    server, a Claude Code config past its first-run screens and logged in (a login file: no
    session here reaches a model), workspaces beside the test."""
    config_dir = tmp_path / "claude-config"
    config_dir.mkdir(exist_ok=True)
    (config_dir / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True}))
    (config_dir / ".credentials.json").write_text("{}")
    with private_tmux_socket() as socket:
        yield dict(os.environ) | {
            "LEGION_TMUX_SOCKET": str(socket),
            "LEGION_TMUX_CONFIG": "/dev/null",
            "LEGION_WORKSPACE_ROOT": str(tmp_path / "workspaces"),
            "CLAUDE_CONFIG_DIR": str(config_dir),
        }
