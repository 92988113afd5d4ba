"""The files through which `legion` commands find and talk to a project's daemon: its lock and
pid, the wake-up pipe that makes it reconcile at once, and the heartbeat it touches each tick.
Kept apart from the daemon so that every write command can poke it without importing it."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a session's hook pokes the pipe without loading the project's config
    from legion.config import Project


def pid_file(project: Project) -> Path:
    return project.state_dir / "daemon.pid"


# The folder of a project's state that a confined session may see (read-only): the daemon's
# sockets and its wake-up FIFO, nothing else (`legion.sandbox`).
RUN_FOLDER = "run"


def run_folder(state_dir: Path) -> Path:
    """What of the project's state a confined session is shown: the daemon's sockets (unless
    they are in the short fallback folder, `legion.relay.socket_path`) and its wake-up FIFO."""
    return state_dir / RUN_FOLDER


def wake_fifo(project: Project) -> Path:
    # In the folder a confined session sees: its hooks poke it at the end of each turn.
    return run_folder(project.state_dir) / "daemon.wake"


def heartbeat_file(project: Project) -> Path:
    return project.state_dir / "heartbeat"


def lock_held(lock: Path) -> bool:
    """Whether a process holds the lock file `lock` (a daemon's); False when there is none."""
    try:
        # Non-blocking: a fifo planted at its name answers at once rather than hanging.
        fd = os.open(lock, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "r") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
    except OSError:
        return False  # no lock file (or its folder is gone): nobody holds it
    return False


def running_pid(project: Project) -> int | None:
    """The daemon's pid when one runs for this project (its lock is held), else None."""
    if not lock_held(project.state_dir / "daemon.lock"):
        return None
    try:
        return int(pid_file(project).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return -1  # running, pid unknown


# The pid file's third line once the daemon serves its sessions (`daemon_ready`).
READY_LINE = "ready"


def _running_lines(project: Project) -> list[str]:
    """The pid file's lines while a daemon runs for the project (`<pid> <mode>`, its
    checkout, `ready` once it serves sessions); none when none runs or the file is gone."""
    if running_pid(project) is None:
        return []
    try:
        return pid_file(project).read_text().splitlines()
    except OSError:
        return []


def daemon_ready(project: Project) -> bool:
    """Whether the project's running daemon serves sessions yet: its relay and its model
    proxy are up, and the proxy's file says where (a session started before would be given
    the model key rather than the proxy's address)."""
    return READY_LINE in _running_lines(project)[2:]


def running_root(project: Project) -> Path | None:
    """The checkout the project's running daemon runs for (the pid file's second line), or
    None when none runs or it did not say."""
    lines = _running_lines(project)
    return Path(lines[1]) if len(lines) > 1 and lines[1] else None


def short_folder() -> Path:
    """This user's short private folder in /tmp (0700, checked ours by whoever serves a socket
    in it): where the relay's sockets fall back to (`legion.relay.socket_path`), and the
    tmux claims are. /tmp, not $TMPDIR or $XDG_RUNTIME_DIR: a user's shells may differ in
    those, and the path must be the same for every process of the user."""
    return Path("/tmp") / f"legion-{os.getuid()}"


def own_short_folder(*, create: bool = True) -> Path:
    """`short_folder`, made (0700) when missing and `create`, once checked to be this user's
    own folder: anyone on the machine may make `/tmp/legion-<uid>` first, as a link (to a
    folder of this user's, which would be made 0700 and written; as root, to any) or as a
    folder of their own (holding a lock they hold, a fifo). Looked at without following a link
    (`lstat`); /tmp's sticky bit keeps another user from replacing it once checked. A
    PermissionError naming it when it is not this user's; FileNotFoundError when it is missing
    and not `create`."""
    folder = short_folder()
    if create:
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise PermissionError(
            errno.EPERM, f"{folder} is not a folder of this user's (a link, or another user's)"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        folder.chmod(0o700)  # a folder (lstat), so no link is followed
    return folder


def tmux_claim(project: Project) -> Path:
    """The lock a daemon holds on its tmux server's session for the project, whatever its state
    folder: two daemons on one machine whose state folders differ but whose tmux server is the
    same (no `tmux_socket` of their own) would close each other's sessions. In the short
    private folder (`short_folder`)."""
    from legion.core.ids import short_id

    server = tmux_server(project)
    session = f"legion-{short_id(project.settings.project_id)}"
    digest = hashlib.sha256(f"{server}\0{session}".encode()).hexdigest()[:16]
    return short_folder() / f"tmux-{digest}.lock"


def tmux_server(project: Project) -> str:
    """The tmux server the project's sessions run on, as a user names it."""
    socket = project.settings.tmux_socket
    if socket is not None:
        return str(socket.expanduser().resolve())
    return f"tmux's default server (under {project.env.get('TMUX_TMPDIR') or '/tmp'})"


# What a second host on this machine needs of its own (docs/fleet.md, "Two hosts on one
# machine").
OWN_HOST = "give each host on this machine its own LEGION_STATE_DIR, LEGION_TMUX_SOCKET and "
OWN_HOST += "LEGION_HOST_NAME (docs/fleet.md)"


def start_refusal(project: Project) -> str | None:
    """Why a daemon may not start for `project` here, in one line, or None: one runs already
    on its state folder (for this checkout, or another one sharing it: a second host on this
    machine without a state folder of its own), or on its tmux server's session."""
    pid = running_pid(project)
    if pid is not None:
        root = running_root(project)
        if root is not None and root != project.root:
            return (
                f"the state folder {project.state_dir} is in use by Legion running for {root} "
                f"(pid {pid}): {OWN_HOST}"
            )
        return f"Legion is already running for {project.root} (pid {pid}); `legion stop` stops it"
    claim = tmux_claim(project)
    try:
        own_short_folder(create=False)
    except OSError:
        return None  # no claim is held in it (nor made: `legion.daemon.claims`)
    if lock_held(claim):
        try:
            other = claim.read_text(encoding="utf-8").strip() or "another"
        except OSError:
            other = "another"
        return (
            f"the tmux session of this project on {tmux_server(project)} is in use by the "
            f"Legion of state folder {other}: {OWN_HOST}"
        )
    return None


def running_mode(project: Project) -> str | None:
    """The controller mode of the project's running daemon (`auto`, `llm`, `manual`: the
    pid file's second word), or None when none runs or it did not say."""
    lines = _running_lines(project)
    words = lines[0].split() if lines else []
    return words[1] if len(words) > 1 else None


def hosts_controller(project: Project) -> bool:
    """Whether a daemon runs a controller for the project (one runs, and not in manual mode):
    whether a question can go to the controller's Oracle."""
    return running_pid(project) is not None and running_mode(project) != "manual"


# Set in every session's environment: the wake-up pipe its turn's end pokes (`turn_ended`).
WAKE_ENV = "LEGION_WAKE"


def notify(project: Project) -> None:
    """Tell a running daemon that something changed, so it reconciles now. Never blocks."""
    poke(wake_fifo(project))


def turn_ended(env: Mapping[str, str]) -> None:
    """A session's turn is over (its Stop hook, Codex's turn loop): a worker that said it is
    done is closed only once its turn ends, so the daemon looks now rather than at its next
    retry. Never blocks, never fails."""
    from legion.diagnostics.tracing import mark

    mark("session: turn ended", env.get("LEGION_ISSUE_ID") or "-")
    fifo = env.get(WAKE_ENV)
    if fifo:
        poke(Path(fifo))


def poke(fifo: Path) -> None:
    """One byte into a daemon's wake-up pipe; nothing when no daemon listens."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return  # no daemon listening
    try:
        os.write(fd, b"!")
    except OSError:
        pass  # the pipe is full: a wake-up is pending already
    finally:
        os.close(fd)
