"""A project on Linear and GitHub: the fake servers on 127.0.0.1, the GitHub remote a local
bare repository, and `legion init` run against them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.fakes.github_server import FakeGitHub
from tests.fakes.linear_server import FakeLinear
from tests.support.cli import git, run_legion

# Tokens with a unique part, so a test can search for them everywhere a worker could see them.
LINEAR_KEY = "lin_api_e2esentinel5f1c9a0b7d2e4f68"
GITHUB_TOKEN = "ghp_e2esentinel8d3b1a6c4e2f0a97"
SECRETS = (b"e2esentinel5f1c9a0b7d2e4f68", b"e2esentinel8d3b1a6c4e2f0a97")


@dataclass
class LinearAndGitHub:
    linear: FakeLinear
    github: FakeGitHub
    remote: Path

    def env(self) -> dict[str, str]:
        """What the daemon (or a person) needs to reach them: the only place the tokens are."""
        return {
            "LINEAR_API_URL": self.linear.api_url,
            "LINEAR_API_KEY": self.linear.token,
            "GITHUB_API_URL": self.github.url,
            "GITHUB_TOKEN": self.github.token,
        }


@contextmanager
def running_linear_and_github(folder: Path) -> Iterator[LinearAndGitHub]:
    remote = folder / "remote.git"
    remote.mkdir()
    git(remote, "init", "--quiet", "--bare")
    linear = FakeLinear(token=LINEAR_KEY, retro_state=True)
    github = FakeGitHub(token=GITHUB_TOKEN, remote=remote)
    with linear.running(), github.running():
        yield LinearAndGitHub(linear, github, remote)


def init_on_linear_and_github(repo: Path, backends: LinearAndGitHub) -> Path:
    """`repo` pushed to the remote and made a project on team ENG and acme/widgets."""
    git(repo, "remote", "add", "origin", str(backends.remote))
    git(repo, "push", "--quiet", "origin", "main")
    init = run_legion(
        *("init", "--tracker", "linear", "--team", "ENG", "--forge", "github"),
        *("--repo", "acme/widgets"),
        cwd=repo,
        env=dict(os.environ) | backends.env(),
    )
    assert init.returncode == 0, init.stderr
    return repo
