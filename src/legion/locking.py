"""An exclusive lock on a file in the state dir, held for a `with` block: how Legion processes
(the daemon, `legion` commands, workers) take turns at dispatching and reconciling."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Block until no other process holds `path`'s lock; released when the block ends (or the
    process dies, so a crash never leaves it held)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
