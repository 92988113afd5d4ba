"""The first process of a worker window: `python -m legion.runtime.launch SPEC`.

The spec (argv, working directory, environment) is written by the dispatcher to a private
file that this process reads and deletes at once. That keeps the worker's environment, which
may hold API keys, out of every command line `ps` can show, and lets the worker inherit the
dispatcher's environment rather than whatever the tmux server started with.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path


def write_spec(folder: Path, argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{secrets.token_hex(8)}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"argv": list(argv), "cwd": str(cwd), "env": dict(env)}, handle)
    return path


def command(spec: Path) -> list[str]:
    """The window's argv: this module under the same Python that runs Legion."""
    return [sys.executable, "-m", "legion.runtime.launch", str(spec)]


def main(args: Sequence[str]) -> int:
    if len(args) != 1:
        print("usage: python -m legion.runtime.launch SPEC", file=sys.stderr)
        return 2
    path = Path(args[0])
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"legion: cannot read launch spec {path}: {exc}", file=sys.stderr)
        return 1
    finally:
        path.unlink(missing_ok=True)
    os.chdir(spec["cwd"])
    argv = spec["argv"]
    try:
        os.execvpe(argv[0], argv, spec["env"])
    except OSError as exc:
        print(f"legion: cannot start {argv[0]}: {exc}", file=sys.stderr)
        return 127
    return 0  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
