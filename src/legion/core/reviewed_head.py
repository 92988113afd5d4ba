"""Whether a merge lands what its approving review saw (issue 35). Pure.

When a review session approves a pull request, the relay records the head commit the branch
was at (`legion.forges.reviewed.ReviewedHeads`, in Legion's store). What a merge lands may
differ from that head in two ways the flow needs, and in no other without a new review:

- the retro's note, committed on the branch after the approval, under `docs/solutions/`;
- the base merged into the branch (the finisher resolving drift), when that merge is clean:
  merging the reviewed head with the base gives the same tree.

So the rule compares two trees, computed by git in the shell (`legion.forges.reviewed`): what
merging the reviewed head with the current base gives, and what the merge of the current
head with that base lands. The paths where they differ, but for notes under `docs/solutions/`,
were never reviewed: the merge is refused until a review session approves the new head.
"""

from __future__ import annotations

from collections.abc import Iterable

# The retro's notes: committed after the approval, and all a merge may add unreviewed.
SOLUTIONS_FOLDER = "docs/solutions/"
_SHOWN_PATHS = 3  # paths named in a refusal's line; the rest are counted


def after_review(path: str) -> bool:
    """Whether a change at `path` (relative to the repository's top, as git names it) may
    land without a new review: a file under `docs/solutions/`, never the folder itself."""
    return path.startswith(SOLUTIONS_FOLDER) and len(path) > len(SOLUTIONS_FOLDER)


def unreviewed_paths(differing: Iterable[str]) -> tuple[str, ...]:
    """The paths of `differing` that need a new review (sorted, once each)."""
    return tuple(sorted({path for path in differing if not after_review(path)}))


def merge_refusal(
    number: int, reviewed: str, differing: Iterable[str], *, reviewed_conflicts: bool = False
) -> str | None:
    """Why PR `number` may not be merged, in one line, when merging its reviewed head
    `reviewed` with the base differs from what the merge lands at `differing` paths (None: it
    may). `reviewed_conflicts`: merging the reviewed head with the base conflicts, so any
    landing differs where the conflict was resolved."""
    paths = unreviewed_paths(differing)
    if not paths:
        return None
    shown = ", ".join(paths[:_SHOWN_PATHS])
    more = len(paths) - _SHOWN_PATHS
    if more > 0:
        shown += f" and {more} more"
    why = (
        "the reviewed head conflicts with the base, and the resolution was not reviewed"
        if reviewed_conflicts
        else f"changed since: {shown}"
    )
    return (
        f"PR #{number}: the head changed after the review approved {reviewed[:12]} ({why}); "
        "a new review is needed: a review session approves the new head"
    )


def no_reviewed_head(number: int) -> str:
    """Why PR `number`, approved but with no head recorded by a review session, is not merged
    by a session."""
    return (
        f"PR #{number} has no approval recorded by a Legion review session (an approval given "
        "on the forge pins no head): a review session approves it, or a person merges it with "
        "their own `legion pr merge`"
    )
