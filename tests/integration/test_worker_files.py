"""`legion.files.worker_written`: what a worker plants in a tree it can write (a link, a fifo, a
device, a huge file) is refused or capped, on real files, links and fifos."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from legion.files.worker_written import (
    RefusedFile,
    read_regular,
    read_text,
    regular_files,
    replace_file,
    stat_regular,
)

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY----- not for workers\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    (root / "docs" / "plans").mkdir(parents=True)
    (root / "docs" / "plans" / "a.md").write_text("the plan\n")
    return root


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "home" / ".ssh" / "id_ed25519"
    path.parent.mkdir(parents=True)
    path.write_bytes(SECRET)
    return path


def test_a_regular_file_is_read(tree: Path) -> None:
    assert read_text(tree, tree / "docs/plans/a.md", cap=100) == "the plan\n"
    assert read_regular(tree, "docs/plans/a.md", cap=100) == b"the plan\n"


def test_a_link_at_the_name_is_refused(tree: Path, victim: Path) -> None:
    (tree / "docs/plans/z.md").symlink_to(victim)
    with pytest.raises(RefusedFile, match="symbolic link"):
        read_regular(tree, "docs/plans/z.md", cap=1000)
    with pytest.raises(RefusedFile):
        stat_regular(tree, "docs/plans/z.md")


def test_a_link_in_a_parent_folder_is_refused(tree: Path, victim: Path) -> None:
    (tree / "docs/plans/a.md").unlink()
    (tree / "docs/plans").rmdir()
    (tree / "docs/plans").symlink_to(victim.parent)
    with pytest.raises(RefusedFile):
        read_regular(tree, "docs/plans/id_ed25519", cap=1000)
    assert regular_files(tree, tree / "docs/plans") == []


def test_a_link_to_proc_environ_is_refused(tree: Path) -> None:
    (tree / "docs/plans/z.md").symlink_to("/proc/self/environ")
    with pytest.raises(RefusedFile):
        read_regular(tree, "docs/plans/z.md", cap=1 << 20)


def test_a_fifo_neither_hangs_nor_is_read(tree: Path) -> None:
    os.mkfifo(tree / "docs/plans/fifo.md")
    done: list[BaseException] = []

    def read() -> None:
        try:
            read_regular(tree, "docs/plans/fifo.md", cap=1000)
        except BaseException as exc:  # handed to the test's thread
            done.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), "reading a fifo hung"
    assert isinstance(done[0], RefusedFile)


def test_a_link_to_dev_zero_is_refused_and_dev_zero_itself_too(tree: Path) -> None:
    (tree / "docs/plans/zero.md").symlink_to("/dev/zero")
    with pytest.raises(RefusedFile):
        read_regular(tree, "docs/plans/zero.md", cap=10, past_cap="tail")
    with pytest.raises(RefusedFile, match="not a regular file"):
        read_regular(Path("/dev"), "zero", cap=10, past_cap="tail")


def test_past_the_cap_a_reader_gets_the_head_the_tail_or_a_refusal(tree: Path) -> None:
    (tree / "big.md").write_bytes(b"a" * 100 + b"END")
    assert read_regular(tree, "big.md", cap=3, past_cap="tail") == b"END"
    assert read_regular(tree, "big.md", cap=3, past_cap="head") == b"aaa"
    with pytest.raises(RefusedFile, match="over 3 bytes"):
        read_regular(tree, "big.md", cap=3)


def test_paths_outside_the_root_or_climbing_out_are_refused(tree: Path, victim: Path) -> None:
    with pytest.raises(RefusedFile):
        read_regular(tree, victim, cap=1000)
    with pytest.raises(RefusedFile):
        read_regular(tree, "docs/../../home/.ssh/id_ed25519", cap=1000)


def test_a_listing_holds_only_regular_files(tree: Path, victim: Path) -> None:
    plans = tree / "docs/plans"
    (plans / "link.md").symlink_to(victim)
    (plans / "folder.md").mkdir()
    os.mkfifo(plans / "fifo.md")
    assert [entry.name for entry in regular_files(tree, plans, ".md")] == ["a.md"]


def test_a_write_replaces_a_planted_link_and_leaves_its_target_alone(
    tree: Path, victim: Path
) -> None:
    (tree / "inbox.json").symlink_to(victim)
    replace_file(tree, "inbox.json", b"{}\n")
    assert victim.read_bytes() == SECRET
    assert not (tree / "inbox.json").is_symlink()
    assert (tree / "inbox.json").read_bytes() == b"{}\n"
    assert sorted(p.name for p in tree.iterdir()) == ["docs", "inbox.json"]  # no temp left


def test_a_write_through_a_linked_folder_is_refused(tree: Path, victim: Path) -> None:
    (tree / "sub").symlink_to(victim.parent)
    with pytest.raises(RefusedFile):
        replace_file(tree, "sub/id_ed25519", b"overwritten")
    assert victim.read_bytes() == SECRET


# -- transcripts the supervisor reads ------------------------------------------------------


def _claude_transcript(home: Path) -> Path:
    path = home / ".claude" / "projects" / "-work-leg-1" / "sid.jsonl"
    path.parent.mkdir(parents=True)
    return path


def test_read_tail_of_a_transcript_linked_to_dev_zero_returns_at_once(tmp_path: Path) -> None:
    from legion.runtime.claude.transcript import summarize_file
    from legion.runtime.transcript import read_tail

    transcript = _claude_transcript(tmp_path)
    transcript.symlink_to("/dev/zero")
    done: list[object] = []
    reader = threading.Thread(target=lambda: done.append(read_tail(transcript)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert not reader.is_alive(), "read_tail hung on /dev/zero"
    assert done == [[]]
    assert summarize_file(transcript) is None


def test_a_transcript_linked_to_a_secret_is_not_read(tmp_path: Path, victim: Path) -> None:
    from legion.runtime.claude.paths import newest_activity
    from legion.runtime.claude.transcript import session_usage
    from legion.runtime.transcript import read_tail, records_prompt

    transcript = _claude_transcript(tmp_path)
    transcript.symlink_to(victim)
    assert read_tail(transcript) == []
    assert not records_prompt(transcript, 0, "BEGIN OPENSSH")
    assert session_usage(transcript) == []
    assert newest_activity(transcript) is None


def test_a_transcript_in_a_linked_project_folder_is_not_read(tmp_path: Path, victim: Path) -> None:
    from legion.runtime.transcript import read_tail

    folder = tmp_path / ".claude" / "projects" / "-work-leg-1"
    folder.parent.mkdir(parents=True)
    folder.symlink_to(victim.parent)
    assert read_tail(folder / "id_ed25519") == []
    real = _claude_transcript(tmp_path / "other")
    real.write_text('{"type": "user"}\n')
    assert read_tail(real) == ['{"type": "user"}']


def test_a_codex_link_is_followed_only_to_a_rollout_of_its_home(
    tmp_path: Path, victim: Path
) -> None:
    from legion.runtime.codex.runtime import session_link
    from legion.runtime.transcript import read_tail

    env = {"CODEX_HOME": str(tmp_path / "codex")}
    link = session_link(env, "sid")
    link.parent.mkdir(parents=True)
    rollout = tmp_path / "codex" / "sessions" / "2026" / "01" / "02" / "rollout-x-sid.jsonl"
    rollout.parent.mkdir(parents=True)
    rollout.write_text('{"type": "session_meta"}\n')
    link.symlink_to(rollout)
    assert read_tail(link) == ['{"type": "session_meta"}']
    link.unlink()
    link.symlink_to(victim)  # outside the home
    assert read_tail(link) == []
    link.unlink()
    inside = tmp_path / "codex" / "sessions" / "evil.jsonl"
    inside.symlink_to(victim)  # a rollout name that is itself a link
    link.symlink_to(inside)
    assert read_tail(link) == []


# -- the daemon's writes in a session's folder ---------------------------------------------


def test_links_planted_at_the_inbox_lock_and_the_inbox_leave_their_targets_alone(
    tmp_path: Path, victim: Path
) -> None:
    """Issue 35: a link at `sessions/<id>/inbox.json.lock` made the daemon truncate and rewrite
    any file the user can write. The lock is now the folder's own, and the inbox is replaced,
    never written through."""
    from legion.bus.inbox import InboxError, enqueue, peek_delivered

    folder = tmp_path / "state" / "sessions" / "sid"
    folder.mkdir(parents=True)
    inbox = folder / "inbox.json"
    (folder / "inbox.json.lock").symlink_to(victim)
    assert enqueue(inbox, "m-1", "hello")
    assert victim.read_bytes() == SECRET
    assert not inbox.is_symlink() and "hello" in inbox.read_text()

    inbox.unlink()
    inbox.symlink_to(victim)
    with pytest.raises(InboxError, match="refused"):
        enqueue(inbox, "m-2", "again")
    with pytest.raises(InboxError, match="refused"):
        peek_delivered(inbox)
    assert victim.read_bytes() == SECRET


def test_write_private_replaces_a_planted_link_instead_of_writing_through_it(
    tmp_path: Path, victim: Path
) -> None:
    from legion.files.private import write_private

    folder = tmp_path / "state" / "sessions" / "sid"
    folder.mkdir(parents=True)
    context = folder / "context.md"
    context.symlink_to(victim)
    for pid in range(os.getpid() - 2, os.getpid() + 3):  # the old, guessable temporary names
        (folder / f"context.md.{pid}.tmp").symlink_to(victim)
    write_private(context, "the wake-up context\n")
    assert victim.read_bytes() == SECRET
    assert context.read_text() == "the wake-up context\n" and not context.is_symlink()
