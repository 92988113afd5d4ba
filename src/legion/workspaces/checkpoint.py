"""A workspace's checkpoint: everything in it and its sessions' transcripts, as one commit on a
Legion ref beside the issue's branch, never on it (issue 22: an issue outlives the host it ran
on).

What a checkpoint holds: the files as they are, committed or not: changes not committed, new
files not yet added (unless ignored), files deleted; and the transcript of each session of the
issue this host has (Claude Code's session file, Codex's rollout: the planner's, the
implementer's, the reviewer's...), so a host that takes the issue over can resume whichever
comes next. Its commit's parent is the workspace's HEAD when it was taken; its tree is
`workspace/` (the files) and `sessions/<session id>.jsonl`. It is
written with an index of its own, so the workspace's index (what is staged) and its branch
are left as they were. The ref is `refs/legion/checkpoints/<ISSUE>`, one per issue, replaced by
each checkpoint, and goes to a remote like any ref (`push`, `fetch`): restoring on another
machine needs only that remote.

In a fleet the issue's branch travels too (`send_branch`, `take_branch`): the host that runs
the issue sends it to the shared remote with each checkpoint and when its pull request is made,
so what a pull request holds is never only on one host.

Restoring lays the checkpoint into a workspace of the issue's branch (a new one, on the host
that takes the issue over), unless that branch went on after the checkpoint was taken
(`newer_branch`: commits made and sent since): then the branch is kept as it is, and only the
transcripts are laid. Else its branch is set to the checkpoint's base (what was committed
then) and its files to what they were, the changes left uncommitted (none staged). Each
transcript goes where the CLI will resume its session from. What changed after the newer of
the two is not there: that is the work a lost host loses. (Laid into a workspace that has files
the checkpoint does not know, those are left as they are.)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from legion.core.model import normalize_identifier
from legion.errors import ConflictError
from legion.files.worker_written import open_regular, read_transcript, replace_file, transcript_home
from legion.git import GitPlace, Wrap, is_ancestor, last_line, rev_parse, run_git
from legion.sandbox import git_jail
from legion.workspaces import issue_repo

CHECKPOINT_REFS = "refs/legion/checkpoints/"
# The checkpoint each issue's ref on the shared remote held when this host last sent or took it.
SENT_REFS = "refs/legion/checkpoints-sent/"
FILES = "workspace"
SESSIONS = "sessions"
# A transcript past this is not checkpointed (and said so): a checkpoint holds a whole one.
TRANSCRIPT_BYTES = 256 * 1024 * 1024

# Who a checkpoint's commit is by: Legion, whatever identity the user's git has (or lacks).
_IDENTITY = {
    "GIT_AUTHOR_NAME": "Legion",
    "GIT_AUTHOR_EMAIL": "legion@localhost",
    "GIT_COMMITTER_NAME": "Legion",
    "GIT_COMMITTER_EMAIL": "legion@localhost",
}


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint as written or found: its ref, its commit, the HEAD it was taken on, and
    the sessions whose transcripts it holds (their ids, sorted)."""

    ref: str
    commit: str
    base: str
    sessions: tuple[str, ...]
    # Transcripts left out as not the CLI's (a link, not a regular file, too big): why, each.
    refused: tuple[str, ...] = ()


def checkpoint_ref(issue: str) -> str:
    return CHECKPOINT_REFS + normalize_identifier(issue)


def save(
    workspace: GitPlace,
    issue: str,
    transcripts: Mapping[str, Path] | None = None,
    *,
    home: GitPlace,
) -> Checkpoint:
    """Checkpoint `workspace` (a git worktree of the issue's branch, its git folders named:
    `GitWorktrees.place_of`, never found from the workspace) and `transcripts` (by session id;
    those that exist) on the issue's ref, in `home`: the repository Legion keeps it in, the
    workspace as its work tree (`GitWorktrees.home_place`: the project's, never the issue's
    repository a worker writes). The workspace, its index and its branch are left
    untouched."""
    # The workspace's HEAD, read where a link planted in its repository leads nowhere else.
    seen = git_jail(
        writable=[], readable=[workspace.work_tree, workspace.common_dir, home.common_dir]
    )
    head = run_git(
        workspace, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False, wrap=seen
    )
    base = head.stdout.strip() if head.returncode == 0 else None
    if not base:
        raise ConflictError(f"{workspace.work_tree} has no commit to checkpoint on")
    if home.common_dir != workspace.common_dir:
        # The worker's commits, into Legion's repository by a fetch that checks each object.
        issue_repo.fetch_commit(home.common_dir, workspace.common_dir, base)
    with tempfile.TemporaryDirectory(prefix="legion-checkpoint-") as scratch:
        # Git on the worker's files runs confined: only the workspace (read-only), Legion's
        # repository and this scratch folder exist for it, so a path in the index copied
        # below, or a link, that leads out of the workspace finds nothing there.
        jail = git_jail(writable=[home.common_dir, Path(scratch)], readable=[workspace.work_tree])
        index = os.path.join(scratch, "index")
        own_index = {"GIT_INDEX_FILE": index}
        # A copy of the workspace's index, whose file stamps spare hashing every file again;
        # without one (or when it names what only the worker's repository holds: staged, not
        # committed), HEAD's tree.
        files = None
        if _copy_regular(workspace.git_dir / "index", index):
            run_git(home, "add", "--all", "--", ":/", env=own_index, wrap=jail)
            written = run_git(home, "write-tree", env=own_index, check=False, wrap=jail)
            files = written.stdout.strip() if written.returncode == 0 else None
        if files is None:
            run_git(home, "read-tree", base, env=own_index, wrap=jail)
            # Every file but the ignored ones, deletions included, from the worktree's root.
            run_git(home, "add", "--all", "--", ":/", env=own_index, wrap=jail)
            files = run_git(home, "write-tree", env=own_index, wrap=jail).stdout.strip()
        entries = [f"040000 tree {files}\t{FILES}"]
        blobs, refused = _transcript_blobs(home, transcripts or {}, scratch, jail)
        if blobs:
            listing = "".join(f"100644 blob {blob}\t{sid}.jsonl\n" for sid, blob in blobs.items())
            sessions = run_git(home, "mktree", input_text=listing, wrap=jail).stdout.strip()
            entries.append(f"040000 tree {sessions}\t{SESSIONS}")
        listed = "\n".join(entries) + "\n"
        tree = run_git(home, "mktree", input_text=listed, wrap=jail).stdout.strip()
        message = f"Legion checkpoint of {normalize_identifier(issue)}"
        commit = run_git(
            home, "commit-tree", tree, "-p", base, "-m", message, env=_IDENTITY, wrap=jail
        ).stdout.strip()
        ref = checkpoint_ref(issue)
        run_git(home, "update-ref", ref, commit, wrap=jail)
    return Checkpoint(ref, commit, base, tuple(blobs), refused)


def _transcript_blobs(
    workspace: GitPlace, transcripts: Mapping[str, Path], scratch: str, jail: Wrap | None
) -> tuple[dict[str, str], tuple[str, ...]]:
    """Each transcript's blob (by session id, sorted), and why each refused one was left out.
    A transcript is in the CLI's home, which sessions write: it is copied only as a regular
    file reached through no link, whole and under `TRANSCRIPT_BYTES`
    (`legion.files.worker_written`), into the scratch folder, and git hashes that copy, never the
    path the session controls."""
    blobs: dict[str, str] = {}
    refused: list[str] = []
    for sid in sorted(transcripts):
        try:
            data = read_transcript(transcripts[sid], cap=TRANSCRIPT_BYTES, past_cap="refuse")
        except FileNotFoundError:
            continue  # no session yet
        except OSError as exc:
            refused.append(f"{sid}: {exc.strerror or exc}")
            continue
        copy = os.path.join(scratch, f"{sid}.jsonl")
        with open(copy, "wb") as handle:
            handle.write(data)
        blobs[sid] = run_git(workspace, "hash-object", "-w", "--", copy, wrap=jail).stdout.strip()
    return blobs, tuple(refused)


def _copy_regular(source: Path, target: str) -> bool:
    """Copy `source` to `target` when it is a regular file (never through a link, never
    waiting on a pipe: the admin folder is in the git folder a worker writes;
    `legion.files.worker_written`); False when it is not one, or cannot be read."""
    try:
        fd = open_regular(source.parent, source.name)
    except OSError:
        return False
    try:
        with os.fdopen(os.dup(fd), "rb") as reading, open(target, "wb") as writing:
            shutil.copyfileobj(reading, writing)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def find(repo: Path | GitPlace, issue: str) -> Checkpoint | None:
    """The issue's last checkpoint in `repo` (any worktree of it), or None."""
    ref = checkpoint_ref(issue)
    commit = rev_parse(repo, ref)
    if commit is None:
        return None
    base = rev_parse(repo, f"{commit}^1")
    if base is None:
        return None
    listed = run_git(
        repo, "ls-tree", "--name-only", f"{commit}:{SESSIONS}", check=False
    ).stdout.split()
    sessions = sorted(name.removesuffix(".jsonl") for name in listed if name.endswith(".jsonl"))
    return Checkpoint(ref, commit, base, tuple(sessions))


@dataclass(frozen=True)
class Restored:
    """What `restore` laid: the checkpoint, and the branch's head when it was newer than the
    checkpoint's base (so the branch was kept, and only the transcripts were laid)."""

    checkpoint: Checkpoint
    newer_branch: str | None = None


def newer_branch(repo: Path | GitPlace, found: Checkpoint, head: str | None) -> bool:
    """Whether the branch at `head` went on after `found` was taken, so resuming from the
    branch loses less than resuming from the checkpoint: it has the checkpoint's base in its
    history and more; or it went its own way (rewritten) and its last commit is later than
    the checkpoint."""
    if head is None or head == found.base or is_ancestor(repo, head, found.base):
        return False  # the checkpoint has all of it, and what was not committed yet
    if is_ancestor(repo, found.base, head):
        return True
    times = run_git(
        repo, "log", "--no-walk=unsorted", "--format=%ct", head, found.commit, check=False
    )
    stamps = [int(t) for t in times.stdout.split() if t.isdigit()]
    return len(stamps) == 2 and stamps[0] > stamps[1]


def restore(
    workspace: GitPlace,
    issue: str,
    transcripts: Mapping[str, Path] | None = None,
    *,
    home: Path | GitPlace,
) -> Restored | None:
    """Lay the issue's last checkpoint into `workspace` (a git worktree of the issue's branch,
    its git folders named: `GitWorktrees.place_of`): the branch set to the checkpoint's base
    and the files as they were (uncommitted changes left uncommitted), unless the branch went
    on since (`newer_branch`: then it is left as it is); and each session's transcript it holds
    written where `transcripts` (by session id) says this host's CLI resumes it from. Found in
    `home` (where `save` kept it), whose objects the workspace's repository has (its
    alternates). None when there is none."""
    found = find(home, issue)
    if found is None:
        return None
    head = rev_parse(workspace, "HEAD")
    kept = head if newer_branch(workspace, found, head) else None
    if kept is None:
        files = f"{found.commit}:{FILES}"
        run_git(workspace, "read-tree", "--reset", "-u", files)  # the files, as they were
        run_git(workspace, "reset", "--quiet", found.base)  # the branch and index: the base
    wanted = {sid: path for sid, path in (transcripts or {}).items() if sid in found.sessions}
    if wanted:
        # Through git's own checkout of the files, into a folder of its own: byte for byte.
        with tempfile.TemporaryDirectory(prefix="legion-restore-") as scratch:
            tree = os.path.join(scratch, "tree")
            os.mkdir(tree)
            own = {"GIT_INDEX_FILE": os.path.join(scratch, "index"), "GIT_WORK_TREE": tree}
            names = [f"{SESSIONS}/{sid}.jsonl" for sid in wanted]
            run_git(workspace, "checkout", found.commit, "--", *names, env=own)
            for sid, path in wanted.items():
                # Into the CLI's home, which sessions write: a new file renamed over the
                # name, through no link (`legion.files.worker_written`).
                home = transcript_home(path)
                home.mkdir(parents=True, exist_ok=True)  # the CLI's home: Legion's or the user's
                with open(os.path.join(tree, SESSIONS, f"{sid}.jsonl"), "rb") as handle:
                    replace_file(home, path, handle.read(), folders=True)
    return Restored(found, kept)


def _sent_ref(issue: str) -> str:
    """Where this repository keeps the checkpoint it last sent to the remote or took from it:
    what it expects the remote to hold."""
    return SENT_REFS + normalize_identifier(issue)


def push(repo: Path | GitPlace, remote: str, issue: str) -> None:
    """Send the issue's checkpoint to `remote`, replacing the one there only if that is the one
    this host last sent or took (compare-and-swap: a host that lost the issue to another, cut
    off for a while, does not overwrite the other's newer checkpoint); a ConflictError when it
    is not."""
    ref, sent = checkpoint_ref(issue), _sent_ref(issue)
    # A host that never sent nor took this issue's checkpoint (its first, or one sent before
    # Legion kept these records) replaces whatever the remote holds now.
    expected = rev_parse(repo, sent) or _remote_value(repo, remote, ref)
    lease = f"--force-with-lease={ref}:{expected}"
    done = run_git(
        repo, "push", "--quiet", "--no-verify", lease, remote, f"{ref}:{ref}", check=False
    )
    if done.returncode != 0:
        if "stale info" in done.stderr or "rejected" in done.stderr:
            raise ConflictError(
                f"the {remote!r} remote's checkpoint of {issue} is not the one this host last "
                "sent or took (another host has the issue now?): not replaced"
            )
        run_git(repo, "push", "--quiet", "--no-verify", lease, remote, f"{ref}:{ref}")
    head = rev_parse(repo, ref)
    if head is not None:
        run_git(repo, "update-ref", sent, head)


def _remote_value(repo: Path | GitPlace, remote: str, ref: str) -> str:
    """The commit `ref` names on `remote` ("": none)."""
    listed = run_git(repo, "ls-remote", remote, ref).stdout.split()
    return listed[0] if listed else ""


def fetch(repo: Path, remote: str, issue: str) -> bool:
    """Take the issue's checkpoint from `remote`; False when it has none. What was taken is
    what this host expects the remote to hold when it next sends one (`push`)."""
    ref = checkpoint_ref(issue)
    result = run_git(repo, "fetch", "--quiet", remote, f"+{ref}:{ref}", check=False)
    head = rev_parse(repo, ref) if result.returncode == 0 else None
    if head is not None:
        run_git(repo, "update-ref", _sent_ref(issue), head)
    return head is not None


def _tracking(remote: str, branch: str) -> str:
    """Where this repository keeps what it last sent of `branch` to `remote`, or took from it
    (git's own remote-tracking ref, which a plain `git push` or `fetch` moves too)."""
    return f"refs/remotes/{remote}/{branch}"


def remote_named(repo: Path, remote: str) -> bool:
    """Whether git can send to `remote` from `repo`: a remote the repository names, or a URL
    or a path (as `git push` takes them)."""
    if "/" in remote or ":" in remote:
        return True
    return run_git(repo, "config", "--get", f"remote.{remote}.url", check=False).returncode == 0


def send_branch(repo: Path | GitPlace, remote: str, branch: str) -> str | None:
    """Send the project's `branch` (an issue's, its worker's commits brought home) to `remote`
    (a fleet's shared remote), so another host that takes the issue over, or merges its pull
    request, finds every commit it has. What the remote holds is replaced only if it is what
    this host last sent or took (a rewritten branch goes; commits someone else pushed there
    stay); where this host knows of none there, only by a fast-forward. None when sent (or
    there is nothing to send); else why not, in a line."""
    local = f"refs/heads/{branch}"
    head = rev_parse(repo, local)
    if head is None:
        return None
    tracking = _tracking(remote, branch)
    seen = rev_parse(repo, tracking)
    if seen == head:
        return None
    # The lease alone lets a rewritten branch replace the one sent (a `+` would override it).
    lease = [f"--force-with-lease={local}:{seen}"] if seen is not None else []
    done = run_git(
        repo, "push", "--quiet", "--no-verify", *lease, remote, f"{local}:{local}", check=False
    )
    if done.returncode != 0:
        return f"{branch} not sent to {remote!r}: {last_line(done.stderr or done.stdout)}"
    run_git(repo, "update-ref", "--no-deref", tracking, head)
    return None


def take_branch(repo: Path, remote: str, branch: str) -> str | None:
    """Take `branch` as `remote` holds it (sent there by the host that ran its issue) into the
    project's repository, replacing this host's own (older: the issue moved here); its commit,
    or None when the remote has no such branch (or cannot be read). No worker of the issue
    runs here (it is being taken over), and no worktree of the project has the branch."""
    local, tracking = f"refs/heads/{branch}", _tracking(remote, branch)
    fetched = run_git(repo, "fetch", "--quiet", "--no-tags", remote, f"+{local}:{tracking}",
                      check=False)  # fmt: skip
    head = rev_parse(repo, tracking) if fetched.returncode == 0 else None
    if head is not None:
        run_git(repo, "update-ref", "--no-deref", local, head)
    return head


def taken_at(repo: Path, issue: str) -> float | None:
    """When the issue's last checkpoint here was taken (seconds since the epoch), or None."""
    done = run_git(repo, "log", "-1", "--format=%ct", checkpoint_ref(issue), check=False)
    text = done.stdout.strip()
    return float(text) if done.returncode == 0 and text.isdigit() else None


def forget(repo: Path, issue: str) -> None:
    """Delete the issue's checkpoint ref here (its workspace was removed with nothing in it
    left to keep); none is no error."""
    run_git(repo, "update-ref", "-d", checkpoint_ref(issue), check=False)
    run_git(repo, "update-ref", "-d", _sent_ref(issue), check=False)
