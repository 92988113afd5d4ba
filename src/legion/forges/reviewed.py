"""The head an approving review saw, and the git that tells whether a merge lands only that
(issue 35; the rule is `legion.core.reviewed_head`).

The relay records the head when a review session approves (`ReviewedHeads`, a table of
Legion's store: never tracker or forge text, which a worker writes). At a session's merge it
hands that head to the forge, which computes, with the base and the head it is about to merge,
the two trees the rule compares (`reviewed_refusal`) and merges exactly the head it checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from legion.core.reviewed_head import merge_refusal
from legion.errors import GitError
from legion.git import GitPlace, last_line, rev_parse, run_git
from legion.store import Store, now


class ReviewedHeads:
    """The head commit each pull request's latest approving review saw, by PR number (with its
    branch: a number names one PR on one forge)."""

    def __init__(self, db: Store) -> None:
        self._db = db

    def record(self, number: int, branch: str, head: str) -> None:
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO reviewed_heads (pr_number, branch, head, reviewed_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (pr_number) DO UPDATE SET "
                "branch = excluded.branch, head = excluded.head, "
                "reviewed_at = excluded.reviewed_at",
                (number, branch, head, now()),
            )

    def forget(self, number: int) -> None:
        """A review that asked for changes: the approval before it no longer counts."""
        with self._db.write() as conn:
            conn.execute("DELETE FROM reviewed_heads WHERE pr_number = ?", (number,))

    def head(self, number: int, branch: str) -> str | None:
        """The head PR `number` on `branch` was approved at, or None when no review session
        approved it (or approved another PR of that number)."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT branch, head FROM reviewed_heads WHERE pr_number = ?", (number,)
            ).fetchone()
        return str(row["head"]) if row is not None and row["branch"] == branch else None


@dataclass(frozen=True)
class MergedTree:
    """What `git merge-tree --write-tree` gives for two commits: the tree (with conflict
    markers where they conflict) and whether they merge cleanly."""

    tree: str
    clean: bool


def merged_tree(repo: Path | GitPlace, base: str, head: str) -> MergedTree:
    """The tree merging `head` into `base` gives (git 2.38's `merge-tree --write-tree`)."""
    trial = run_git(
        repo,
        "merge-tree",
        "--write-tree",
        "--name-only",
        "--no-messages",
        base,
        head,
        check=False,
    )
    if trial.returncode not in (0, 1) or not trial.stdout.strip():
        raise GitError(f"git merge-tree failed: {last_line(trial.stderr or trial.stdout)}")
    return MergedTree(trial.stdout.splitlines()[0].strip(), trial.returncode == 0)


def differing_paths(repo: Path | GitPlace, one: str, other: str) -> list[str]:
    """The paths (files, links, submodules; renames as both names) where two trees differ."""
    diff = run_git(
        repo, "diff-tree", "-r", "-z", "--name-only", "--no-renames", one, other, check=False
    )
    if diff.returncode != 0:
        raise GitError(f"git diff-tree failed: {last_line(diff.stderr or diff.stdout)}")
    return [path for path in diff.stdout.split("\0") if path]


def reviewed_refusal(
    repo: Path | GitPlace, number: int, reviewed: str, base: str, landing: str
) -> str | None:
    """Why PR `number` may not land the tree `landing` (what merging its head into the commit
    `base` gives) when its review approved the commit `reviewed`; None when it may: merging
    `reviewed` into `base` gives `landing` but for notes under `docs/solutions/`."""
    if rev_parse(repo, reviewed) is None:
        return (
            f"PR #{number}: the reviewed head {reviewed[:12]} is not in this repository, so "
            "what changed after the review cannot be told; a new review is needed: a review "
            "session approves the current head"
        )
    expected = merged_tree(repo, base, reviewed)
    differing = differing_paths(repo, expected.tree, landing)
    return merge_refusal(number, reviewed, differing, reviewed_conflicts=not expected.clean)
