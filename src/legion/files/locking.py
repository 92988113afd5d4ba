"""An exclusive lock on a file in the state dir, held for a `with` block: how Legion processes
(the daemon, `legion` commands, workers) take turns at dispatching and reconciling.

The holder writes who it is into the lock file, so a process that has to wait can say who it
waits for; and nobody waits forever: after `timeout` seconds the waiter gives up with an error
naming the holder.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from legion.errors import ConflictError
from legion.files.private import open_private

LOCK_TIMEOUT_S = 120.0
_POLL_S = 0.05
_SAY_AFTER_S = 2.0  # a wait shorter than this is not worth mentioning


def holder_of(path: Path) -> str:
    """Who holds (or last held) the lock, as its holder wrote it; "" when unknown."""
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


@contextmanager
def exclusive(
    path: Path,
    *,
    timeout: float = LOCK_TIMEOUT_S,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Hold `path`'s lock for the block; released when the block ends (or the process dies, so
    a crash never leaves it held). Waits up to `timeout` seconds for another holder, telling
    `on_wait` once who it waits for, then raises ConflictError naming the holder."""
    with open_private(path) as handle:
        started = time.monotonic()
        said = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - started
                if waited >= timeout:
                    raise ConflictError(
                        f"gave up after {timeout:g} s waiting for {path} "
                        f"(held by {holder_of(path) or 'another process'})"
                    ) from None
                if on_wait is not None and not said and waited >= _SAY_AFTER_S:
                    on_wait(
                        f"waiting for {path.name}, held by {holder_of(path) or 'another process'}"
                    )
                    said = True
                time.sleep(_POLL_S)
        try:
            handle.seek(0)
            handle.truncate()
            stamp = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
            command = " ".join(os.path.basename(arg) for arg in sys.argv[:3])
            handle.write(f"pid {os.getpid()} ({command}) since {stamp}\n")
            handle.flush()
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def exclusive_folder(folder: Path, *, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the lock of `folder` itself (`flock` on its descriptor) for the block: for a folder a
    session writes (`sessions/<id>/`), where a lock file could be a link it planted and the
    holder's line would be written through it. Nothing is written; a waiter gives up after
    `timeout` seconds with a ConflictError."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        started = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - started >= timeout:
                    raise ConflictError(
                        f"gave up after {timeout:g} s waiting for the lock of {folder}"
                    ) from None
                time.sleep(_POLL_S)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
