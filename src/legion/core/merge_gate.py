"""Whether a pull request's CI lets it merge: the one rule every merge asks, on every forge
(`legion pr merge` by a person, the relay's merge for a finisher session). A failing or a
pending check holds it; no checks at all (a repository without CI) does not. Every check
gates, not only the ones a forge's branch protection marks required: Legion asks no forge
which those are, and a check a team keeps is a check it means. A person may merge anyway
(`--force`, logged under their name); a session never may. Pure."""

from __future__ import annotations

from collections.abc import Sequence

# How many check names a refusal lists before it says how many more.
NAMES_SHOWN = 5


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    more = len(names) - NAMES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def merge_refusal(
    number: int, failing: Sequence[str], pending: Sequence[str], *, person: bool
) -> str | None:
    """Why PR `number` may not merge now (one line), or None when its checks let it. `person`:
    whoever asks may force it (a session may not, and is told what to do instead)."""
    if failing:
        why = f"PR #{number} does not merge while its checks fail: {_names(failing)}"
    elif pending:
        why = f"PR #{number} does not merge while its checks run: {_names(pending)}"
    else:
        return None
    see = f"`legion pr checks {number}`"
    if person:
        return f"{why} ({see}; --force merges it anyway)"
    return (
        f"{why}: read them ({see} --log NAME), fix what fails, push, and stop; it merges "
        "once they pass"
    )
