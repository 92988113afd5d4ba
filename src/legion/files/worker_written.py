"""Files in a tree a worker session can write (its workspace, its CLI's home, its own
`sessions/<id>/` folder), read and written by Legion's processes outside the sandbox.

A worker runs model-written commands steered by text strangers wrote, so everything below such
a tree is the adversary's: any name may be a symbolic link (to `~/.ssh/id_ed25519`, to
`/proc/self/environ`), a fifo that never answers, `/dev/zero`, or a file of many gigabytes.
The tree's root is Legion's (the caller names it); below it, here is the one way in:

- every component is opened from the one before (`openat`), never following a link
  (`O_NOFOLLOW`; folders with `O_DIRECTORY`), so a link anywhere below the root is refused;
- a file is opened `O_NONBLOCK` (a fifo cannot hang the reader) and read only when it is a
  regular file (`fstat`);
- at most `cap` bytes are read: past it the caller chose to get the head, the tail, or a
  refusal;
- a file is written by creating a new temporary file beside it (`O_EXCL | O_NOFOLLOW`) and
  renaming it over the name, which replaces a link there and never writes through it.

Every refusal is a `RefusedFile`, an OSError (callers that treat an unreadable file as absent
go on doing so), whose message says in one line what was refused and why.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

# What a reader gets past its cap: the file's first `cap` bytes, its last, or a RefusedFile.
PastCap = Literal["head", "tail", "refuse"]

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


class RefusedFile(OSError):
    """A file below a worker-writable root that Legion will not use (a link, not a regular
    file, too big, outside the root)."""


@dataclass(frozen=True, slots=True)
class Listed:
    """A regular file found in a folder (`regular_files`), with its stat as it was."""

    name: str
    path: Path
    stat: os.stat_result


def _parts(root: Path, path: Path | str) -> tuple[str, ...]:
    """`path`'s components below `root` (`path` absolute under it, or relative to it)."""
    candidate = Path(path)
    if candidate.is_absolute():
        try:
            candidate = candidate.relative_to(root)
        except ValueError:
            raise RefusedFile(errno.EPERM, f"{path} is not inside {root}") from None
    parts = candidate.parts
    if not parts or any(part in ("..", ".", "") for part in parts):
        raise RefusedFile(errno.EPERM, f"{path} is not a plain path inside {root}")
    return parts


def _refused(exc: OSError, path: Path | str, root: Path) -> OSError:
    """The error an open below the root met, in words when it was a link Legion refused."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR) and not isinstance(exc, RefusedFile):
        return RefusedFile(
            exc.errno, f"{path}: a symbolic link below {root} (not followed), or not a folder"
        )
    return exc


@contextlib.contextmanager
def _folder_fd(root: Path, folders: tuple[str, ...], *, create: bool = False) -> Iterator[int]:
    """The innermost of `folders` below `root`, opened component by component without following
    a link (each made first, 0700, when `create` and missing); the root itself is Legion's and
    opened as it is."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in folders:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o700, dir_fd=fd)
            inner = os.open(name, _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def open_regular(root: Path, path: Path | str) -> int:
    """A read-only descriptor of the regular file `path` below `root`; a RefusedFile when any
    component is a link, or the file is not a regular one. The caller closes it."""
    parts = _parts(root, path)
    try:
        with _folder_fd(root, parts[:-1]) as folder:
            fd = os.open(parts[-1], _READ, dir_fd=folder)
    except OSError as exc:
        raise _refused(exc, path, root) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise RefusedFile(errno.EINVAL, f"{path} is not a regular file (not read)")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(
    root: Path, path: Path | str, *, cap: int, past_cap: PastCap = "refuse", start: int = 0
) -> bytes:
    """The bytes of the regular file `path` below `root` from byte `start`, at most `cap` of
    them: past the cap, its first `cap` bytes (`past_cap="head"`), its last (`"tail"`) or a
    RefusedFile (`"refuse"`)."""
    fd = open_regular(root, path)
    try:
        size = os.fstat(fd).st_size
        if size - start > cap:
            if past_cap == "refuse":
                raise RefusedFile(errno.EFBIG, f"{path} is over {cap} bytes (not read)")
            if past_cap == "tail":
                start = size - cap
        os.lseek(fd, max(0, start), os.SEEK_SET)
        chunks, left = [], cap
        while left > 0:  # a file still growing is read up to the cap, never past it
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(root: Path, path: Path | str, *, cap: int, past_cap: PastCap = "refuse") -> str:
    """`read_regular` as UTF-8 text (bad bytes replaced)."""
    return read_regular(root, path, cap=cap, past_cap=past_cap).decode("utf-8", errors="replace")


def stat_regular(root: Path, path: Path | str) -> os.stat_result:
    """The stat of the regular file `path` below `root` (not following links, as
    `open_regular`); a RefusedFile for anything else."""
    parts = _parts(root, path)
    try:
        with _folder_fd(root, parts[:-1]) as folder:
            found = os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
    except OSError as exc:
        raise _refused(exc, path, root) from None
    if not stat.S_ISREG(found.st_mode):
        raise RefusedFile(errno.EINVAL, f"{path} is not a regular file")
    return found


def regular_files(
    root: Path, folder: Path | str, suffix: str = "", *, at_most: int | None = None
) -> list[Listed]:
    """The regular files directly in `folder` below `root` (or in `root` itself when `folder`
    is `root`) whose names end in `suffix`, by their own stat: links, folders and the rest are
    left out. [] when the folder cannot be opened (a link, missing), or when it holds more than
    `at_most` entries of any kind: a folder a session filled is not read through (each look
    would cost a stat per entry), it is taken as holding nothing."""
    parts = () if Path(folder) == root else _parts(root, folder)
    found = []
    try:
        with _folder_fd(root, parts) as fd, os.scandir(fd) as entries:
            for seen, item in enumerate(entries, 1):
                if at_most is not None and seen > at_most:
                    return []
                name = item.name
                if not name.endswith(suffix):
                    continue
                try:
                    entry = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(entry.st_mode):
                    found.append(Listed(name, root.joinpath(*parts, name), entry))
    except OSError:
        return []
    return found


def replace_file(
    root: Path, path: Path | str, data: bytes, *, mode: int = 0o600, folders: bool = False
) -> None:
    """Write `data` as the file `path` below `root`: a new temporary file beside it (created
    exclusively, never through a link), renamed over the name, which replaces whatever is there
    (a planted link included) and writes through nothing. `folders`: make missing folders."""
    parts = _parts(root, path)
    try:
        with _folder_fd(root, parts[:-1], create=folders) as folder:
            temporary = f".{parts[-1]}.{secrets.token_hex(8)}.tmp"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(temporary, flags, mode, dir_fd=folder)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.rename(temporary, parts[-1], src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=folder)
                raise
    except OSError as exc:
        raise _refused(exc, path, root) from None


# -- transcripts: which root a CLI's transcript is below -----------------------------------

# What of a transcript is read at most when all of it is wanted (usage, a message id): past
# it, its last this many bytes.
WHOLE_BYTES = 256 * 1024 * 1024


# Where a turn loop's link may point in its CLI's home: Codex's rollouts (`sessions/`), Gemini's
# chats (`tmp/<project>/chats/`).
LINKED_FOLDERS = (("sessions",), ("tmp",))


def transcript_home(path: Path) -> Path:
    """The CLI home transcript `path` lies in, which Legion trusts (the user's, or Legion's)
    and every session writes below: Claude Code's `<home>/projects/<folder>/<id>.jsonl` (its
    subagents' in `<id>/subagents/`), the link `<home>/legion/<id>.jsonl` a turn loop makes
    (Codex's, Gemini's). Anything else:
    its own folder, so that at least its name is not followed."""
    if path.parent.name == "legion" and path.suffix == ".jsonl":
        return path.parents[1]
    if len(path.parents) > 2 and path.parents[1].name == "projects":
        return path.parents[2]
    subagent = path.parent.name == "subagents" and len(path.parents) > 4
    if subagent and path.parents[3].name == "projects":
        return path.parents[4]
    return path.parent


def transcript_file(path: Path) -> tuple[Path, Path]:
    """Where transcript `path`'s bytes are, as (its CLI's home, the file below it). A
    `<home>/legion/<id>.jsonl` is a link the session's turn loop makes: only its target's name
    is read, which must be in the folder its CLI keeps its sessions in, `LINKED_FOLDERS` (a
    RefusedFile else)."""
    home = transcript_home(path)
    if path.parent.name != "legion" or home != path.parents[1]:
        return home, path.relative_to(home)
    try:
        target = Path(os.readlink(path))
    except OSError as exc:
        if exc.errno == errno.EINVAL:  # not a link: no rollout Legion linked
            raise RefusedFile(exc.errno, f"{path} is not Legion's link to a rollout") from None
        raise
    target = target if target.is_absolute() else path.parent / target
    try:
        below = target.relative_to(home)
    except ValueError:
        raise RefusedFile(errno.EPERM, f"{path} links outside {home}: not read") from None
    if below.parts[:1] not in LINKED_FOLDERS:
        raise RefusedFile(errno.EPERM, f"{path} links to no rollout of {home}: not read")
    return home, below


def transcript_stat(path: Path) -> os.stat_result:
    """The transcript's own stat (an OSError when it is missing, a link, not a regular file)."""
    root, below = transcript_file(path)
    return stat_regular(root, below)


def read_transcript(
    path: Path, *, start: int = 0, cap: int = WHOLE_BYTES, past_cap: PastCap = "tail"
) -> bytes:
    """The transcript's bytes from `start`, at most `cap` of them
    (`legion.files.worker_written`)."""
    root, below = transcript_file(path)
    return read_regular(root, below, cap=cap, past_cap=past_cap, start=start)
