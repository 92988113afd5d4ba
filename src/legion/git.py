"""git, driven through argv lists only: no user text ever reaches a shell."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from legion.errors import LegionError, ToolMissingError


class GitError(LegionError):
    """A git command failed; the message carries git's own last words."""


@dataclass(frozen=True)
class GitResult:
    returncode: int
    stdout: str
    stderr: str


def run_git(repo: Path, *args: str, check: bool = True, input_text: str | None = None) -> GitResult:
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=repo,
            capture_output=True,
            text=True,
            input=input_text,
            check=False,
        )
    except FileNotFoundError:
        raise ToolMissingError(
            "git is not installed: install git (e.g. apt-get install git)"
        ) from None
    result = GitResult(proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        raise GitError(f"git {args[0]} failed: {last_line(proc.stderr or proc.stdout)}")
    return result


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def rev_parse(repo: Path, ref: str) -> str | None:
    """The commit `ref` names, or None when there is no such ref."""
    result = run_git(
        repo,
        "rev-parse",
        "--verify",
        "--quiet",
        "--end-of-options",
        f"{ref}^{{commit}}",
        check=False,
    )
    return result.stdout.strip() if result.returncode == 0 else None


def current_branch(repo: Path) -> str | None:
    result = run_git(repo, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    return result.stdout.strip() if result.returncode == 0 else None


def worktree_for_branch(repo: Path, branch: str) -> Path | None:
    """The working tree that has `branch` checked out, if any."""
    listing = run_git(repo, "worktree", "list", "--porcelain").stdout
    path: Path | None = None
    for line in listing.splitlines():
        if line.startswith("worktree "):
            path = Path(line.removeprefix("worktree "))
        elif line == f"branch refs/heads/{branch}" and path is not None:
            return path
    return None
