"""Each issue's own repository (issue 35): what a worker writes of git, and nothing else.

A worker commits, so it writes git objects and its branch. Were those the project's repository's
own (a worktree of it), it could move every other issue's `legion/` branch and replace any
object file (git does not check an object's hash when it reads it) under a name the base
branch's history uses. So each issue's workspace is a worktree of a repository of its own:
`<the project's git folder>/legion/issues/<issue>.git`, bare, borrowing the project's objects
read-only (`objects/info/alternates`), holding the issue's branch, the base branch as the
daemon last set it, and the objects the worker made. Inside the sandbox the worker writes only
its objects, refs and logs and its worktree's admin folder (`sandbox_parts`); its config, its
alternates and everything else are Legion's and read-only.

The project's repository takes the worker's branch only by a fetch (`bring_home`), which checks
every object it takes, run before Legion reads the branch there (a pull request made, reviewed,
merged or pushed; a workspace checked before it is removed; a checkpoint taken). The daemon
writes into an issue's repository only while no worker of the issue runs: when it makes it,
and at a session's start (the base branch, `set_base`), its folders checked to be folders
first.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from legion.core.ids import issue_for_branch
from legion.errors import ConflictError, GitError, InputError
from legion.git import GitPlace, GitResult, checked_worktree, last_line, main_git_dir, run_git
from legion.sandbox import git_jail

ISSUES = ("legion", "issues")
# A fetch from a worker's repository checks each object's hash (as every fetch does) and its
# form too: no tree naming `.git` or `..`, no malformed commit, for your checkout to meet later.
_CHECKED = {
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "transfer.fsckObjects",
    "GIT_CONFIG_VALUE_0": "true",
}
# Legion's own ref updates in an issue's repository keep no log (see `set_refs`).
_NO_LOG = {
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "core.logAllRefUpdates",
    "GIT_CONFIG_VALUE_0": "false",
}
# How long taking a worker's work may run: a pipe it planted where git reads would hold the
# fetch for ever.
FETCH_TIMEOUT_S = 300.0
# A fetch that lost a race for its ref to another of Legion's (`_fetch`) is tried again, a few
# times, a little later each time.
_RACED = "cannot lock ref"
_FETCH_ATTEMPTS = 5
_RACE_PAUSE_S = 0.05
# What of the project's own config an issue's repository carries (copied when it is made): who
# commits, and how files are written. Never a setting that names a program (hooks, filters,
# fsmonitor...): those stay the project's, which the daemon's own git never runs either.
CARRIED_SETTINGS = (
    "user.name",
    "user.email",
    "core.autocrlf",
    "core.eol",
    "core.safecrlf",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.quotepath",
    "i18n.commitencoding",
    "merge.conflictstyle",
    "diff.algorithm",
)


_CARRIED = frozenset(key.lower() for key in CARRIED_SETTINGS)
_REMOTE_SETTING = re.compile(r"remote\..+\.(?:url|pushurl|fetch)", re.IGNORECASE)


def repo_of(git_dir: Path, issue: str) -> Path:
    """Where the issue's repository is, in the project's git folder `git_dir` (`issue`: its
    identifier, or its workspace's folder name)."""
    name = issue.lower()
    if not name or "/" in name or name.startswith("."):
        raise InputError(f"no issue repository is named {issue!r}")
    return git_dir.joinpath(*ISSUES, f"{name}.git")


def _is_folder(path: Path) -> bool:
    """A real folder (`lstat`: a link to one is not)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def exists(repo: Path) -> bool:
    return _is_folder(repo)


def run_bare(repo: Path, *args: str, check: bool = True) -> str:
    """`git ARGS` on the issue's repository itself, named outright."""
    return run_git(repo, *args, check=check, env={"GIT_DIR": str(repo)}).stdout


def _carried(project_root: Path) -> list[tuple[str, str]]:
    """What of the project's own config (its local scope: the user's global config applies to
    every repository anyway) an issue's repository carries: `CARRIED_SETTINGS`, and its remotes
    (where they are, and what they fetch: a worker that can reach one pushes its branch and
    fetches the base as in the project's own clone)."""
    listing = run_git(project_root, "config", "-z", "--local", "--list", check=False).stdout
    found: list[tuple[str, str]] = []
    for entry in filter(None, listing.split("\0")):
        key, _, value = entry.partition("\n")
        if key.lower() in _CARRIED or _REMOTE_SETTING.fullmatch(key):
            found.append((key, value))
    return found


def _quoted(text: str, *, value: bool = True) -> str:
    """`text` quoted as a value of a git config file (or, `value=False`, as a subsection name,
    where git reads only `\\` and `\"` as escapes)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    if value:
        escaped = escaped.replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def config_text(settings: Sequence[tuple[str, str]]) -> str:
    """Pure: `settings` (`section.name` or `section.subsection.name`, value) as the lines of a
    git config file, in order, one section header each."""
    lines: list[str] = []
    for key, value in settings:
        section, _, rest = key.partition(".")
        subsection, _, name = rest.rpartition(".")
        header = f"[{section} {_quoted(subsection, value=False)}]" if subsection else f"[{section}]"
        lines += [header, f"\t{name} = {_quoted(value)}"]
    return "".join(f"{line}\n" for line in lines)


def create(git_dir: Path, project_root: Path, issue: str) -> Path:
    """Make the issue's repository (an empty, bare one borrowing the project's objects, its
    config Legion's), unless it exists; its path."""
    repo = repo_of(git_dir, issue)
    if exists(repo):
        return repo
    repo.parent.mkdir(parents=True, exist_ok=True)
    # No template: no sample hooks, nothing but what git needs.
    run_git(project_root, "init", "--quiet", "--bare", "--template=", str(repo))
    (repo / "objects" / "info").mkdir(exist_ok=True)
    (repo / "objects" / "info" / "alternates").write_text(f"{git_dir / 'objects'}\n")
    for folder in ("logs", "refs/heads", "refs/tags", "worktrees"):
        (repo / folder).mkdir(parents=True, exist_ok=True)
    settings = [
        *_carried(project_root),
        # A worker's commits keep reflogs; no automatic gc (its packed refs are not its own).
        ("core.logAllRefUpdates", "true"),
        ("gc.auto", "0"),
    ]
    with open(repo / "config", "a", encoding="utf-8") as config:  # made just now, by git
        config.write(config_text(settings))
    return repo


def place_at(git_dir: Path, workspace: Path) -> GitPlace | None:
    """Where to run git on the workspace at `workspace` when it is a worktree of its issue's
    repository, once its links were found as Legion made them (a TamperedWorkspaceError, else);
    None when its issue has no repository here."""
    repo = repo_of(git_dir, workspace.name)
    if not exists(repo):
        return None
    return checked_worktree(repo, workspace, repo / "worktrees" / workspace.name)


def set_refs(repo: Path, refs: Mapping[str, str]) -> None:
    """Set refs of the issue's repository (full names, to commits the project's objects hold),
    while no worker of the issue runs. Whatever the worker left where git reads or writes for
    them is not followed: a folder on the way that is no folder is refused, a ref that is no
    regular file (a link, a pipe) is removed first, and so is its log (git appends to a log
    through a link), and none is written."""
    for ref, commit in refs.items():
        for tree in (repo, repo / "logs"):
            folder = tree
            for part in ref.split("/")[:-1]:
                folder = folder / part
                if os.path.lexists(folder) and not _is_folder(folder):
                    raise ConflictError(
                        f"{repo} was tampered with ({folder} is not a folder): "
                        "Legion leaves it alone"
                    )
        log = repo / "logs" / ref
        if os.path.lexists(log):
            os.unlink(log)
        if os.path.lexists(repo / ref) and not _is_regular(repo / ref):
            os.unlink(repo / ref)
        run_git(repo, "update-ref", "--no-deref", ref, commit, env=_NO_LOG | {"GIT_DIR": str(repo)})


def _fetch(git_dir: Path, repo: Path, what: str, *wanted: str) -> None:
    """Fetch `wanted` (`what`, to say) from the issue's repository `repo` into the project's
    (`git_dir`), run confined (`legion.sandbox.git_jail`): the worker's refs and objects, links
    and all, are read where only the issue's repository (read-only) and the project's git
    folder exist, so no link it planted leads to another repository, a secret or a device;
    and bounded in time. A ConflictError saying why when it fails.

    Several of Legion's processes bring the same branch home at once (the relay before a
    `worker-done`, the checkpoint step, the forge, a person's `legion pr`); git refuses the
    one whose ref moved under it (`cannot lock ref`), and that one is run again: the worker's
    value wins either way. Not a lock: every lock a worker can read (it reads the project's
    git folder) it can hold, and so stop every issue's branch from coming home."""
    jail = git_jail(writable=[git_dir], readable=[repo])
    for attempt in range(_FETCH_ATTEMPTS):
        try:
            fetched = run_git(
                git_dir, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-auto-gc",
                str(repo), *wanted, check=False, env=_CHECKED | {"GIT_DIR": str(git_dir)},
                timeout=FETCH_TIMEOUT_S, wrap=jail,
            )  # fmt: skip
        except GitError as exc:  # timed out, say: never tried again (5 x 300 s)
            fetched = GitResult(1, "", str(exc))
            break
        if fetched.returncode == 0 or _RACED not in fetched.stderr:
            break
        time.sleep(_RACE_PAUSE_S * (attempt + 1))
    if fetched.returncode != 0:
        raise ConflictError(
            f"cannot take {what} from its workspace's repository {repo}: "
            f"{last_line(fetched.stderr or fetched.stdout)}"
        )


def bring_home(project_root: Path, branch: str) -> None:
    """Fetch the worker's `branch` from its issue's repository into the project's (the
    worker's value wins: its branch is its own), checking every object taken. Nothing to do
    for a branch with no issue repository here (not an issue's, an issue worked on another
    host, or whose workspace is gone): the project's branch is the one there is. A
    ConflictError when the fetch fails (the branch deleted in the workspace, say)."""
    issue = issue_for_branch(branch)
    git_dir = main_git_dir(project_root) if issue is not None else None
    if issue is None or git_dir is None:
        return
    repo = repo_of(git_dir, issue)
    if exists(repo):
        ref = f"refs/heads/{branch}"
        _fetch(git_dir, repo, branch, f"+{ref}:{ref}")


def fetch_commit(git_dir: Path, repo: Path, commit: str) -> None:
    """Make sure the project's repository (its git folder `git_dir`) has `commit` (a
    workspace's HEAD), fetched from the issue's repository when it has not (as `bring_home`)."""
    has = run_git(git_dir, "cat-file", "-e", f"{commit}^{{commit}}", check=False,
                  env={"GIT_DIR": str(git_dir)})  # fmt: skip
    if has.returncode != 0:
        _fetch(git_dir, repo, f"commit {commit[:12]}", commit)


def sandbox_parts(repo: Path, workspace: Path) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """What of the issue's repository its worker writes (its objects, refs and logs, and its
    worktree's admin folder: HEAD and index), and what inside those it only reads (where the
    objects it borrows are named)."""
    own = (repo / "objects", repo / "refs", repo / "logs", repo / "worktrees" / workspace.name)
    writable = tuple(part for part in own if _is_folder(part))
    kept = tuple(part for part in (repo / "objects" / "info",) if _is_folder(part))
    return writable, kept


def delete(repo: Path) -> None:
    """Remove the issue's repository (its workspace removed, nothing in it left to keep)."""
    if exists(repo):
        shutil.rmtree(repo)  # never follows a link in it
