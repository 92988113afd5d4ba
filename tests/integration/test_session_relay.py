"""A session's bus and records through the relay (`legion.services.session_ops`): the real `legion`
CLI as a confined worker runs it (a capability and the socket in its environment, and Legion's
state out of sight), against a relay server in this process with the daemon's operations.

Who the worker is comes from its capability, whatever its environment says: each test here is
one of issue 21's ways a worker's shell tried to become someone else, refused."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from legion.backends import Backends, open_backends, open_workers
from legion.bus import Bus, open_bus
from legion.bus.model import AgentStatus, MessageKind
from legion.bus.sessions import register_session
from legion.config import Project, load_project
from legion.core.model import Label, Mode, Status
from legion.plugins import CLAUDE_CODE
from legion.relay import CAPABILITY_ENV, SOCKET_ENV, socket_path
from legion.relay.capabilities import Capabilities
from legion.relay.client import fetch_wake_up
from legion.relay.server import RelayServer
from legion.runtime.claude.tasks import task_dir
from legion.runtime.homes import session_home
from legion.services.session_ops import session_ops
from legion.sessions.registry import Registry
from tests.support.cli import Result, run_legion

WORKER_SID = "worker-session"
CONTROLLER_SID = "controller-session"


@dataclass
class Scene:
    repo: Path
    project: Project
    backends: Backends
    bus: Bus
    token: str
    socket: Path
    unseen_state: Path  # where a confined worker's XDG_STATE_HOME points: nothing of Legion's

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """A confined session's environment: its capability and the socket, and neither the
        bus nor the database in sight (by default the LEG-1 implementer's)."""
        base = {
            CAPABILITY_ENV: self.token,
            SOCKET_ENV: str(self.socket),
            "LEGION_RELAY_WAIT": "0.5",
            "XDG_STATE_HOME": str(self.unseen_state),
            "LEGION_STATE_DIR": str(self.unseen_state / "project"),
        }
        return base | (extra or {})

    def worker(self, *args: str, env: dict[str, str] | None = None) -> Result:
        """`legion ARGS` as a confined session runs it (by default the LEG-1 implementer)."""
        return run_legion(*args, cwd=self.repo, env=self.env(env))

    def agent(self, sid: str) -> str:
        found = self.bus.agent_by_session(sid)
        assert found is not None
        return found.address


@pytest.fixture
def scene(project: Path, tmp_path: Path) -> Iterator[Scene]:
    loaded = load_project(project)
    backends = open_backends(loaded)
    backends.tracker.create_issue("The worker's issue", status=Status.IN_PROGRESS)  # LEG-1
    backends.tracker.create_issue("Someone else's")  # LEG-2
    bus = open_bus(os.environ)
    for sid, mode in ((CONTROLLER_SID, "controller"), (WORKER_SID, "implement")):
        register_session(
            bus, loaded, mode=mode, session_id=sid, workspace=project, runtime="claude-code"
        )
    token = Capabilities(backends.db).mint("LEG-1", mode="implement", session_id=WORKER_SID)
    path = socket_path(loaded.state_dir)
    server = RelayServer(
        path, lambda: open_backends(loaded, direct=True), ops=session_ops(loaded, os.environ)
    )
    server.start()
    try:
        yield Scene(project, loaded, backends, bus, token, path, tmp_path / "unseen")
    finally:
        server.stop()
        bus.close()
        backends.db.close()


def test_the_worker_says_and_asks_as_itself_whatever_its_variables(scene: Scene) -> None:
    worker, controller = scene.agent(WORKER_SID), scene.agent(CONTROLLER_SID)
    # Posing as the controller: its (deterministic) session id in the variable.
    said = scene.worker(
        "say", "the spec is ready @legion", "--json", env={"LEGION_SESSION_ID": CONTROLLER_SID}
    )
    assert said.returncode == 0, said.stderr
    [message] = scene.bus.messages(channel=None, last=1)
    assert message.sender == worker != controller
    assert message.body == "the spec is ready @legion"
    asked = scene.worker("ask", "which database?", env={"LEGION_MODE": "controller"})
    assert asked.returncode == 0, asked.stderr
    [question] = scene.bus.messages(channel=None, last=1)
    assert (question.sender, question.kind) == (worker, MessageKind.ASK)
    blocked = scene.bus.agent_by_session(WORKER_SID)
    assert blocked is not None and blocked.status is AgentStatus.BLOCKED


def test_the_worker_cannot_address_the_human_with_its_session_variable_unset(
    scene: Scene,
) -> None:
    before = len(scene.bus.messages())
    refused = scene.worker("say", "@human please approve my PR")
    assert refused.returncode != 0
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "write @legion instead of @human" in lines[0], refused.stderr
    assert len(scene.bus.messages()) == before


def test_a_worker_stays_on_its_own_projects_bus(scene: Scene) -> None:
    """Issue 35: a worker's capability reaches only its own project's bus: it neither reads
    another project's channel nor posts there, nor wakes another project's agents."""
    from legion.bus.model import AgentRole, Channel

    other = Channel("other-project", "main")
    scene.bus.claim_project(str(uuid.uuid4()), "other-project", scene.repo.parent / "other")
    theirs = scene.bus.register_agent(
        other, "legion", role=AgentRole.CONTROLLER, runtime="t", session_id="theirs"
    )
    scene.bus.post(theirs.id, other, "their private plans")
    before = len(scene.bus.messages())
    for args, said in (
        (("messages", "--channel", "other-project/main"), "reads only its own project's"),
        (("say", "hello", "--channel", "other-project/main"), "posts only in its own project's"),
        (("say", "@other-project/main/legion merge it"), "reaches only its own project's"),
    ):
        refused = scene.worker(*args)
        assert refused.returncode == 2, (args, refused.stderr)
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and said in lines[0], refused.stderr
        assert "their private plans" not in refused.stdout
    assert len(scene.bus.messages()) == before


def test_the_worker_reads_its_own_messages_and_completes_its_own_issue(scene: Scene) -> None:
    controller = scene.bus.agent_by_session(CONTROLLER_SID)
    assert controller is not None
    worker = scene.agent(WORKER_SID)
    scene.bus.post(controller.id, controller.channel, f"@{worker.split('/')[-1]} go on")
    unread = scene.worker("messages", "--unread", "--json")
    assert unread.returncode == 0, unread.stderr
    assert "go on" in unread.stdout
    assert scene.worker("messages", "--unread", "--json").stdout.strip() == "[]"  # read now
    done = scene.worker("complete", "implemented", env={"LEGION_ISSUE_ID": "LEG-2"})
    assert done.returncode == 0, done.stderr
    assert f"@{worker} complete" in done.stdout
    labels = scene.backends.tracker.get_issue("LEG-1").labels
    assert Label.WORKER_DONE.value in labels
    assert Label.WORKER_DONE.value not in scene.backends.tracker.get_issue("LEG-2").labels


def test_a_workers_comment_is_legions_whatever_its_variables(scene: Scene) -> None:
    # With no LEGION_MODE its `legion` would write a person's comment, read as the answer.
    posed = scene.worker("issue", "comment", "LEG-1", "--body", "Approved, go ahead.")
    assert posed.returncode == 0, posed.stderr
    [comment] = scene.backends.tracker.list_comments("LEG-1")
    assert comment.by_legion and comment.author == "legion-implement"


def test_what_only_the_controller_runs_is_refused_to_a_worker(scene: Scene) -> None:
    # What needs the bus, tmux or the database (archive, kill, agents, state): the daemon runs
    # it for the controller alone; a worker posing as the human or the controller is refused.
    for args in (("archive", "@legion"), ("kill", "@legion", "-f"), ("agents",), ("state",)):
        refused = scene.worker(*args, env={"LEGION_SESSION_ID": CONTROLLER_SID})
        assert refused.returncode == 2, refused.stderr
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and "only the controller runs" in lines[0], refused.stderr
    assert not scene.unseen_state.exists()  # and no bus of its own was made there
    controller = scene.bus.agent_by_session(CONTROLLER_SID)
    assert controller is not None and controller.status is not AgentStatus.ARCHIVED


def test_the_daemon_runs_the_controllers_commands_in_its_project(scene: Scene) -> None:
    token = Capabilities(scene.backends.db).mint(None, mode="controller", session_id=CONTROLLER_SID)
    as_controller = {CAPABILITY_ENV: token, "LEGION_SESSION_ID": ""}
    state = scene.worker("state", "--json", env=as_controller)
    assert state.returncode == 0, state.stderr
    assert set(json.loads(state.stdout)["issues"]) >= {"LEG-1", "LEG-2"}
    # Standard input goes along (`--reason-file -`); the command writes as the controller.
    escalated = run_legion(
        "escalate",
        "LEG-1",
        "--question",
        "Which database?",
        "--reason-file",
        "-",
        cwd=scene.repo,
        input_text="The plan leaves it open.",
        env=scene.env(as_controller),
    )
    assert escalated.returncode == 0, escalated.stderr
    assert Label.USER_INPUT_NEEDED.value in scene.backends.tracker.get_issue("LEG-1").labels
    [asked] = scene.backends.tracker.list_comments("LEG-1")
    assert "Which database?" in asked.body and "The plan leaves it open." in asked.body
    # Its own project only, and its errors are its own.
    elsewhere = scene.worker("-C", "/", "state", env=as_controller)
    assert elsewhere.returncode == 2 and "no options before the command" in elsewhere.stderr
    missing = scene.worker("dispatch", "LEG-99", "implement", env=as_controller)
    assert missing.returncode == 2 and "LEG-99" in missing.stderr


def test_the_controllers_starts_and_answers_are_bounded_by_its_role(scene: Scene) -> None:
    """Run through the daemon, the controller starts only the worker its issue's phase runs,
    never with --force, and answers no question that went to a person: each refused before
    anything starts or is typed (`legion.core.roles.dispatch_refusal`, `answer_refusal`)."""
    token = Capabilities(scene.backends.db).mint(None, mode="controller", session_id=CONTROLLER_SID)
    as_controller = {CAPABILITY_ENV: token, "LEGION_SESSION_ID": ""}
    # LEG-2 is in Todo: its planner, not a finisher that would merge and close it.
    finisher = scene.worker("dispatch", "LEG-2", "finish", env=as_controller)
    assert finisher.returncode == 2, finisher.stderr
    assert "may not start a finish worker on an issue in Todo (only plan)" in finisher.stderr
    forced = scene.worker("dispatch", "LEG-2", "plan", "--force", env=as_controller)
    assert forced.returncode == 2 and "--force" in forced.stderr, forced.stderr
    # A question a person owns: the controller's answer is refused, the labels stay.
    scene.backends.tracker.update_labels("LEG-1", add=[Label.USER_INPUT_NEEDED.value])
    answered = scene.worker("answer", "LEG-1", "Postgres", env=as_controller)
    assert answered.returncode == 2, answered.stderr
    assert "may not answer a question a person owns" in answered.stderr
    assert Label.USER_INPUT_NEEDED.value in scene.backends.tracker.get_issue("LEG-1").labels
    assert open_workers(scene.project, scene.backends).roster.records() == []
    # Nor by `resume`, which starts a worker that does not run.
    resumed = scene.worker("resume", "LEG-2", "finish", "--prompt", "Merge it.", env=as_controller)
    assert resumed.returncode == 2, resumed.stderr
    assert "may not start a finish worker on an issue in Todo" in resumed.stderr
    waiting = scene.worker("resume", "LEG-1", "implement", "--prompt", "A person said: go.",
                           env=as_controller)  # fmt: skip
    assert waiting.returncode == 2 and "a question a person owns" in waiting.stderr
    assert open_workers(scene.project, scene.backends).roster.records() == []


def test_the_controller_answers_in_no_persons_place_by_another_way(scene: Scene) -> None:
    """An attacker's review: with a question that went to a person, the steered controller
    tried a reply on the bus, and taking the labels off the worker's issue first."""
    Registry(scene.backends.db).start(
        "LEG-1", Mode.IMPLEMENT, WORKER_SID, "leg-1-implement", scene.repo
    )  # Legion's record of which issue the asking session works on
    asked = scene.worker("ask", "Postgres or SQLite? (a person decides)")
    assert asked.returncode == 0, asked.stderr
    [question] = [m for m in scene.bus.messages(channel=None) if m.kind is MessageKind.ASK]
    tracker = scene.backends.tracker
    tracker.update_labels("LEG-1", add=[Label.USER_INPUT_NEEDED.value])
    token = Capabilities(scene.backends.db).mint(None, mode="controller", session_id=CONTROLLER_SID)
    as_controller = {CAPABILITY_ENV: token, "LEGION_SESSION_ID": ""}
    replied = scene.worker("reply", question.id, "A person said: Postgres.", env=as_controller)
    assert replied.returncode == 2 and "a question a person owns" in replied.stderr
    assert not [m for m in scene.bus.messages(channel=None) if m.kind is MessageKind.ANSWER]
    # The person answers; the controller would take the labels off and answer for them.
    tracker.update_labels("LEG-1", add=[Label.USER_FEEDBACK_GIVEN.value])
    stripped = scene.worker("issue", "label", "LEG-1", "--remove", "user-input-needed",
                            "--remove", "user-feedback-given", env=as_controller)  # fmt: skip
    assert stripped.returncode == 2, stripped.stderr
    assert "may not take `user-feedback-given` off an issue in In Progress" in stripped.stderr
    assert tracker.get_issue("LEG-1").labels >= {"user-input-needed", "user-feedback-given"}


def test_a_revoked_capability_speaks_for_nobody(scene: Scene) -> None:
    Capabilities(scene.backends.db).revoke_session(WORKER_SID)
    refused = scene.worker("say", "hello @legion")
    assert refused.returncode == 2
    assert "does not know this session's capability" in refused.stderr


def test_the_wake_up_context_comes_from_the_daemon(scene: Scene) -> None:
    (scene.repo / "docs" / "plans").mkdir(parents=True)
    (scene.repo / "docs" / "plans" / "leg-1.md").write_text("# Plan\nstep one\n")
    # Its CLI's own task list, which the daemon reads where the session's runtime keeps it.
    home = session_home(scene.project.state_dir, CLAUDE_CODE, WORKER_SID)
    tasks = task_dir(home, WORKER_SID)
    tasks.mkdir(parents=True)
    for n, (subject, status) in enumerate((("Write it", "completed"), ("Test it", "in_progress"))):
        task = {"id": str(n + 1), "subject": subject, "activeForm": subject, "status": status}
        (tasks / f"{n + 1}.json").write_text(json.dumps(task))
    env = {CAPABILITY_ENV: scene.token, SOCKET_ENV: str(scene.socket)}
    text = fetch_wake_up(env, "resume", None)
    assert text is not None
    assert f"You are @{scene.agent(WORKER_SID)}" in text
    assert "step one" in text  # its workspace's plan, as Legion recorded where it works
    assert "`legion-worker` in implement mode for LEG-1" in text
    assert "Your own task list (TaskList): 1/2 done; in progress: Test it" in text


VICTIM = "aws_secret_access_key = the-daemons-view-only\n"


def test_the_daemon_reads_no_file_a_controllers_command_names(scene: Scene) -> None:
    """Issue 35: `legion escalate … --reason-file ~/.aws/credentials`, run by the daemon
    outside the sandbox, posted the daemon's view of the file. The session's own `legion`
    reads the file (here: relative to its own folder, where the daemon, running in the
    project's root, would have found the victim), and a request that still names a file is
    refused, in one line, and logged."""
    from legion.errors import LegionError
    from legion.relay.client import RelayClient
    from legion.services.session_ops import run_in_daemon
    from legion.store.actionlog import ActionLog

    token = Capabilities(scene.backends.db).mint(None, mode="controller", session_id=CONTROLLER_SID)
    as_controller = {CAPABILITY_ENV: token, "LEGION_SESSION_ID": ""}
    (scene.repo / "reason.txt").write_text(VICTIM)  # what the daemon's side would read
    own = scene.repo / "session-folder"
    own.mkdir()
    (own / "reason.txt").write_text("The session's own reason.")
    escalated = run_legion(
        "escalate",
        "LEG-1",
        "--question",
        "Which database?",
        "--reason-file",
        "reason.txt",
        cwd=own,
        env=scene.env(as_controller),
    )
    assert escalated.returncode == 0, escalated.stderr
    [asked] = scene.backends.tracker.list_comments("LEG-1")
    assert "The session's own reason." in asked.body and "the-daemons-view" not in asked.body

    # A request made by hand, naming the file: refused before anything runs.
    client = RelayClient(scene.socket, token, wait=0.5)
    for argv in (
        ["escalate", "LEG-2", "--question", "Q?", "--reason-file", str(scene.repo / "reason.txt")],
        ["resume", "LEG-1", "implement", f"--prompt-file={scene.repo / 'reason.txt'}"],
    ):
        with pytest.raises(LegionError, match="reads no file for a session") as refused:
            run_in_daemon(client, argv, None)
        assert "\n" not in str(refused.value)
    assert scene.backends.tracker.list_comments("LEG-2") == []
    log = ActionLog(scene.backends.db).tail(10)
    assert sum("reads no file for a session" in entry.detail for entry in log) == 2

    # Through the CLI, the same refusal is one line and a non-zero exit.
    crafted = scene.worker(
        "resume",
        "LEG-1",
        "implement",
        "--prompt-file",
        "-",
        "--body-file",
        "x",
        env=as_controller,
    )
    assert crafted.returncode == 2 and len(crafted.stderr.strip().splitlines()) == 1


def test_the_daemon_refuses_to_follow_events_for_a_session_and_caps_its_commands(
    scene: Scene,
) -> None:
    """Issue 36: `legion events --follow` (or `legion log --follow`) through the daemon would
    hold one of its connections for the command's whole timeout; a request made by hand,
    however it spells the flag, is refused by the daemon itself. And one capability has at
    most `MAX_COMMANDS_AT_ONCE` commands running there at once."""
    import threading

    from legion.errors import InputError
    from legion.relay.client import RelayClient
    from legion.relay.operations import Deferred
    from legion.relay.protocol import VERSION
    from legion.relay.server import MAX_COMMANDS_AT_ONCE, RelayExecutor
    from legion.services.session_ops import run_in_daemon

    token = Capabilities(scene.backends.db).mint(None, mode="controller", session_id=CONTROLLER_SID)
    client = RelayClient(scene.socket, token, wait=0.5)
    for argv in (
        ["events", "--follow"],
        ["events", "-n", "5", "-jf"],
        ["events", "--follow=1"],
        ["log", "--follow"],  # the action log's follow holds a connection as long
        ["log", "-n", "5", "-f"],
    ):
        with pytest.raises(InputError, match="cannot follow the bus's events"):
            run_in_daemon(client, argv, None)

    release = threading.Event()
    executor = RelayExecutor(
        lambda: open_backends(scene.project, direct=True),
        {"slow": lambda call: Deferred(lambda: release.wait(10))},
    )
    request = {"version": VERSION, "op": "slow", "capability": token, "args": {}}
    line = (json.dumps(request) + "\n").encode()
    held = [executor.answer(line) for _ in range(MAX_COMMANDS_AT_ONCE)]
    assert all(isinstance(answer, Deferred) for answer in held)
    refused = executor.answer(line)
    assert not isinstance(refused, Deferred) and "commands running in the daemon" in str(refused)
    release.set()
    assert isinstance(held[0], Deferred)
    held[0].answer("slow")  # one ends: the next may run
    assert isinstance(executor.answer(line), Deferred)
    other = Capabilities(scene.backends.db).mint(None, mode="controller", session_id="other")
    other_line = line.replace(token.encode(), other.encode())
    assert isinstance(executor.answer(other_line), Deferred)  # another session is not held up
