"""An implementer (or its retro) cannot say its mode is done with its work left behind: changes
not committed, or commits not on its issue's branch (`legion.core.unshipped`), by `legion
complete` or by adding `worker-done` itself; it is told what to do, in one line."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import LegionRunner, git

WORKER = {"LEGION_MODE": "implement", "LEGION_ISSUE_ID": "LEG-1", "LEGION_SESSION_ID": "s-1"}


def refusal(legion: LegionRunner, workspace: Path, env: dict[str, str], *args: str) -> str:
    result = legion(*args, cwd=workspace, env=env)
    lines = result.stderr.strip().splitlines()
    if result.returncode == 2 and len(lines) == 1 and "complete again" in lines[0]:
        return lines[0]
    return ""


def test_an_implementer_with_work_left_behind_is_told_to_ship_it(
    legion: LegionRunner, project: Path, tmp_path: Path
) -> None:
    assert legion("issue", "create", "Feature").returncode == 0
    workspace = tmp_path / "leg-1"
    git(project, "worktree", "add", "--quiet", "-b", "legion/leg-1", str(workspace))
    (workspace / "README.md").write_text("changed\n")
    (workspace / "new.py").write_text("x = 1\n")
    for args in (("complete", "done"), ("issue", "label", "LEG-1", "--add", "worker-done")):
        said = refusal(legion, workspace, WORKER, *args)
        assert said.startswith("legion: error: your workspace has changes not committed")
        assert "README.md, new.py" in said and "git add -A && git commit" in said
    # Build output is nobody's work; a reviewer's workspace is not its to ship.
    git(workspace, "add", "-A")
    git(workspace, "commit", "--quiet", "-m", "feature")
    (workspace / "__pycache__").mkdir()
    (workspace / "__pycache__" / "new.cpython-311.pyc").write_bytes(b"\0")
    assert refusal(legion, workspace, WORKER, "complete", "done") == ""
    (workspace / "README.md").write_text("again\n")
    assert refusal(legion, workspace, WORKER | {"LEGION_MODE": "review"}, "complete", "x") == ""
    git(workspace, "checkout", "--quiet", "README.md")
    # Commits on another branch are not on the pull request.
    git(workspace, "switch", "--quiet", "-c", "elsewhere")
    said = refusal(legion, workspace, WORKER | {"LEGION_MODE": "retro"}, "complete", "done")
    assert said.startswith(
        "legion: error: your commits are on branch elsewhere, not on legion/leg-1"
    )
    assert "git switch legion/leg-1" in said
