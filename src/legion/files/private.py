"""Files in Legion's state folder are the owner's alone: folders 0700, files 0600, whatever
the umask. The state holds issue text, logs and the paths of transcripts."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import IO


def private_folder(folder: Path) -> Path:
    """Create `folder` (and its parents) if needed, and make it readable by its owner only."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if folder.stat().st_mode & 0o077:
        folder.chmod(0o700)
    return folder


def _private_fd(path: Path, flags: int) -> int:
    private_folder(path.parent)
    fd = os.open(path, flags | os.O_CREAT, 0o600)
    if os.fstat(fd).st_mode & 0o077:
        os.fchmod(fd, 0o600)  # made by an older Legion, or by hand
    return fd


def open_private(path: Path, mode: str = "a+") -> IO[str]:
    """Open a text file of the state folder ("a" or "a+"), created 0600."""
    flags = os.O_APPEND | (os.O_RDWR if "+" in mode else os.O_WRONLY)
    return os.fdopen(_private_fd(path, flags), mode, encoding="utf-8")


def open_private_binary_append(path: Path) -> IO[bytes]:
    return os.fdopen(_private_fd(path, os.O_WRONLY | os.O_APPEND), "ab")


def write_private(path: Path, text: str) -> None:
    """Replace the file's text atomically, 0600: a new file of an unguessable name, created
    exclusively and never through a link (a session's folder is the session's to plant one
    in), renamed over the name, which replaces a link there rather than writing through it."""
    private_folder(path.parent)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def touch_private(path: Path) -> None:
    os.close(_private_fd(path, os.O_WRONLY))
    os.utime(path)
