"""The sandbox: every worker session Legion starts runs confined by bubblewrap (`bwrap`), which
Debian ships as `bubblewrap`.

A worker runs model-written commands with permissions bypassed; confined, it sees the system
read-only, its own workspace, its git metadata, its CLI's folders and Legion's state, and
nothing else of the machine: not the user's home (`~/.ssh`, `~/.aws`, `~/.config/gh`, the CLI's
credentials file when the daemon holds the model credential), not the user's checkout, not
other issues' workspaces, not other processes (their `/proc/PID/environ` included), not the
tmux server. When the daemon's proxy holds its model credential it also gets a network of its
own with nothing but loopback, where its bridge (`legion.sandbox.bridge`) carries the CLI's
connections to the proxy's Unix socket. What is decided here: whether sessions are confined
(`sandbox` setting: `bwrap`, `none`, or unset for bwrap where it works, `resolve`) and what one
session may see (`session_access`); the command line is `legion.sandbox.policy`'s, the network
the confinement's (`legion.sessions.confinement`).

Not confined yet, and said so by `legion status`: the controller (its `legion dispatch` opens
tmux windows). Legion's state (the bus, the projects' databases) is shown to workers,
read-write, because their bus commands and hooks still open it directly.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from legion.errors import ConfigError
from legion.files.private import touch_private

from .policy import Access, Confinement, bwrap_argv, git_jail_argv, paths_of

__all__ = [
    "Access",
    "Confinement",
    "Sandbox",
    "empty_file",
    "git_jail",
    "reported",
    "resolve",
    "session_access",
    "wrap",
]

BWRAP = "bwrap"
INSTALL_HINT = "install bubblewrap (Debian, Ubuntu: apt install bubblewrap)"
_PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Sandbox:
    """How this project's workers run: confined by `bwrap` (its path), or not (`bwrap` None,
    `why` saying why)."""

    bwrap: str | None
    why: str  # "bubblewrap", or why not: "sandbox = none", "bubblewrap is not installed…"
    refused: bool = False  # required (`sandbox = "bwrap"`) and not to be had: no session starts

    @property
    def confined(self) -> bool:
        return self.bwrap is not None

    @property
    def summary(self) -> str:
        """One line, loud when sessions run unconfined (`legion status`, the board, the demo)."""
        if self.confined:
            return "sessions confined by bubblewrap"
        if self.refused:
            return f"no session can start: {self.why}"
        return f"NONE: sessions run unconfined ({self.why})"


def find_bwrap(env: Mapping[str, str]) -> str | None:
    return shutil.which(BWRAP, path=env.get("PATH"))


@functools.cache
def probe(bwrap: str) -> str | None:
    """None when `bwrap` can confine a process here, else why not (its error, one line). Once
    per process: a kernel without user namespaces, a container that forbids mounts."""
    # The namespaces and mounts a worker's sandbox uses (`policy.bwrap_argv`).
    namespaces = ["--as-pid-1", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net"]
    namespaces += ["--cap-drop", "ALL"]
    argv = [bwrap, *namespaces, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    argv += ["--tmpfs", "/tmp"]
    try:
        done = subprocess.run(
            [*argv, "true"], capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} did not run: {exc}"
    if done.returncode == 0:
        return None
    lines = (done.stderr or done.stdout).strip().splitlines()
    return f"{bwrap} cannot confine a process here: {lines[-1] if lines else done.returncode}"


def resolve(setting: str | None, env: Mapping[str, str]) -> Sandbox:
    """The project's sandbox from its `sandbox` setting: "none" is unconfined; "bwrap" must
    work (a ConfigError saying how to get it, else); unset is bwrap where it works."""
    if setting == "none":
        return Sandbox(None, "sandbox = none")
    found = find_bwrap(env)
    problem = f"bubblewrap is not installed: {INSTALL_HINT}" if found is None else probe(found)
    if problem is None:
        return Sandbox(found, "bubblewrap")
    if setting == "bwrap":
        raise ConfigError(f"sandbox = bwrap, but {problem}")
    return Sandbox(None, problem)


def reported(setting: str | None, env: Mapping[str, str]) -> Sandbox:
    """`resolve` as a report says it (`legion status`, the board, the demo): a required sandbox
    that cannot be had is a `refused` one, not an error."""
    try:
        return resolve(setting, env)
    except ConfigError as exc:
        return Sandbox(None, str(exc), refused=True)


def wrap(sandbox: Sandbox, confinement: Confinement, argv: Sequence[str]) -> list[str]:
    """`argv` run inside `confinement` (as it is, unconfined)."""
    if sandbox.bwrap is None:
        return list(argv)
    existing = [path for path in paths_of(confinement) if path.exists()]
    return bwrap_argv(sandbox.bwrap, confinement, argv, existing=existing)


def git_jail(
    writable: Iterable[Path], readable: Iterable[Path], env: Mapping[str, str] | None = None
) -> Callable[[list[str]], list[str]] | None:
    """What confines Legion's own git on what a worker wrote (`policy.git_jail_argv`), for
    `legion.git.run_git`'s `wrap`; None where bubblewrap cannot run (there, sessions run
    unconfined too, and can do anything the daemon's git could be led to)."""
    source = os.environ if env is None else env
    found = find_bwrap(source)
    if found is None or probe(found) is not None:
        return None
    limit = shutil.which("prlimit", path=source.get("PATH"))
    kept = [path for path in writable if path.exists()]
    shown = [path for path in readable if path.exists()]
    return lambda argv: git_jail_argv(found, argv, writable=kept, readable=shown, prlimit=limit)


def empty_file(state_dir: Path) -> Path:
    """An empty file in the state folder, shown in place of what a session must not read
    (`Confinement.empty`). 0600 like every state file: bubblewrap shows it read-only
    (`--ro-bind`), whatever its mode, and a session reads it as its owner."""
    path = state_dir / "sandbox-empty"
    try:
        info: os.stat_result | None = path.lstat()
    except FileNotFoundError:
        info = None
    if info is None or not stat.S_ISREG(info.st_mode) or info.st_size or info.st_mode & 0o177:
        path.unlink(missing_ok=True)  # written to, a link, or an older Legion's 0444 one
        touch_private(path)
    return path


def legion_install() -> tuple[Path, ...]:
    """What the session's `legion` (this Python and this package) reads."""
    import legion

    package_root = Path(legion.__file__).resolve().parent.parent
    prefixes = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)}
    # Packages found elsewhere (the user's site-packages, a `pip install --user`).
    sites = {Path(p) for p in sys.path if p and Path(p).name in ("site-packages", "dist-packages")}
    return (*sorted(prefixes | sites), package_root)


def install_root(binary: Path) -> tuple[Path, ...]:
    """What running `binary` reads beyond the system: the folder it is named in and, through
    its links, the npm prefix (the folder above `node_modules`) or folder of the real file."""
    real = binary.resolve()
    for parent in real.parents:
        if parent.name == "node_modules":
            return (binary.parent, parent.parent)
    return (binary.parent, real.parent)


def worker_git_parts(git_folder: Path, workspace: Path) -> tuple[Path, ...]:
    """What of the project's git folder a jj workspace's worker writes: the objects (its
    commits), its worktree's admin folder, and the `legion/` branches with their logs (made
    here, as a bind needs them). A git workspace writes none of it: it is a worktree of its
    issue's own repository (`legion.workspaces.issue_repo.sandbox_parts`)."""
    own_refs = (
        git_folder / "refs" / "heads" / "legion",
        git_folder / "logs" / "refs" / "heads" / "legion",
    )
    for folder in own_refs:
        folder.mkdir(parents=True, exist_ok=True)
    parts = (git_folder / "objects", git_folder / "worktrees" / workspace.name, *own_refs)
    return tuple(part for part in parts if part.is_dir() and not part.is_symlink())


def session_access(
    *,
    workspace: Path,
    workspace_writable: bool = True,
    git_folder: Path | None,
    git_writable: tuple[tuple[Path, ...], tuple[Path, ...]] = ((), ()),
    session_state: tuple[Path, ...],
    daemon: tuple[Path, ...],
    project_config: Path,
    trust_records: Path | None = None,
    user_config: tuple[Path, Path] | None,
    runtime: Access,
    env: Mapping[str, str],
) -> Access:
    """What one session may use: a worker writes its workspace, the controller only reads its own
    (the user's checkout). `git_folder`: the project's repository's git folder (a worktree's
    objects and refs are there), found from the project's checkout, never from the workspace,
    whose `.git` a worker writes (it would choose which repository its next session may write);
    shown read-only, but for `git_writable` (`worker_git_parts`: what of its issue's repository
    a worker writes, and what inside that it only reads). `session_state`: what of Legion's
    state it may write (its own folder, with its inbox and context files, which its hooks
    update; all of it for a session with no daemon to ask); `daemon`: the folders of the
    daemon's sockets and wake-up FIFO, shown read-only; `trust_records`: the user's records of
    the repository configs they trust (`legion.trust`), read-only, so that the session's own
    `legion` loads the project's config as the daemon does; `user_config`: where the user's
    Legion config is and the copy without its secrets shown there (`legion.core.session_config`:
    the real one may hold the fleet store's password), None when there is none; `runtime`: its
    CLI's own (`AgentRuntime.sandbox_access`)."""
    home = Path(env.get("HOME") or Path.home())
    git_config = (home / ".gitconfig", Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "git")
    node = shutil.which("node", path=env.get("PATH"))
    # The controller works in your checkout: it reads it, never writes it (its writes are
    # tracker, forge and bus calls, made by the daemon).
    git = (git_folder,) if git_folder is not None else ()
    return (
        Access(
            writable=(
                *((workspace, *git_writable[0]) if workspace_writable else ()),
                *session_state,
            ),
            readable=(
                *git,
                *(git_writable[1] if workspace_writable else ()),
                *(() if workspace_writable else (workspace,)),
                *daemon,
                *legion_install(),
                project_config,
                *((trust_records,) if trust_records is not None else ()),
                *git_config,
                *(install_root(Path(node)) if node else ()),
            ),
            replaced=() if user_config is None else (user_config,),
        )
        + runtime
    )
