"""Whether a worker's workspace still points where Legion put it (issue 35).

A worker writes its whole workspace, its `.git` file included. Pointed at a repository of its
own whose `core.worktree` is the user's home, git run there by the daemon would act on the
home (a checkpoint's `git add --all` would take it). So Legion runs git on a workspace only with
the git folders and work tree of its own records, and first checks that the link git itself
would follow is still the one it made: the workspace's `.git` a regular file naming the admin
folder Legion made for it (`<git folder>/worktrees/<name>`), that folder's `gitdir` file
naming the workspace's `.git` back, and its `commondir` naming the repository's git folder (git
takes the refs from what it names, whatever `GIT_COMMON_DIR` says). Pure: the facts as read
in, what was found out.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Literal

# What a path was found to be (by `lstat`: a link is a link, never what it points at).
Kind = Literal["folder", "file", "link", "missing", "other"]
_SHOWN = 120  # characters of a found path quoted in a finding


@dataclass(frozen=True)
class LinkFacts:
    """A workspace's link to its repository, as read (absolute paths, as strings)."""

    workspace: str  # the workspace folder Legion recorded
    workspace_kind: Kind
    admin: str  # the admin folder Legion made for it
    admin_kind: Kind
    admin_real: str  # the admin folder with every link on the way resolved
    dot_git_kind: Kind  # the workspace's `.git`
    dot_git_text: str | None  # its content, when a regular file that could be read
    back_text: str | None  # the admin folder's `gitdir` file, when it could be read
    common: str  # the repository's git folder, links resolved
    commondir_text: str | None  # the admin folder's `commondir` file, when it could be read


def _named(text: str | None, prefix: str, relative_to: str) -> str | None:
    """The one path a git link file names (`gitdir: <path>` in a `.git` file, the bare path in
    an admin folder's `gitdir`), made absolute as git would; None when it names none."""
    if text is None:
        return None
    lines = text.splitlines()
    if len(lines) != 1 or not lines[0].startswith(prefix):
        return None
    named = lines[0][len(prefix) :].strip()
    if not named:
        return None
    return posixpath.normpath(posixpath.join(relative_to, named))


def _shown(path: str) -> str:
    """A path the worker chose, quoted on one line: a newline or escape in it is shown as one."""
    printable = "".join(c if c.isprintable() else repr(c)[1:-1] for c in path)
    return printable if len(printable) <= _SHOWN else printable[:_SHOWN] + "…"


def tampering(facts: LinkFacts) -> str | None:
    """None when the workspace still points where Legion put it; else what was found, as a
    phrase ("its .git is a symbolic link"), for a report."""
    workspace = posixpath.normpath(facts.workspace)
    admin = posixpath.normpath(facts.admin)
    dot_git = posixpath.join(workspace, ".git")
    if facts.workspace_kind != "folder":
        return f"the workspace is {_kind_phrase(facts.workspace_kind)}, not a folder"
    if facts.dot_git_kind != "file":
        return f"its .git is {_kind_phrase(facts.dot_git_kind)}, not the file Legion wrote"
    named = _named(facts.dot_git_text, "gitdir:", workspace)
    if named is None:
        return "its .git names no git folder"
    if named != admin:
        return f"its .git points at {_shown(named)}, not at {admin}"
    if facts.admin_kind != "folder":
        return f"its git folder {admin} is {_kind_phrase(facts.admin_kind)}"
    if posixpath.normpath(facts.admin_real) != admin:
        return f"its git folder {admin} leads to {_shown(facts.admin_real)}"
    back = _named(facts.back_text, "", admin)
    if back != dot_git:
        found = "nothing" if back is None else _shown(back)
        return f"its git folder {admin} names {found} as its workspace, not {dot_git}"
    common = posixpath.normpath(facts.common)
    shared = _named(facts.commondir_text, "", admin)
    if shared != common:
        found = "nothing" if shared is None else _shown(shared)
        return f"its git folder {admin} names {found} as the repository's, not {common}"
    return None


def _kind_phrase(kind: Kind) -> str:
    return {
        "folder": "a folder (a repository of its own)",
        "file": "a file",
        "link": "a symbolic link",
        "missing": "gone",
        "other": "neither a file nor a folder",
    }[kind]
