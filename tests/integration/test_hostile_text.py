"""Text Legion did not write never reaches the terminal raw (issue 24, item 5): one hostile
corpus (`tests.support.hostile`) put where an attacker can put it (a Linear description, comment and
commenter's name; a GitHub pull request and review; a worker's AskUserQuestion and screen; an
identifier a worker sent the relay; the bus), then every command that prints it, run as a user
runs it (the real `legion` script). Text output shows it escaped, markup as text; `--json`
keeps it intact, in valid JSON, with every dangerous character escaped."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.github_server import FakeGitHub
from tests.fakes.linear_server import FakeLinear
from tests.support.cli import LegionRunner, Result, git, run_legion
from tests.support.hostile import HOSTILE, assert_inert, assert_json_inert


def ok(result: Result, args: tuple[str, ...]) -> str:
    assert result.returncode == 0, (args, result.stderr)
    assert_inert(result.stderr, where=f"{args} stderr", markup=False, shown=False)
    return result.stdout


# -- Linear and GitHub ---------------------------------------------------------------------------


@pytest.fixture
def remote_project(git_repo: Path, tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A project on the fake Linear and GitHub, where others wrote ENG-1, a comment on it, and
    a pull request for it with a review: every text of theirs the hostile corpus."""
    linear, github = FakeLinear(), FakeGitHub()
    with linear.running(), github.running():
        remote = tmp_path / "remote.git"
        remote.mkdir()
        git(remote, "init", "--quiet", "--bare")
        github.reset(remote=remote)
        git(git_repo, "remote", "add", "origin", str(remote))
        git(git_repo, "push", "--quiet", "origin", "main")
        git(git_repo, "push", "--quiet", "origin", "main:legion/eng-1")
        env = {
            "LINEAR_API_URL": linear.api_url,
            "LINEAR_API_KEY": linear.token,
            "GITHUB_API_URL": github.url,
            "GITHUB_TOKEN": github.token,
            "COLUMNS": "1000",  # nothing wraps: each piece of the corpus stays on one line
        }
        init = run_legion(
            *("init", "--tracker", "linear", "--team", "ENG"),
            *("--forge", "github", "--repo", "acme/widgets"),
            cwd=git_repo,
            env=env,
        )
        assert init.returncode == 0, init.stderr
        linear.add_label(HOSTILE)
        identifier = linear.add_issue(HOSTILE, description=HOSTILE, labels=[HOSTILE])
        assert identifier == "ENG-1"
        linear.human["name"] = linear.human["displayName"] = HOSTILE
        linear.add_comment(identifier, HOSTILE, by="human")
        pr = github.add_pr("legion/eng-1", title=f"ENG-1 {HOSTILE}", body=HOSTILE)
        github.add_native_review(pr["number"], "CHANGES_REQUESTED", "hank", HOSTILE)
        yield git_repo, env


@pytest.mark.parametrize(
    "args",
    [
        ("issue", "show", "ENG-1"),
        ("issue", "comments", "ENG-1"),
        ("issue", "list"),
        ("state",),
        ("pr", "view", "1"),
        ("pr", "list"),
    ],
)
def test_tracker_and_forge_text_is_escaped(
    remote_project: tuple[Path, dict[str, str]], args: tuple[str, ...]
) -> None:
    repo, env = remote_project
    out = ok(run_legion(*args, cwd=repo, env=env), args)
    assert_inert(out, where=" ".join(args))
    as_json = ok(run_legion(*args, "--json", cwd=repo, env=env), args)
    assert_json_inert(as_json, where=" ".join((*args, "--json")))


def test_issue_show_escapes_every_field_of_others(
    remote_project: tuple[Path, dict[str, str]],
) -> None:
    repo, env = remote_project
    out = ok(run_legion("issue", "show", "ENG-1", cwd=repo, env=env), ("issue", "show"))
    data = json.loads(ok(run_legion("issue", "show", "ENG-1", "--json", cwd=repo, env=env), ()))
    # The description, the label, the comment and its author: each shown, each escaped.
    assert data["body"] == HOSTILE and data["labels"] == [HOSTILE]
    assert data["comments"][0]["body"] == HOSTILE and data["comments"][0]["author"] == HOSTILE
    assert data["pr"]["body"] == HOSTILE and data["pr"]["reviews"][0]["body"] == HOSTILE
    assert out.count("\\x1b[2J") >= 5  # title, labels, body, comment author, comment body


# -- an embedded project: workers, the relay, the bus ----------------------------------------------


def blocked_worker(project: Path) -> None:
    """LEG-1's implementer, live in tmux, its screen showing the corpus (as its program
    printed it) and its transcript holding an AskUserQuestion in the corpus' words (as its
    model wrote it); the judgment the daemon opens for it."""
    from legion.backends import open_backends, open_workers
    from legion.config import load_project
    from legion.core.model import Mode
    from legion.reconcile.judgments import JudgmentKind, JudgmentQueue, judgment_needs
    from legion.reconcile.observe import observe

    loaded = load_project(project)
    backends = open_backends(loaded)
    workers = open_workers(loaded, backends)
    printed = project.parent / "screen.txt"
    printed.write_text(HOSTILE + "\nEND\n", encoding="utf-8")
    command = ["sh", "-c", f"cat '{printed}'; exec sleep 600"]
    workers.windows.tmux.new_session(workers.windows.session, "leg-1-implement", command, project)
    record = workers.registry.start("LEG-1", Mode.IMPLEMENT, "sid-1", "leg-1-implement", project)
    transcript = workers.runtimes.of(record).transcript(project, "sid-1")
    transcript.parent.mkdir(parents=True, exist_ok=True)
    ask = {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "text", "text": HOSTILE},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "AskUserQuestion",
                    "input": {
                        "questions": [
                            {
                                "question": HOSTILE,
                                "header": "Pick",
                                "options": [{"label": "a"}, {"label": "b"}],
                                "multiSelect": False,
                            }
                        ]
                    },
                },
            ],
        },
    }
    transcript.write_text(json.dumps(ask) + "\n", encoding="utf-8")
    deadline = time.monotonic() + 45
    while "END" not in workers.windows.tmux.capture(
        f"={workers.windows.session}:leg-1-implement", lines=5
    ):
        assert time.monotonic() < deadline, "the window never printed"
        time.sleep(0.05)
    views = workers.roster.views()
    assert views and views[0].question is not None
    snapshot = observe(
        loaded.settings.project_id,
        backends.tracker,
        backends.forge,
        workers.roster,
        epic_children={},
    )
    JudgmentQueue(backends.db).sync(judgment_needs(snapshot.issues, views), set(JudgmentKind))
    backends.db.close()


def refused_by_the_relay(project: Path) -> None:
    """A worker asks the relay for an issue whose identifier is the corpus: refused, and
    logged (the action log quotes what it asked for)."""
    from legion.backends import open_backends
    from legion.config import load_project
    from legion.errors import LegionError
    from legion.relay.capabilities import Capabilities
    from legion.relay.client import RelayClient
    from legion.relay.server import RelayServer, socket_path
    from legion.services.session_ops import session_ops

    loaded = load_project(project)
    backends = open_backends(loaded)
    token = Capabilities(backends.db).mint("LEG-1", mode="implement", session_id="sid-1")
    path = socket_path(loaded.state_dir)
    server = RelayServer(
        path, lambda: open_backends(loaded, direct=True), ops=session_ops(loaded, os.environ)
    )
    server.start()
    try:
        with pytest.raises(LegionError):
            RelayClient(path, token).call(
                "tracker.add_comment", identifier=HOSTILE, body="hi", author="me", by_legion=True
            )
    finally:
        server.stop()
        backends.db.close()


def tampered_storage(project: Path) -> None:
    """LEG-1's title, body and comment, and a pull request and review, as a tracker or forge
    would hand them over (the CLI refuses such text on input, so it is written underneath)."""
    from legion.config import load_project

    with sqlite3.connect(load_project(project).db_path) as db:
        db.execute("UPDATE issues SET title = ?, body = ?", (HOSTILE, HOSTILE))
        db.execute("UPDATE comments SET body = ?, author = ?", (HOSTILE, HOSTILE))
        db.execute("UPDATE pull_requests SET title = ?, body = ?", (HOSTILE, HOSTILE))
        db.execute("UPDATE reviews SET body = ?, author = ?", (HOSTILE, HOSTILE))
    db.close()


def on_the_bus(project: Path) -> None:
    """A message, a task and an agent's name in the project's channel, in the corpus' words."""
    from legion.bus import bus_path, open_bus
    from legion.bus.model import AgentRole, Channel
    from legion.bus.sessions import project_channel_name
    from legion.config import load_project

    bus = open_bus(os.environ)
    try:
        channel = Channel(project_channel_name(load_project(project)), "main")
        agent = bus.register_agent(
            channel, "implement", role=AgentRole.IMPLEMENT, runtime="claude-code", session_id="s"
        )
        message = bus.post(agent.id, channel, "plain")
        task = bus.add_task(channel, "plain")
    finally:
        bus.close()
    # The bus refuses such text on input: written underneath, as a corrupted or older bus
    # (or a bug elsewhere) would hold it.
    with sqlite3.connect(bus_path(os.environ)) as db:
        db.execute("UPDATE messages SET body = ? WHERE id = ?", (HOSTILE, message.message.id))
        db.execute("UPDATE tasks SET title = ? WHERE id = ?", (HOSTILE, task.id))
        db.execute("UPDATE agents SET name = ? WHERE id = ?", (HOSTILE, agent.id))
    db.close()


@pytest.fixture
def embedded(legion: LegionRunner, project: Path, tmux_socket: Path) -> LegionRunner:
    assert legion("issue", "create", "Plain title", "--body", "plain").returncode == 0
    assert legion("issue", "comment", "LEG-1", "--body", "plain").returncode == 0
    git(project, "branch", "legion/leg-1")
    assert legion("pr", "create", "--issue", "LEG-1", "--branch", "legion/leg-1").returncode == 0
    assert legion("pr", "review", "1", "--comment", "--body", "plain").returncode == 0
    tampered_storage(project)
    blocked_worker(project)
    refused_by_the_relay(project)
    on_the_bus(project)

    def runner(*args: str) -> Result:
        return legion(*args, env={"COLUMNS": "1000"})

    return runner


def test_every_surface_escapes_the_same_corpus(embedded: LegionRunner) -> None:
    # `status`: the judgment quotes the worker's question, on one line; `log`: the relay's
    # refusal quotes the identifier it was sent; `peek`: the worker's screen, where the
    # terminal (tmux) already acted on the escape sequences but kept the bidi override.
    partly = {
        ("status",): ("\\x1b[2J", "\\u202eexe.txt", "[red]MARK[/red]"),
        ("peek", "LEG-1"): ("\\u202eexe.txt", "[red]MARK[/red]", "[link=https://evil.example/]"),
    }
    for args in (
        ("issue", "show", "LEG-1"),
        ("issue", "comments", "LEG-1"),
        ("issue", "list"),
        ("state",),
        ("pr", "view", "1"),
        ("pr", "list"),
        ("workers",),
        ("status",),
        ("log",),
        ("peek", "LEG-1"),
        ("messages",),
        ("task", "list"),
        ("agents",),
    ):
        out = ok(embedded(*args), args)
        whole = args not in partly
        assert_inert(out, where=" ".join(args), markup=whole, shown=whole)
        for fragment in partly.get(args, ()):
            assert fragment in out, (args, fragment, out)
        as_json = ok(embedded(*args, "--json"), args)
        assert_json_inert(as_json, where=" ".join((*args, "--json")))
