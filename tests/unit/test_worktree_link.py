"""The rule that says whether a workspace still points where Legion put it
(`legion.core.worktree_link.tampering`), from facts alone."""

from __future__ import annotations

import posixpath
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from legion.core.worktree_link import LinkFacts, tampering

WORKSPACE = "/home/u/proj-workspaces/leg-1"
ADMIN = "/home/u/proj/.git/worktrees/leg-1"
INTACT = LinkFacts(
    workspace=WORKSPACE,
    workspace_kind="folder",
    admin=ADMIN,
    admin_kind="folder",
    admin_real=ADMIN,
    dot_git_kind="file",
    dot_git_text=f"gitdir: {ADMIN}\n",
    back_text=f"{WORKSPACE}/.git\n",
    common="/home/u/proj/.git",
    commondir_text="../..\n",
)


def test_a_workspace_as_git_made_it_is_intact() -> None:
    assert tampering(INTACT) is None
    # Relative links (git's `worktree.useRelativePaths`) name the same folders.
    relative = replace(
        INTACT,
        dot_git_text="gitdir: ../../proj/.git/worktrees/leg-1\n",
        back_text="../../../../proj-workspaces/leg-1/.git\n",
        commondir_text="/home/u/proj/.git\n",
    )
    assert tampering(relative) is None


def test_each_way_of_pointing_elsewhere_is_named() -> None:
    cases = {
        "its .git points at /tmp/mine/.git, not at " + ADMIN: {
            "dot_git_text": "gitdir: /tmp/mine/.git\n"
        },
        "its .git is a symbolic link, not the file Legion wrote": {"dot_git_kind": "link"},
        "its .git is a folder (a repository of its own), not the file Legion wrote": {
            "dot_git_kind": "folder"
        },
        "its .git is gone, not the file Legion wrote": {"dot_git_kind": "missing"},
        "its .git names no git folder": {"dot_git_text": "gitdir: \n"},
        "the workspace is a symbolic link, not a folder": {"workspace_kind": "link"},
        f"its git folder {ADMIN} is a symbolic link": {"admin_kind": "link"},
        f"its git folder {ADMIN} leads to /tmp/mine": {"admin_real": "/tmp/mine"},
        f"its git folder {ADMIN} names /home/u/.git as its workspace, not {WORKSPACE}/.git": {
            "back_text": "/home/u/.git\n"
        },
        f"its git folder {ADMIN} names nothing as its workspace, not {WORKSPACE}/.git": {
            "back_text": None
        },
        f"its git folder {ADMIN} names {WORKSPACE}/.mine as the repository's, not "
        "/home/u/proj/.git": {"commondir_text": f"{WORKSPACE}/.mine\n"},
    }
    for expected, change in cases.items():
        assert tampering(replace(INTACT, **change)) == expected  # type: ignore[arg-type]


def test_what_was_found_is_said_on_one_line() -> None:
    """A link's target is the worker's to choose: a newline or an escape in it is shown as
    one, and a long one is cut."""
    moved = replace(INTACT, admin_real="/tmp/a\nb\x1b[2J")
    assert tampering(moved) == f"its git folder {ADMIN} leads to /tmp/a\\nb\\x1b[2J"
    long = replace(INTACT, dot_git_text="gitdir: /" + "x" * 500 + "\n")
    found = tampering(long)
    assert found is not None and len(found) < 250 and found.count("…") == 1


def test_a_second_line_is_not_read_past() -> None:
    """git reads a `.git` file's first line only; Legion reads none that has more."""
    doubled = replace(INTACT, dot_git_text=f"gitdir: {ADMIN}\ngitdir: /tmp/mine\n")
    assert tampering(doubled) == "its .git names no git folder"


@given(st.text(min_size=1, max_size=80))
def test_a_gitdir_line_naming_any_other_folder_is_tampered(named: str) -> None:
    facts = replace(INTACT, dot_git_text=f"gitdir: {named}\n")
    one_line = len(f"gitdir: {named}".splitlines()) == 1
    same = one_line and posixpath.normpath(posixpath.join(WORKSPACE, named.strip())) == ADMIN
    assert (tampering(facts) is None) == same
