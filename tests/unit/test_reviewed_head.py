"""The rule a session's merge is held to (`legion.core.reviewed_head`): what lands may differ
from what the reviewed head merged with the base gives only by notes under `docs/solutions/`."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from legion.core.reviewed_head import (
    after_review,
    merge_refusal,
    no_reviewed_head,
    unreviewed_paths,
)

REVIEWED = "a" * 40
_PARTS = st.sampled_from(
    ["docs", "solutions", "src", "x.py", "..", ".", "", "docs/solutions", "solutions.md", "é"]
)
PATHS = st.lists(_PARTS, min_size=1, max_size=4).map("/".join)


def test_only_notes_under_docs_solutions_land_without_a_new_review() -> None:
    assert after_review("docs/solutions/leg-7-flaky-clock.md")
    assert after_review("docs/solutions/deeper/note.md")
    for path in (
        "docs/solutions",  # the folder itself made a file, or a link
        "docs/solutions/",
        "docs/solutions.md",
        "docs/solutionsX/note.md",
        "src/docs/solutions/note.md",
        "Docs/solutions/note.md",
        "docs/architecture.md",
        ".legion/config.toml",
    ):
        assert not after_review(path), path


def test_the_same_trees_or_only_a_note_may_merge() -> None:
    assert merge_refusal(3, REVIEWED, []) is None
    assert merge_refusal(3, REVIEWED, ["docs/solutions/leg-3-note.md"]) is None


def test_code_changed_after_the_review_is_refused_in_one_line_naming_it() -> None:
    why = merge_refusal(3, REVIEWED, ["src/app.py", "docs/solutions/n.md"])
    assert why is not None and "\n" not in why
    assert why.startswith(f"PR #3: the head changed after the review approved {REVIEWED[:12]}")
    assert "src/app.py" in why and "docs/solutions/n.md" not in why
    assert "a new review is needed" in why


def test_many_paths_are_counted_not_all_named() -> None:
    why = merge_refusal(9, REVIEWED, [f"src/m{n}.py" for n in range(10)])
    assert why is not None and "src/m0.py, src/m1.py, src/m2.py and 7 more" in why


def test_a_conflict_the_review_never_saw_resolved_is_said_as_such() -> None:
    why = merge_refusal(4, REVIEWED, ["src/app.py"], reviewed_conflicts=True)
    assert why is not None and "conflicts with the base" in why


def test_an_approval_given_on_the_forge_pins_nothing() -> None:
    why = no_reviewed_head(5)
    assert "PR #5" in why and "review session" in why and "\n" not in why


@given(st.lists(PATHS, max_size=8))
def test_a_merge_goes_exactly_when_every_differing_path_is_a_note(paths: list[str]) -> None:
    why = merge_refusal(1, REVIEWED, paths)
    notes_only = all(
        path.startswith("docs/solutions/") and path != "docs/solutions/" for path in paths
    )
    assert (why is None) == notes_only
    assert set(unreviewed_paths(paths)) == {p for p in paths if not after_review(p)}
    if why is not None:
        assert "\n" not in why and unreviewed_paths(paths)[0] in why
