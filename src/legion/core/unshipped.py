"""Whether a worker may say its mode is done with work left behind: an implementer (or its
retro) whose workspace holds changes not committed, or whose commits are not on its issue's
branch (the pull request's), would stop with its change unshipped, and the next worker would
review, or the finisher merge, what it never saw. Peers' users lose work exactly there. Pure:
what git said in, one refusal (a line that says what to do) out."""

from __future__ import annotations

from collections.abc import Sequence

from legion.core.model import Mode

# The modes whose work is commits on the branch.
SHIPPING_MODES = frozenset({Mode.IMPLEMENT, Mode.RETRO})
# How many changed paths a refusal names before it says how many more.
PATHS_SHOWN = 5


def unshipped_refusal(
    mode: Mode, branch: str | None, expected: str, changed: Sequence[str]
) -> str | None:
    """Why a worker in `mode` may not complete now, or None. `branch`: its workspace's
    checked-out branch (None: a detached HEAD); `expected`: its issue's branch; `changed`: the
    paths `git status` shows (modified, staged, or new and not ignored)."""
    if mode not in SHIPPING_MODES:
        return None
    if changed:
        shown = ", ".join(changed[:PATHS_SHOWN])
        more = len(changed) - PATHS_SHOWN
        shown += f" and {more} more" if more > 0 else ""
        return (
            f"your workspace has changes not committed ({shown}): commit them on {expected} "
            "(`git add -A && git commit`), or remove what is not the work (or ignore it in "
            ".gitignore), then complete again"
        )
    if branch is None or branch.casefold() != expected.casefold():  # `legion/LEG-1` is it too
        where = "a detached HEAD" if branch is None else f"branch {branch}"
        return (
            f"your commits are on {where}, not on {expected}, your pull request's branch: "
            f"`git switch {expected}` and bring them there (`git merge` or `git cherry-pick`), "
            "then complete again"
        )
    return None
