"""What `legion init` writes for GitHub (its tracker, its forge, or both): the repository."""

from __future__ import annotations

from legion.errors import InputError
from legion.github.repository import github_repo_of_remote, issue_key_for_repo
from legion.plugins import GITHUB, InitChoice, InitRequest


def init_settings(request: InitRequest) -> InitChoice:
    repo = request.options.get("repo") or github_repo_of_remote(request.repo_path)
    if repo is None:
        which = "forge" if request.forge == GITHUB else "tracker"
        raise InputError(
            f"--{which} {GITHUB} needs the repository: "
            "add --repo OWNER/NAME (no `origin` remote on GitHub to take it from)"
        )
    checked = request.check("github_repo", repo, "option --repo")
    # issue #12 of acme/widgets is WIDGETS-12, unless a key was given
    key = (
        issue_key_for_repo(checked) if request.tracker == GITHUB and not request.key_given else None
    )
    return InitChoice({"github_repo": checked}, key=key)
