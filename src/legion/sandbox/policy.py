"""What a confined session may see, and the bubblewrap command line that shows it just that.
Pure: paths in, argv out (`legion.sandbox.bwrap` runs and probes bubblewrap).

The sandbox's root starts empty (bubblewrap's own tmpfs); only what is listed is put in it:
the system read-only (`SYSTEM`), a private `/tmp`, a fresh `/proc` of its own processes and a
minimal `/dev`, an empty writable home, then the session's own paths: read-write its workspace,
its git metadata and its CLI's folders; read-only Legion's install, the CLI's and the project's
config. What is not listed does not exist inside: the user's home, other workspaces, every
other process. A credential file inside a visible folder is shown empty (`hidden`). A session
holds no capability, whoever runs Legion.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# The system, read-only: programs, libraries and /etc (resolver, certificates, users).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
# Inside what the system shows, what is a secret of the machine's, never a session's.
SYSTEM_SECRET_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")
SYSTEM_SECRET_FOLDERS = ("/etc/ssh", "/etc/ssl/private")


@dataclass(frozen=True)
class Access:
    """Paths a session may use, each at its own path inside."""

    writable: tuple[Path, ...] = ()  # read-write
    readable: tuple[Path, ...] = ()  # read-only
    hidden: tuple[Path, ...] = ()  # files shown empty (inside what is writable or readable)
    # Files shown read-only in place of others: (the path inside, the file shown there).
    replaced: tuple[tuple[Path, Path], ...] = ()

    def __add__(self, other: Access) -> Access:
        return Access(
            self.writable + other.writable,
            self.readable + other.readable,
            self.hidden + other.hidden,
            self.replaced + other.replaced,
        )


@dataclass(frozen=True)
class Confinement:
    """One session's view of the machine."""

    home: Path  # an empty, writable folder inside (what it writes there is lost at its end)
    # An empty file, shown in place of each hidden one (/dev/null cannot be: bubblewrap's binds
    # are nodev, so reading it would be refused rather than empty).
    empty: Path
    access: Access = field(default_factory=Access)
    # Whether it shares the machine's network; else it has one of its own, with nothing but
    # loopback (its bridge to the model proxy: `legion.sandbox.bridge`).
    network: bool = False


def paths_of(confinement: Confinement) -> list[Path]:
    """Every path `bwrap_argv` mounts only when it exists."""
    return [
        *(Path(p) for p in SYSTEM_SECRET_FILES + SYSTEM_SECRET_FOLDERS),
        *confinement.access.writable,
        *confinement.access.readable,
        *confinement.access.hidden,
        *(shown for _, shown in confinement.access.replaced),
    ]


def _depth_order(paths: Iterable[tuple[str, Path]]) -> list[tuple[str, Path]]:
    """Mounts parents first, so a folder shown read-only inside a writable one stays so (and
    the other way round); the same path twice is mounted once, writable winning. A path inside
    a folder mounted the same way is not mounted again: it shows through that folder. (Mounted
    again, a file the CLI replaces by a rename, as Claude Code does `.claude.json`, could be
    replaced between bubblewrap's bind and its remount, which then fails the start.)"""
    chosen: dict[Path, str] = {}
    for kind, path in paths:
        if chosen.get(path) != "--bind":
            chosen[path] = kind
    ordered = sorted(((kind, path) for path, kind in chosen.items()), key=lambda x: len(x[1].parts))
    kept: list[tuple[str, Path]] = []
    for kind, path in ordered:
        inside = [(k, p) for k, p in kept if p in path.parents]
        nearest = max(inside, key=lambda mount: len(mount[1].parts), default=None)
        if nearest is None or nearest[0] != kind:
            kept.append((kind, path))
    return kept


def bwrap_argv(
    bwrap: str,
    confinement: Confinement,
    argv: Sequence[str],
    *,
    existing: Iterable[Path] = (),
) -> list[str]:
    """The command that runs `argv` confined. `existing`: which of the session's paths exist
    (a missing one is left out rather than failing the start); every path is absolute."""
    present = set(existing)
    args = [
        bwrap,
        # The command is the sandbox's pid 1 (`legion.sandbox.bridge`, which reaps and passes
        # signals on): a hangup of the window reaches the CLI, which ends as it does outside.
        # Not `--die-with-parent`, whose SIGKILL would come first and cut its transcript short.
        "--as-pid-1",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        # A session of its own, with no controlling terminal: the kernel refuses a confined
        # process TIOCSTI, which would push keystrokes into the pane's input (read by whatever
        # runs there next). The bridge passes on what the terminal signals (a resize, a hangup).
        "--new-session",
        # No capability inside, even for a Legion run as root, where bubblewrap keeps them all
        # unless told (CAP_SYS_ADMIN would let a session mount, or type into its terminal).
        "--cap-drop",
        "ALL",
    ]
    if not confinement.network:
        args.append("--unshare-net")
    for folder in SYSTEM:
        args += ["--ro-bind-try", folder, folder]
    for secret in SYSTEM_SECRET_FILES:
        if Path(secret) in present:
            args += ["--ro-bind", str(confinement.empty), secret]
    for secret in SYSTEM_SECRET_FOLDERS:
        if Path(secret) in present:
            args += ["--tmpfs", secret]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
    args += ["--tmpfs", str(confinement.home)]
    access = confinement.access
    mounts = [("--bind", p) for p in access.writable] + [("--ro-bind", p) for p in access.readable]
    for kind, path in _depth_order(m for m in mounts if m[1] in present):
        args += [kind, str(path), str(path)]
    for shown_empty in access.hidden:
        if shown_empty in present:
            args += ["--ro-bind", str(confinement.empty), str(shown_empty)]
    for inside, shown in access.replaced:
        if shown in present:
            args += ["--ro-bind", str(shown), str(inside)]
    return [*args, "--", *argv]


# How much memory (its data: what it allocates, not the packs it maps) confined git may take:
# a link planted at a ref to `/dev/urandom` (which git needs for its temporary files) would
# otherwise be read without end.
GIT_JAIL_DATA_BYTES = 1 << 30


def git_jail_argv(
    bwrap: str,
    argv: Sequence[str],
    *,
    writable: Iterable[Path],
    readable: Iterable[Path],
    prlimit: str | None = None,
) -> list[str]:
    """The command that runs Legion's own git (`argv`) on what a worker wrote: the system
    read-only, a private `/tmp`, of `/dev` only `null` and `urandom` (no `/dev/zero` a planted
    link could have read), no `/proc`, no network, and only `writable` and `readable` of the
    rest: a link the worker planted, in its refs, objects or workspace, leads nowhere outside
    them. Its memory is bounded (`GIT_JAIL_DATA_BYTES`, by `prlimit` when there is one)."""
    args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    for folder in SYSTEM:
        args += ["--ro-bind-try", folder, folder]
    for secret in SYSTEM_SECRET_FOLDERS:
        args += ["--tmpfs", secret]
    for device in ("/dev/null", "/dev/urandom"):
        args += ["--dev-bind", device, device]
    args += ["--tmpfs", "/tmp"]
    mounts = [("--bind", p) for p in writable] + [("--ro-bind", p) for p in readable]
    for kind, path in _depth_order(mounts):
        args += [kind, str(path), str(path)]
    bounded = [prlimit, f"--data={GIT_JAIL_DATA_BYTES}", "--"] if prlimit else []
    return [*args, "--", *bounded, *argv]
