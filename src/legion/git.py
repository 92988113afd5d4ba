"""git, driven through argv lists only: no user text ever reaches a shell.

Workers write to the repository Legion runs git in: their worktrees share its git folder, so a
worker can write `.git/hooks/*`, `.git/config` and `.git/info/attributes`. Every git command
Legion runs therefore runs (1) with hooks off (`core.hooksPath=/dev/null`), (2) with the
repository's own settings that make git run a program overridden (`safety_overrides`), and (3)
with only the environment git needs (`git_env`: no API keys or tokens). The user's global and
system settings (an ssh command, credential helpers, signing) still apply: only a worker cannot
write those.

A worker also writes its workspace's `.git` file, which says which repository git finds there.
So git on a workspace never finds its repository by itself: it runs at a `GitPlace`, its git
folders and work tree named outright from Legion's own records, after `checked_worktree` found
the workspace's `.git` still pointing where Legion put it (`legion.core.worktree_link`).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from legion.core.worktree_link import Kind, LinkFacts, tampering
from legion.errors import GitError, TamperedWorkspaceError, ToolMissingError


@dataclass(frozen=True)
class GitResult:
    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class GitPlace:
    """Where a git command runs, named outright rather than found from a folder: git's own
    folder (a worktree's admin folder, or the repository's), the repository's shared folder
    (objects, refs, config) and the work tree. Given to git as `GIT_DIR`, `GIT_COMMON_DIR`
    and `GIT_WORK_TREE`, they win over anything in the work tree (a `.git` file) or in the
    repository's config (`core.worktree`), which a worker can write."""

    git_dir: Path
    common_dir: Path
    work_tree: Path

    def env(self) -> dict[str, str]:
        return {
            "GIT_DIR": str(self.git_dir),
            "GIT_COMMON_DIR": str(self.common_dir),
            "GIT_WORK_TREE": str(self.work_tree),
        }


# Always: no hooks, no fsmonitor daemon, no `ext::` transport (a URL that is a command), and no
# recursion into submodules (whose git folders a worker can write too).
ALWAYS = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "protocol.ext.allow=never",
    "submodule.recurse=false",
    "fetch.recurseSubmodules=false",
    "push.recurseSubmodules=no",
)
# Settings that name a program git runs, when the repository (not the user) sets them: git gets
# the user's global/system value instead, else the default here (None: `cat` as the pager, `:`
# as the editor; Legion's commands never page or edit anyway).
_PROGRAM_SETTINGS: tuple[tuple[re.Pattern[str], str | None], ...] = (
    (re.compile(r"core\.sshcommand"), "ssh"),
    (re.compile(r"core\.askpass"), ""),
    (re.compile(r"core\.gitproxy"), ""),
    (re.compile(r"core\.alternaterefscommand"), ""),
    (re.compile(r"core\.(?:editor|pager)"), None),
    (re.compile(r"sequence\.editor"), None),
    (re.compile(r"filter\..+\.(?:clean|smudge|process)"), ""),  # empty: no filter
    (re.compile(r"filter\..+\.required"), "false"),
    (re.compile(r"merge\..+\.driver"), "false"),  # a conflict, reported as one
    (re.compile(r"diff\.external"), ""),
    (re.compile(r"diff\..+\.(?:textconv|command)"), ""),
    (re.compile(r"gpg\.program"), "gpg"),
    (re.compile(r"gpg\.openpgp\.program"), "gpg"),
    (re.compile(r"gpg\.x509\.program"), "gpgsm"),
    (re.compile(r"gpg\.ssh\.program"), "ssh-keygen"),
    (re.compile(r"gpg\.ssh\.defaultkeycommand"), ""),
)
# For these the first value git reads wins, so no `-c` can replace the repository's: the
# command's own option does, on the commands that use them.
_PACK_PROGRAMS = (
    (re.compile(r"remote\..+\.receivepack"), ("push",), "--receive-pack=git-receive-pack"),
    (
        re.compile(r"remote\..+\.uploadpack"),
        ("fetch", "pull", "ls-remote"),
        "--upload-pack=git-upload-pack",
    ),
)
_HELPER = re.compile(r"credential\.(?:.+\.)?helper")
_REPOSITORY_SCOPES = ("local", "worktree")

# The environment git gets: what finds programs, the user's config, identity, ssh agent,
# proxies and certificates. Nothing else: the daemon holds API keys git never needs.
_ENV_NAMES = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "EMAIL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
        "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR", "SSH_AUTH_SOCK", "SSH_ASKPASS", "DISPLAY",
        "WAYLAND_DISPLAY", "GNUPGHOME", "GPG_TTY", "SSL_CERT_FILE", "SSL_CERT_DIR",
        "CURL_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
        "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    }
)  # fmt: skip
_CREDENTIAL_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL", re.IGNORECASE)


def git_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The part of `env` (default: this process's) git needs: never an API key or a token."""
    source = os.environ if env is None else env
    return {
        name: value
        for name, value in source.items()
        if (name in _ENV_NAMES or name.startswith(("LC_", "GIT_")))
        and not _CREDENTIAL_NAME.search(name)
    }


def safety_overrides(
    repo: Path, env: Mapping[str, str], command: str = "", *, timeout: float | None = None
) -> tuple[list[str], list[str]]:
    """Arguments that turn off every way the repository's own git folder could make git run a
    program: `-c` settings (before the command) and the command's own options (after it).
    Hooks always; program settings the repository (local or worktree scope) sets, replaced by
    the user's global one or git's default; its credential helpers dropped (the user's own are
    kept)."""
    args = [arg for setting in ALWAYS for arg in ("-c", setting)]
    options: list[str] = []
    listing = subprocess.run(
        ["git", "config", "--list", "--show-scope", "-z"],
        cwd=repo,
        capture_output=True,
        env=env,
        check=False,
        timeout=timeout,
    )
    outer: dict[str, str] = {}  # global/system values, last one wins as in git
    helpers: list[tuple[str, str]] = []  # the user's credential helpers, in order
    repository_keys: set[str] = set()
    fields = listing.stdout.decode("utf-8", "replace").split("\0")
    for scope, entry in zip(fields[0::2], fields[1::2], strict=False):
        key, _, value = entry.partition("\n")
        if _HELPER.fullmatch(key):
            if scope in _REPOSITORY_SCOPES:
                repository_keys.add("credential.helper")
            else:
                helpers.append((key, value))
        elif scope in _REPOSITORY_SCOPES:
            repository_keys.add(key)
        elif scope in ("system", "global", "command"):
            outer[key] = value
    for key in sorted(repository_keys):
        for pattern, commands, option in _PACK_PROGRAMS:
            if pattern.fullmatch(key) and key not in outer and command in commands:
                options.append(option)
        if key == "credential.helper":
            # An empty helper empties the list so far; then the user's own again.
            args += ["-c", "credential.helper="]
            args += [arg for name, value in helpers for arg in ("-c", f"{name}={value}")]
            continue
        for pattern, default in _PROGRAM_SETTINGS:
            if pattern.fullmatch(key):
                chosen = outer.get(key, default)
                if chosen is None:
                    chosen = "cat" if key == "core.pager" else ":"  # no pager, no editor
                args += ["-c", f"{key}={chosen}"]
                if key == "gpg.ssh.defaultkeycommand" and key not in outer:
                    # No key to sign with but the one a command would name: do not sign.
                    args += ["-c", "commit.gpgSign=false", "-c", "tag.gpgSign=false"]
                break
    return args, sorted(set(options))


# What runs git confined (`legion.sandbox.git_jail`): the argv of git, wrapped.
Wrap = Callable[[list[str]], list[str]]
# How long git may take on a `GitPlace` (a workspace, whose files, index and HEAD a worker
# writes: a pipe planted where git reads would hold it for ever), unless a caller says.
PLACE_TIMEOUT_S = 600.0


def run_git(
    repo: Path | GitPlace,
    *args: str,
    check: bool = True,
    input_text: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    wrap: Wrap | None = None,
) -> GitResult:
    """`git ARGS` in `repo` (a folder, where git finds its repository itself: the user's
    checkout; or a `GitPlace`, where it finds nothing), safe from the repository's own settings
    (`safety_overrides`); `env`: variables added (`GIT_INDEX_FILE`, say) to what git gets of
    this process's. On what a worker writes: `timeout` (seconds: a pipe it planted where git
    reads would hold git, and the daemon, for ever; a GitError past it) and `wrap` (git run
    confined, seeing only what the command needs: `legion.sandbox.git_jail`)."""
    if isinstance(repo, GitPlace):
        cwd, env = repo.work_tree, git_env() | repo.env() | dict(env or {})
        timeout = PLACE_TIMEOUT_S if timeout is None else timeout
    else:
        cwd, env = repo, git_env() | dict(env or {})
    try:
        settings, options = safety_overrides(cwd, env, args[0] if args else "", timeout=timeout)
        argv = ["git", *settings, *args[:1], *options, *args[1:]]
        proc = subprocess.run(
            wrap(argv) if wrap is not None else argv,
            cwd=cwd,
            capture_output=True,
            text=True,
            input=input_text,
            env=env,
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took over {timeout:.0f} s: stopped") from None
    except FileNotFoundError:
        raise ToolMissingError(
            "git is not installed: install git (e.g. apt-get install git)"
        ) from None
    result = GitResult(proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        raise GitError(f"git {args[0]} failed: {last_line(proc.stderr or proc.stdout)}")
    return result


def main_git_dir(root: Path) -> Path | None:
    """The git folder of the repository whose main working tree is `root` (the project's, the
    user's checkout), links resolved: `<root>/.git` when it is a folder, as it almost always
    is; else what git says (a checkout that is itself a linked worktree). None when `root` is
    in no repository."""
    dot_git = root / ".git"
    if dot_git.is_dir() and not dot_git.is_symlink():
        return dot_git.resolve()
    found = run_git(root, "rev-parse", "--path-format=absolute", "--git-common-dir", check=False)
    if found.returncode != 0 or not found.stdout.strip():
        return None
    return Path(found.stdout.strip()).resolve()


_LINK_FILE_MAX = 4096  # a `.git` or `gitdir` file git wrote is one short line


def _kind(path: Path) -> Kind:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "other"
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "folder"
    return "file" if stat.S_ISREG(mode) else "other"


def _read_link_file(path: Path) -> str | None:
    """A small regular file's text, read without following a link or waiting on a pipe
    (`legion.files.worker_written`); None when it is not one."""
    from legion.files.worker_written import read_regular

    try:
        data = read_regular(path.parent, path.name, cap=_LINK_FILE_MAX, past_cap="head")
    except OSError:
        return None
    return data.decode("utf-8", "replace")


def worktree_link_facts(common_dir: Path, workspace: Path, admin: Path) -> LinkFacts:
    """What the workspace's `.git` and its admin folder's `gitdir` and `commondir` are and
    say, as found."""
    return LinkFacts(
        workspace=str(workspace),
        workspace_kind=_kind(workspace),
        admin=str(admin),
        admin_kind=_kind(admin),
        admin_real=os.path.realpath(admin),
        dot_git_kind=_kind(workspace / ".git"),
        dot_git_text=_read_link_file(workspace / ".git"),
        back_text=_read_link_file(admin / "gitdir"),
        common=str(common_dir),
        commondir_text=_read_link_file(admin / "commondir"),
    )


def checked_worktree(common_dir: Path, workspace: Path, admin: Path) -> GitPlace:
    """The place to run git on the linked worktree Legion made at `workspace` (admin folder
    `admin` in the repository's git folder `common_dir`), once its `.git` was found still
    pointing there; a TamperedWorkspaceError saying what was found, else."""
    # Git writes the paths of both links with every link on the way resolved; the folder
    # the workspace is in is Legion's, the workspace itself may not be resolved (a worker's).
    workspace = workspace.parent.resolve() / workspace.name
    found = tampering(worktree_link_facts(common_dir, workspace, admin))
    if found is not None:
        raise TamperedWorkspaceError(
            f"workspace {workspace} was tampered with ({found}): Legion leaves it alone"
        )
    return GitPlace(git_dir=admin, common_dir=common_dir, work_tree=workspace)


def worktree_place(repo: Path, path: Path) -> GitPlace:
    """Where to run git on a working tree of `repo`'s repository found at `path` (where `git
    worktree list` says a branch is checked out: read from the git folder, which a worker
    writes): the main one, or a linked one whose admin folder names `path` and is named back
    (`checked_worktree`); a TamperedWorkspaceError when `path` is neither, a GitError when
    `repo` is in no repository."""
    common = main_git_dir(repo)
    if common is None:
        raise GitError(f"{repo} is not in a git repository")
    dot_git = path / ".git"
    if dot_git.is_dir() and not dot_git.is_symlink() and dot_git.resolve() == common:
        return GitPlace(git_dir=common, common_dir=common, work_tree=path)
    wanted = os.path.normpath(path.parent.resolve() / path.name / ".git")
    try:
        admins = sorted((common / "worktrees").iterdir())
    except OSError:
        admins = []
    for admin in admins:
        named = _read_link_file(admin / "gitdir")
        if named is not None and os.path.normpath(named.strip()) == wanted:
            return checked_worktree(common, path, admin)
    raise TamperedWorkspaceError(f"{path} is no working tree of {common}: Legion leaves it alone")


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def rev_parse(repo: Path | GitPlace, ref: str) -> str | None:
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


def current_branch(repo: Path | GitPlace) -> str | None:
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


def is_ancestor(repo: Path | GitPlace, ancestor: str, descendant: str) -> bool:
    """Whether commit `ancestor` is `descendant` or in its history."""
    return (
        run_git(repo, "merge-base", "--is-ancestor", ancestor, descendant, check=False).returncode
        == 0
    )


def fast_forward(repo: Path, branch: str, target: str) -> str | None:
    """Move the local `branch` up to the commit `target` where that is safe: only forward (the
    branch strictly behind), and where it is checked out, only in a working tree without
    local changes (by `merge --ff-only` there, so the files follow). None when the branch is
    at `target` now (or does not exist); else why it was left where it is."""
    local = rev_parse(repo, f"refs/heads/{branch}")
    if local is None or local == target:
        return None
    if not is_ancestor(repo, local, target):
        return f"{branch} has commits the merged base lacks"
    checked_out = worktree_for_branch(repo, branch)
    if checked_out is None:
        moved = run_git(
            repo,
            "update-ref",
            "-m",
            "legion: fast-forward to the merged base",
            f"refs/heads/{branch}",
            target,
            local,
            check=False,
        )
        return None if moved.returncode == 0 else f"git refused: {last_line(moved.stderr)}"
    try:
        place = worktree_place(repo, checked_out)
    except TamperedWorkspaceError as exc:
        return str(exc)
    changes = run_git(place, "status", "--porcelain", "--untracked-files=no", check=False)
    if changes.returncode != 0 or changes.stdout.strip():
        return f"{branch} is checked out in {checked_out} with local changes"
    forward = run_git(place, "merge", "--ff-only", "--quiet", target, check=False)
    if forward.returncode != 0:
        return f"git refused in {checked_out}: {last_line(forward.stderr or forward.stdout)}"
    return None
