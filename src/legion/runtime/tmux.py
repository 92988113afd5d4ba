"""tmux, driven through argv lists: one server (optionally private), one session per project.

Nothing here goes through a shell: window commands are argv lists that tmux executes directly,
and text typed into a pane is sent with `send-keys -l` (literal), then Enter as its own key.

**Unknown is not "none".** A question tmux did not answer (it failed, hung, or was killed) raises
`TmuxUnavailable`; only tmux's definite answers ("no server running", "can't find session")
mean that nothing runs. A supervisor that took a failed `list-windows` for "every worker is
dead" would start a second worker beside each live one.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from legion.core.text import for_typing
from legion.errors import TmuxError, TmuxUnavailable, ToolMissingError

# Wide panes keep the CLI's layout stable and questions readable in `capture-pane`.
PANE_WIDTH = 200
PANE_HEIGHT = 50
# A tmux command that takes longer than this has a server that is not answering.
TIMEOUT_S = 15.0
# How long a killed window's process gets to exit on its SIGHUP before it is sent SIGKILL.
EXIT_GRACE_S = 5.0
# The window option that carries the tag a window was started with (Legion: the session id).
TAG_OPTION = "@legion-tag"
_LIST_FORMAT = "\t".join(
    (
        "#{window_id}",
        "#{window_name}",
        "#{pane_dead}",
        "#{pane_pid}",
        "#{pane_current_command}",
        "#{" + TAG_OPTION + "}",
    )
)

# What tmux says when there is definitely nothing: no server, no session, no such window.
_NO_SERVER = ("no server running on",)
_NO_SESSION = ("can't find session", "session not found")
_NO_WINDOW = ("can't find window", "window not found", "can't find pane")
# What a client says when it asked a server that was exiting: no answer yet, ask again.
# Only once the first answer was the former: a server that answers "lost server" from the
# start stopped answering, which a look reports as unknown at once rather than wait on.
_GOING = ("server exited unexpectedly", "lost server")
_GOING_FOR_S = 1.0


# The only variables a tmux command (and so a server it starts) gets. A server keeps the
# environment it was started with as its global environment and hands it to every window:
# Legion's own (API keys, tokens) must not be there. Workers get theirs from a private file.
_SERVER_VARIABLES = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TMPDIR",
                     "TMUX_TMPDIR", "XDG_RUNTIME_DIR", "TZ")  # fmt: skip


def server_environment(env: Mapping[str, str]) -> dict[str, str]:
    """Pure: the part of `env` a tmux command may see (locale included)."""
    return {
        name: value
        for name, value in env.items()
        if name in _SERVER_VARIABLES or name.startswith("LC_")
    }


@dataclass(frozen=True, slots=True)
class Window:
    id: str  # @N, stable for the window's life
    name: str
    pane_dead: bool
    pane_pid: int | None
    current_command: str
    tag: str = ""  # what the window was started with `tag=` (Legion: its Claude session id)


def _says(proc: subprocess.CompletedProcess[str], fragments: tuple[str, ...]) -> bool:
    text = proc.stderr + proc.stdout
    return any(fragment in text for fragment in fragments)


def _no_server(proc: subprocess.CompletedProcess[str]) -> bool:
    """tmux's definite answer that no server listens on the socket."""
    if _says(proc, _NO_SERVER):
        return True
    text = proc.stderr + proc.stdout
    return "error connecting to" in text and "No such file or directory" in text


def _detail(args: tuple[str, ...], proc: subprocess.CompletedProcess[str]) -> str:
    detail = proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}"
    return f"tmux {args[0]} failed: {detail}"


def process_alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie waiting to be reaped does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        if Path("/proc/self/stat").exists():
            return False  # there is a /proc, and no such process in it
        try:  # no /proc (macOS, the BSDs)
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    # "pid (comm) STATE ...": comm may hold spaces and parentheses; the state follows the last ")".
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


# The flags that name the session an agent process runs: Claude Code's, and the Codex turn loop's.
SESSION_FLAGS = ("--session-id", "--resume", "--session")


# In each session's environment: the fleet host that started it (`legion.fleet.hosts.host_name`).
HOST_ENV = "LEGION_HOST"


def session_processes(session_id: str, host: str | None = None) -> list[int]:
    """Every live process started on session `session_id` (an argument of one of
    `SESSION_FLAGS`, before any `--`), from /proc: whatever its window, its parent, or whether
    tmux still shows it. [] where there is no /proc (elsewhere a session's pid file is all
    Legion has). With `host`, not one whose environment names another fleet host (`HOST_ENV`):
    that host's, not a leftover of this one (hosts simulated on one machine share /proc)."""
    proc = Path("/proc")
    try:
        entries = [entry for entry in os.listdir(proc) if entry.isdigit()]
    except OSError:
        return []
    me = os.getpid()
    found = []
    for entry in entries:
        pid = int(entry)
        if pid == me:
            continue
        try:
            args = (proc / entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        head = args[: args.index("--")] if "--" in args else args
        named = any(
            flag in SESSION_FLAGS and value == session_id
            for flag, value in itertools.pairwise(head)
        )
        if named and process_alive(pid) and (host is None or not _elsewhere(pid, host)):
            found.append(pid)
    return found


def _elsewhere(pid: int, host: str) -> bool:
    """Whether process `pid` runs a session of another fleet host than `host`."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False  # unreadable: counted, as one of this host's may be
    prefix = f"{HOST_ENV}=".encode()
    named = [entry[len(prefix) :] for entry in environ if entry.startswith(prefix)]
    return bool(named) and named[0] != host.encode()


def process_args(pid: int) -> str | None:
    """The command line of process `pid`, its arguments joined by spaces; None when it does
    not run (or is a zombie)."""
    if not process_alive(pid):
        return None
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return None  # exited meanwhile
        raw = b""
    except OSError:
        raw = b""
    if raw:
        return raw.decode(errors="replace").replace("\0", " ").strip()
    try:  # no /proc (macOS, the BSDs): ask ps
        proc = subprocess.run(
            ["ps", "-o", "command=", "-p", str(pid)],
            capture_output=True,
            text=True,
            check=False,
            timeout=TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None


def wait_for_exit(pid: int, grace: float | None = None) -> None:
    """Wait until `pid` has exited; SIGKILL it after `grace` seconds (`EXIT_GRACE_S`), unless
    its command line changed meanwhile (the pid went to another process)."""
    deadline = time.monotonic() + (EXIT_GRACE_S if grace is None else grace)
    identity = process_args(pid)
    while process_alive(pid):
        if time.monotonic() >= deadline:
            if process_args(pid) == identity:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 2.0
            while process_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.02)
            return
        time.sleep(0.02)


@dataclass(frozen=True, slots=True)
class Attach:
    """The tmux command that shows a window in a terminal, and its environment."""

    argv: list[str]
    env: dict[str, str]
    switched: bool  # switch-client: the terminal is a client of the same server already


@dataclass(frozen=True)
class Tmux:
    """A tmux server: the default one, or a private one at `socket` (tests: `-f /dev/null`)."""

    socket: Path | None = None
    config: Path | None = None

    def argv(self, *args: str) -> list[str]:
        prefix = ["tmux"]
        if self.socket is not None:
            prefix += ["-S", str(self.socket)]
        if self.config is not None:
            prefix += ["-f", str(self.config)]
        return [*prefix, *args]

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run one tmux command. A tmux that hangs or is killed raises `TmuxUnavailable`;
        with `check`, any other failure raises `TmuxError`."""
        try:
            proc = subprocess.run(
                self.argv(*args),
                capture_output=True,
                text=True,
                check=False,
                timeout=TIMEOUT_S,
                env=server_environment(os.environ),
            )
        except FileNotFoundError:
            raise ToolMissingError(
                "tmux is not installed: install it (e.g. apt-get install tmux)"
            ) from None
        except subprocess.TimeoutExpired:
            raise TmuxUnavailable(f"tmux {args[0]} did not answer within {TIMEOUT_S:g} s") from None
        if proc.returncode < 0:
            raise TmuxUnavailable(f"tmux {args[0]} was killed by signal {-proc.returncode}")
        if check and proc.returncode != 0:
            raise TmuxError(_detail(args, proc))
        return proc

    # -- sessions ------------------------------------------------------------------------------

    def has_session(self, session: str) -> bool:
        """Whether the session exists; `TmuxUnavailable` when tmux cannot say."""
        args = ("has-session", "-t", f"={session}")
        proc = self._ask(*args)
        if proc.returncode == 0:
            return True
        if _no_server(proc) or _says(proc, _NO_SESSION):
            return False
        raise TmuxUnavailable(_detail(args, proc))

    def new_session(self, session: str, window: str, command: list[str], cwd: Path) -> None:
        self.run(
            "new-session", "-d", "-s", session, "-n", literal(window), "-c", literal(str(cwd)),
            "-x", str(PANE_WIDTH), "-y", str(PANE_HEIGHT), "--", *map(literal, command),
        )  # fmt: skip

    def kill_session(self, session: str) -> None:
        self.run("kill-session", "-t", f"={session}", check=False)

    # -- windows -------------------------------------------------------------------------------

    def new_window(
        self,
        session: str,
        window: str,
        command: list[str],
        cwd: Path,
        *,
        keep_dead: bool = True,
        tag: str = "",
    ) -> str:
        """Start `command` in a new window; returns its id (see `start_window`)."""
        return self.start_window(session, window, command, cwd, keep_dead=keep_dead, tag=tag).id

    def start_window(
        self,
        session: str,
        window: str,
        command: list[str],
        cwd: Path,
        *,
        keep_dead: bool = True,
        tag: str = "",
    ) -> Window:
        """Start `command` in a new window. With `keep_dead`, a dead pane stays for
        inspection; `tag` is stored on the window (see `Window.tag`).

        The options are set in the same tmux command as the window is created, so a process
        that exits at once still leaves its pane, and no window ever exists untagged. They
        target the window by name: the caller makes sure no other window has it."""
        target = literal(f"={session}:={window}")
        args = [
            "new-window", "-d", "-P", "-F", "#{window_id}\t#{pane_pid}", "-t", f"={session}:",
            "-n", literal(window), "-c", literal(str(cwd)), "--", *map(literal, command),
        ]  # fmt: skip
        if keep_dead:
            args += [";", "set-option", "-w", "-t", target, "remain-on-exit", "on"]
        if tag:
            args += [";", "set-option", "-w", "-t", target, TAG_OPTION, literal(tag)]
        proc = self.run(*args)
        first = (proc.stdout.strip().splitlines() or [""])[0]
        window_id, _, pid = first.partition("\t")
        return Window(window_id, window, False, int(pid) if pid.isdigit() else None, "", tag)

    def list_windows(self, session: str) -> list[Window]:
        """The session's windows: none when there is definitely no server or no session (or no
        tmux at all: then no worker can be running). Any other failure raises
        `TmuxUnavailable`: what runs is then unknown, not nothing."""
        try:
            proc = self._list(session)
        except ToolMissingError:
            return []
        if proc.returncode != 0:
            if _no_server(proc) or _says(proc, _NO_SESSION):
                return []
            raise TmuxUnavailable(_detail(("list-windows",), proc))
        windows = []
        for line in proc.stdout.splitlines():
            parts = line.split("\t")
            if len(parts) == 5:
                parts.append("")  # an older format without the tag
            if len(parts) != 6:
                continue
            window_id, name, dead, pid, command, tag = parts
            windows.append(
                Window(
                    window_id, name, dead == "1", int(pid) if pid.isdigit() else None, command, tag
                )
            )
        return windows

    def _list(self, session: str) -> subprocess.CompletedProcess[str]:
        return self._ask("list-windows", "-t", f"={session}", "-F", _LIST_FORMAT)

    def _ask(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A question to the server, asked again while it is going (its last session just
        closed: `legion stop --all`, then a look at what runs), until it has gone and says
        so ("no server running"), for up to a second."""
        proc = self.run(*args, check=False)
        if not _says(proc, _GOING[:1]):
            return proc
        deadline = time.monotonic() + _GOING_FOR_S
        while _says(proc, _GOING) and time.monotonic() < deadline:
            time.sleep(0.05)
            proc = self.run(*args, check=False)
        return proc

    def attach_command(self, session: str, window_id: str, environ: Mapping[str, str]) -> Attach:
        """What shows `window_id` in the terminal whose environment is `environ`: inside a
        tmux client of this same server, `switch-client` (it returns at once, the client
        switched); anywhere else (another server too, so nested), `attach-session`, which
        holds the terminal until the human detaches. Only the variables a tmux command may
        see are passed on."""
        target = f"={session}:{window_id}"
        env = server_environment(environ)
        inside = environ.get("TMUX", "")
        if inside:
            asked = self.run("display-message", "-p", "-t", target, "#{socket_path}", check=False)
            ours = asked.stdout.strip()
            theirs = inside.split(",", 1)[0]
            if ours and os.path.realpath(ours) == os.path.realpath(theirs):
                env |= {
                    "TMUX": inside,
                    **({"TMUX_PANE": environ["TMUX_PANE"]} if "TMUX_PANE" in environ else {}),
                }
                return Attach(self.argv("switch-client", "-t", target), env, switched=True)
        return Attach(self.argv("attach-session", "-t", target), env, switched=False)

    def find_window(self, session: str, name: str) -> Window | None:
        """The window named `name`; None when there is none, `TmuxUnavailable` when tmux
        cannot say."""
        for window in self.list_windows(session):
            if window.name == name:
                return window
        return None

    def kill_window(self, target: str, *, pane_pid: int | None = None, wait: bool = True) -> None:
        """Close a window and wait until its process has exited (SIGKILL after a grace period),
        so that what ran there never overlaps with what replaces it. A window that is already
        gone is fine; a tmux that cannot be asked raises `TmuxUnavailable`.

        `pane_pid` (from `list_windows`) saves asking tmux for it. Without `wait`, the process
        is waited for (and killed after the grace period) by a thread of its own, for a caller
        whom nothing replaces it for."""
        if pane_pid is None:
            pane_pid = self._live_pane_pid(target)
        args = ("kill-window", "-t", target)
        proc = self.run(*args, check=False)
        if proc.returncode != 0 and not (_no_server(proc) or _says(proc, _NO_WINDOW + _NO_SESSION)):
            raise TmuxUnavailable(_detail(args, proc))
        if pane_pid is None:
            return
        if wait:
            wait_for_exit(pane_pid)
        else:
            threading.Thread(target=wait_for_exit, args=(pane_pid,), name="legion-exit").start()

    def _live_pane_pid(self, target: str) -> int | None:
        args = ("display-message", "-p", "-t", target, "#{pane_dead}\t#{pane_pid}")
        proc = self.run(*args, check=False)
        if proc.returncode != 0:
            if _no_server(proc) or _says(proc, _NO_WINDOW + _NO_SESSION):
                return None
            raise TmuxUnavailable(_detail(args, proc))
        dead, _, pid = proc.stdout.strip().partition("\t")
        return int(pid) if dead == "0" and pid.isdigit() else None

    # -- panes ---------------------------------------------------------------------------------

    def capture(self, target: str, lines: int = 50) -> str:
        """The pane's last `lines` lines of screen and history, joined where they wrapped."""
        proc = self.run("capture-pane", "-p", "-J", "-t", target, "-S", f"-{lines}")
        return proc.stdout

    def capture_many(self, targets: Sequence[str], lines: int = 50) -> dict[str, str]:
        """`capture` of several panes with one tmux client, not one each (the daemon looks at
        every worker's screen). Each capture is preceded by a line of a random marker naming
        its target; tmux stops a sequence at a command that fails (a window closed meanwhile),
        so the targets after it are captured on their own, and one that is gone is left out."""
        marker = f"legion-capture-{secrets.token_hex(8)}"
        args: list[str] = []
        for target in targets:
            args += [";"] if args else []
            args += ["display-message", "-p", f"{marker} {target}"]
            args += [";", "capture-pane", "-p", "-J", "-t", target, "-S", f"-{lines}"]
        screens: dict[str, list[str]] = {}
        current: list[str] | None = None
        if args:
            for line in self.run(*args, check=False).stdout.splitlines(keepends=True):
                if line.startswith(marker + " "):
                    current = screens.setdefault(line[len(marker) + 1 :].rstrip("\n"), [])
                elif current is not None:
                    current.append(line)
        found = {target: "".join(text) for target, text in screens.items()}
        # The last marker printed may be the target whose capture failed: look at it again.
        last = next(reversed(screens), None)
        for target in targets:
            if target not in found or (target == last and not found[target]):
                found.pop(target, None)
                with contextlib.suppress(TmuxError):
                    found[target] = self.capture(target, lines=lines)
        return found

    def send_text(self, target: str, text: str, *, enter: bool = True) -> None:
        """Type `text` literally (no key names, no shell), then press Enter. Every text Legion
        types goes here, as `for_typing` makes it: its control characters are never keys."""
        text = for_typing(text)
        if text:
            self.run("send-keys", "-t", target, "-l", "--", literal(text))
        if enter:
            self.run("send-keys", "-t", target, "Enter")

    def send_keys(self, target: str, *keys: str) -> None:
        """Press named keys (Enter, Escape, Down, …)."""
        self.run("send-keys", "-t", target, *keys)


def literal(arg: str) -> str:
    """What to give tmux for it to pass on `arg` unchanged. tmux splits its own argv at every
    argument that ends in ';' (its command separator), even after `--` or `-l`: the ';' would be
    lost, and what follows would run as a tmux command. A final ';' escaped as '\\;' is not."""
    return arg[:-1] + "\\;" if arg.endswith(";") else arg
