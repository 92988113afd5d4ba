"""`legion demo`: the main job on the embedded default, in a throwaway repository."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from legion.backends import open_backends
from legion.core.model import Status
from legion.errors import InputError
from legion.git import run_git
from legion.projects import init_project
from legion.state import NoWorkers, observe

# (title, status, labels, PR: None or the review it gets ("", "approved", "changes_requested"))
DEMO_ISSUES: tuple[tuple[str, Status, tuple[str, ...], str | None], ...] = (
    ("Add a --shout flag to the greeter", Status.TODO, (), None),
    ("Design a plugin system for greetings", Status.BACKLOG, (), None),
    ("Greet in French", Status.TODO, ("worker-done",), None),
    ("Add a farewell command", Status.NEEDS_REVIEW, ("worker-done",), "approved"),
    ("Read the name from $USER", Status.IN_PROGRESS, ("user-input-needed",), None),
    ("Handle an empty name", Status.NEEDS_REVIEW, ("worker-done",), "changes_requested"),
)


def _git(repo: Path, *args: str) -> None:
    run_git(repo, *args)


def _make_repository(repo: Path) -> None:
    _git(repo, "init", "--quiet", "--initial-branch=main")
    _git(repo, "config", "user.name", "Legion Demo")
    _git(repo, "config", "user.email", "demo@legion.invalid")
    (repo / "greet.py").write_text('print("Hello, world")\n', encoding="utf-8")
    (repo / ".gitignore").write_text(".legion/state/\n", encoding="utf-8")
    _git(repo, "add", "greet.py", ".gitignore")
    _git(repo, "commit", "--quiet", "-m", "A greeter")


def _branch_with_change(repo: Path, branch: str, filename: str, text: str) -> None:
    _git(repo, "switch", "--quiet", "-c", branch)
    (repo / filename).write_text(text, encoding="utf-8")
    _git(repo, "add", filename)
    _git(repo, "commit", "--quiet", "-m", f"Work for {branch}")
    _git(repo, "switch", "--quiet", "main")


def demo(
    directory: Annotated[
        Path | None,
        typer.Option(
            "--dir", help="Where to create the demo repository (default: a new temporary folder)."
        ),
    ] = None,
) -> None:
    """Create a throwaway repository with a few issues and show what Legion would do next."""
    if directory is None:
        repo = Path(tempfile.mkdtemp(prefix="legion-demo-"))
    else:
        repo = directory.expanduser().resolve()
        if repo.exists() and any(repo.iterdir()):
            raise InputError(f"{repo} is not empty: choose a new folder for the demo")
        repo.mkdir(parents=True, exist_ok=True)
    _make_repository(repo)
    project, _ = init_project(repo, extra={"state_dir": str(repo / ".legion" / "state")})
    backends = open_backends(project)
    for title, status, labels, review in DEMO_ISSUES:
        issue = backends.tracker.create_issue(
            title, status=status, labels=labels, body=f"Demo issue: {title}."
        )
        if review is None:
            continue
        branch = f"legion/{issue.identifier.lower()}"
        _branch_with_change(repo, branch, f"{issue.identifier.lower()}.py", f"# {title}\n")
        pr = backends.forge.create_pr(issue.identifier, branch, body="Demo pull request.")
        verdict = "Looks good." if review == "approved" else "Please handle the empty string too."
        backends.forge.add_review(str(pr.number), review, body=verdict, author="legion-review")

    from legion.cli.common import console
    from legion.cli.render import state_table

    out = console()
    out.print(f"Demo repository: {repo}")
    out.print(
        f"Created {len(DEMO_ISSUES)} issues in the embedded tracker. What Legion would do next:\n"
    )
    out.print(
        state_table(
            observe(project.settings.project_id, backends.tracker, backends.forge, NoWorkers())
        )
    )
    out.print(
        f"\nTry: cd {repo} && legion issue list && legion state --json\n"
        "(No workers run yet in this version: the swarm itself arrives with the runtime "
        "and the daemon.)"
    )
