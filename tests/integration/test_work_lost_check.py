"""The kill campaign's and the soak's "no work lost" check (`tests.support.campaign`), on real
git: a branch tip not on main is lost work unless main has each of its changes (a commit made
just before its host was lost, made again by the worker that took the issue over); a change
main lacks is lost, wherever the tip is kept."""

from __future__ import annotations

from pathlib import Path

from tests.support.campaign import work_problems
from tests.support.cli import git


def _commit(repo: Path, name: str, text: str, message: str) -> str:
    (repo / name).write_text(text, encoding="utf-8")
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def test_a_tip_is_lost_work_only_when_main_lacks_its_change(tmp_path: Path) -> None:
    remote, host = tmp_path / "remote.git", tmp_path / "host"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(tmp_path, "clone", "-q", str(remote), str(host))
    _commit(host, "README.md", "base\n", "base")
    git(host, "push", "-q", "origin", "HEAD:main")
    # The worker that took the issue over made the retro again, and it was merged.
    git(host, "switch", "-q", "-c", "redone")
    _commit(host, "leg-1.md", "# LEG-1\n", "LEG-1: retro")
    git(host, "push", "-q", "origin", "redone:main")
    # On the lost host: the same change, another commit (another time), never sent...
    git(host, "switch", "-q", "-c", "legion/leg-1", "main")  # the base, as the host had it
    same = _commit(host, "leg-1.md", "# LEG-1\n", "LEG-1: retro (the first time)")
    # ...and a change main does not have.
    other = _commit(host, "leg-1-more.md", "more\n", "LEG-1: more")
    clones = [host]
    merged = git(remote, "rev-parse", "main").strip()
    assert same != merged  # another commit: not on main as itself
    assert work_problems(remote, [], {same}, clones) == []
    assert work_problems(remote, [], {other}, clones) == [
        f"work lost: commit {other[:10]} of a legion/ branch is not on main"
    ]
    # A tip no clone holds any longer is lost too.
    assert work_problems(remote, [], {"0" * 40}, clones) != []
