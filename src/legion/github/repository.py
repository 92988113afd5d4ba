"""The GitHub repository a project works on: the `github_repo` setting, else the one its
remote points at (on github.com or the GitHub Enterprise host the API is on)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from legion.config import Project, git_toplevel
from legion.errors import ConfigError
from legion.git import run_git
from legion.github.client import DEFAULT_API_URL, api_base
from legion.github.settings import GitHubSettings

# Who decides for a repository, among GitHub's associations of a comment's or review's author
# with it (`authorAssociation`): its owner, a member of its organization, a collaborator.
MEMBER_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})

_REMOTE_URL = re.compile(
    r"^(?:[a-z][a-z0-9+.-]*://)?(?:[^@/]+@)?(?P<host>[^/:]+)[:/]"
    r"(?P<owner>[A-Za-z0-9_.-]+)/(?P<name>[A-Za-z0-9_.-]+?)(?:\.git)?/?$"
)


def repository_name(project: Project) -> tuple[str, str]:
    """OWNER and NAME: the `github_repo` setting, else the remote's URL when it is GitHub's."""
    configured = project.settings.section(GitHubSettings).repo
    if configured:
        owner, _, name = configured.partition("/")
        return owner, name
    remote = project.settings.remote
    url = run_git(project.root, "remote", "get-url", "--", remote, check=False).stdout.strip()
    match = _REMOTE_URL.fullmatch(url)
    if match is not None and match.group("host").lower() == web_host(project.env):
        return match.group("owner"), match.group("name")
    raise ConfigError(
        f"github_repo is not set and remote {remote!r} is not a GitHub repository: "
        'add github_repo = "OWNER/NAME" to .legion/config.toml'
    )


def web_host(env: Mapping[str, str]) -> str:
    """github.com for api.github.com; GitHub Enterprise's host for its API."""
    base = api_base(env)
    host = (urlsplit(base).hostname or "").lower()
    return "github.com" if base == DEFAULT_API_URL else host


_GITHUB_REMOTE = re.compile(
    r"^(?:https://(?:[^@/]+@)?github\.com/|git@github\.com:|ssh://git@github\.com/)"
    r"([A-Za-z0-9-]+/[A-Za-z0-9._-]+?)(?:\.git)?/?$"
)


def github_repo_of_remote(start: Path, remote: str = "origin") -> str | None:
    """OWNER/NAME of the GitHub repository `remote` points at, or None."""
    root = git_toplevel(start.resolve()) if start.is_dir() else None
    if root is None:
        return None
    result = run_git(root, "remote", "get-url", remote, check=False)
    if result.returncode != 0:
        return None
    return github_repo_of_url(result.stdout.strip())


def github_repo_of_url(url: str) -> str | None:
    """OWNER/NAME from a github.com remote URL (https, ssh or scp-like), else None."""
    match = _GITHUB_REMOTE.match(url.strip())
    return match.group(1) if match else None


def issue_key_for_repo(github_repo: str) -> str:
    """The issue key of a GitHub Issues project: its repository's name in capitals, letters and
    digits only, at most 10, starting with a letter (`acme/widgets` -> WIDGETS)."""
    name = re.sub(r"[^A-Z0-9]", "", github_repo.partition("/")[2].upper())
    name = name.lstrip("0123456789")[:10]
    return name or "GH"
