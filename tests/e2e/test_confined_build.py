"""A Python project with a dependency goes through the whole cycle confined (issue 38): the
user's config holds only `workspace_setup` and `sandbox_egress`; the daemon's setup makes the
workspace's virtual environment and installs the dependency from a package index (on loopback,
as a registry would be on the internet) through the egress proxy; the implementer, confined by
bubblewrap with no network but the model and the allow-list, runs the project's tests in its
workspace, and what it tries beyond the list is refused and shown by `legion status`.

The real Codex CLI on the scripted model (the subject is the build, not the agent CLI: Claude
Code's confinement is proven by `test_sandbox.py`), the real daemon, tmux, git and bubblewrap.
About 40 s (the setup's venv and pip install take some 10 of them)."""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

import pytest

from legion.demo.run import make_repository
from legion.demo.swarm_script import controller_scenarios
from tests.support.campaign import DONE, TICK, issue_scenarios, play
from tests.support.cli import git
from tests.support.fleet import nothing_unscripted, on_codex
from tests.support.package_index import serve, simple_index
from tests.support.sandbox import require_sandbox
from tests.support.swarm import Daemon, Swarm, issue_status, open_swarm
from tests.support.waits import wait_until

pytestmark = [pytest.mark.e2e]

DEPENDENCY = "tinygreet"
TESTS = """\
import sys
import unittest

sys.path.insert(0, "src")

import tinygreet


class GreetingTest(unittest.TestCase):
    def test_the_dependency_greets(self):
        self.assertEqual(tinygreet.greet("legion"), "hello, legion")

    def test_the_feature_uses_it(self):
        from feature_1 import feature_1

        self.assertEqual(feature_1(), "hello, legion")
"""
REFUSED_HOST = "not-on-the-list.invalid"


def _project(repo: Path) -> None:
    """The demo's library, made a Python project whose tests need `tinygreet`."""
    make_repository(repo, 0)
    (repo / ".gitignore").write_text(".legion/\n.venv/\n__pycache__/\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_greeting.py").write_text(TESTS)
    (repo / "requirements.txt").write_text(f"{DEPENDENCY}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "Tests that need tinygreet")


def _implement(issue: str) -> str:
    """The implementer: write the feature, run the project's tests in the workspace (their
    verdict said on the issue), try a host the list does not allow, open the PR."""
    commit = "git add -A && (git diff --cached --quiet || git commit -qm 'LEG-1: feature 1')"
    feature = "from tinygreet import greet\\n\\n\\ndef feature_1():\\n    return greet('legion')\\n"
    beyond = f"import urllib.request; urllib.request.urlopen('http://{REFUSED_HOST}/')"
    return (
        f"mkdir -p src && printf {shlex.quote(feature)} > src/feature_1.py"
        " && out=$(.venv/bin/python -m unittest discover -s tests 2>&1)"
        f' && legion issue comment {issue} --body "tests in the workspace: $out"'
        f" && (python3 -c {shlex.quote(beyond)} 2>/dev/null || true)"
        f" && {commit}"
        f" && (legion pr view {issue} --json >/dev/null 2>&1"
        f" || legion pr create --issue {issue} --branch legion/{issue.lower()})"
        f" && legion issue label {issue} {DONE}"
    )


def test_a_python_project_with_a_dependency_goes_through_the_cycle_confined(
    tmp_path: Path, isolated_env: Path
) -> None:
    require_sandbox()
    site = Path(tempfile.mkdtemp(dir=tmp_path))
    simple_index(site, DEPENDENCY, b"def greet(name):\n    return f'hello, {name}'\n")
    with serve(site) as port:
        repo = tmp_path / "repo"
        _project(repo)
        with open_swarm(tmp_path, repo, isolated_env) as swarm, ExitStack() as running:
            [codex] = on_codex({"host": swarm}, tmp_path, running).values()
            _configure(swarm, port)
            swarm.legion("issue", "create", "Feature one", "--status", "In Progress")
            plays = issue_scenarios("LEG-1", "codex")
            implement = [
                play("implement", "LEG-1", _implement("LEG-1"), "Tests pass; PR opened.", "codex"),
                *[play for play in plays if not play.name.endswith(":implement")],
            ]
            codex.script.scenarios.extend([*controller_scenarios("auto", "codex"), *implement])
            _run_to_done(swarm)
            nothing_unscripted({"host": codex})


def _configure(swarm: Swarm, port: int) -> None:
    """The user's config, as the README's sandbox section shows it: the workspace's setup and
    where sessions may connect (here the loopback index stands for `@registries`)."""
    config = Path(swarm.env["XDG_CONFIG_HOME"]) / "legion" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    index = f"http://localhost:{port}/simple/"
    setup = [
        # This Python: a `python3` on the PATH may be a shim under the home (pyenv's), which
        # no confined command sees (docs/workspaces.md).
        f"{shlex.quote(sys.executable)} -m venv .venv",
        f".venv/bin/pip install --quiet --index-url {index} -r requirements.txt",
    ]
    config.write_text(
        f"sandbox_egress = [{json.dumps(f'localhost:{port}')}]\n"
        f"workspace_setup = {json.dumps(setup)}\n"
    )


def _run_to_done(swarm: Swarm) -> None:
    with Daemon(swarm, tick=float(TICK)):
        wait_until("LEG-1 done", lambda: issue_status(swarm, "LEG-1") == "Done", timeout=150)
        status = swarm.json("status")
    issue = swarm.json("issue", "show", "LEG-1")
    said = [c["body"] for c in issue["comments"] if "tests in the workspace" in c["body"]]
    assert said and "Ran 2 tests" in said[0] and "OK" in said[0], said
    merged = git(swarm.repo, "show", "main:src/feature_1.py")
    assert "tinygreet" in merged
    assert ".venv" not in git(swarm.repo, "ls-tree", "-r", "--name-only", "main")
    refused = status["egress"]["refused"]
    assert any(r["host"] == REFUSED_HOST and r["issue"] == "LEG-1" for r in refused), refused
    assert status["sandbox"]["confined"], status["sandbox"]
