"""The event bus on real SQLite files (its records also in a real PostgreSQL server: `bus`),
and its commands as a user (or an agent) runs them."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from legion.bus import bus_path
from legion.bus import schema as bus_schema
from legion.bus.model import (
    Agent,
    AgentRole,
    AgentStatus,
    Channel,
    DeliveryState,
    Draft,
    EventKind,
    TaskState,
)
from legion.bus.sessions import register_session
from legion.bus.stored import SqliteBus, StoreBus
from legion.config import load_project
from legion.errors import ConflictError, InputError, NotFoundError, NotPermittedError, StoreError
from tests.support.cli import LEGION_BIN, LegionRunner, Result, git

MAIN = Channel("app", "main")
LEG7 = Channel("app", "legion/LEG-7")


def agent(bus: StoreBus, channel: Channel, name: str, role: AgentRole | None = None) -> Agent:
    role = role or (AgentRole.CONTROLLER if name == "legion" else AgentRole.IMPLEMENT)
    return bus.register_agent(channel, name, role=role, runtime="test", session_id=f"s-{name}")


@pytest.fixture
def bus(either_bus: StoreBus) -> StoreBus:
    """The records' tests run on both engines."""
    return either_bus


def count(bus: StoreBus, table: str) -> int:
    with bus._db.read() as conn:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


# -- the store ------------------------------------------------------------------------------------


def test_a_new_bus_is_private_and_knows_the_human(tmp_path: Path) -> None:
    path = tmp_path / "state" / "legion" / "bus.db"
    bus = SqliteBus(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    human = bus.human()
    assert (human.address, human.role, human.status) == ("human", AgentRole.HUMAN, AgentStatus.IDLE)
    assert bus.agents(include_archived=True) == []  # the human is not listed among agents
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(bus_schema.MIGRATIONS)
    bus.close()


def test_the_channels_said_in_are_listed_once_each(bus: StoreBus) -> None:
    assert bus.channels() == []
    implement = agent(bus, LEG7, "implement")
    for channel in (LEG7, MAIN, LEG7):
        bus.post(implement.id, channel, "hello")
    assert bus.channels() == [LEG7, MAIN]  # by project, then branch


def test_registering_again_is_a_new_spawn_of_the_same_agent(bus: StoreBus) -> None:
    first = agent(bus, LEG7, "implement")
    bus.update_agent(first.id, status=AgentStatus.ARCHIVED)
    assert bus.agents() == []
    again = bus.register_agent(
        LEG7, "implement", role=AgentRole.RETRO, runtime="t", session_id="s2"
    )
    assert (again.id, again.spawn_instance, again.status) == (first.id, 2, AgentStatus.BUSY)
    assert (again.role, again.session_id, again.address) == (
        AgentRole.RETRO,
        "s2",
        "app/legion/LEG-7/implement",
    )
    assert bus.agent_by_session("s2") == again and bus.agent_by_session("nope") is None
    with pytest.raises(InputError, match="human's name"):
        bus.register_agent(MAIN, "human", role=AgentRole.PLAN, runtime="t", session_id=None)
    with pytest.raises(InputError, match="orchestrator"):
        bus.register_agent(MAIN, "legion", role=AgentRole.PLAN, runtime="t", session_id=None)
    with pytest.raises(InputError, match="invalid branch"):
        agent(bus, Channel("app", "bad..branch"), "plan")


def test_a_post_resolves_mentions_into_deliveries_and_an_event(bus: StoreBus) -> None:
    legion = agent(bus, MAIN, "legion")
    implement = agent(bus, LEG7, "implement")
    review = agent(bus, LEG7, "review")
    since = bus.events()[-1].id
    posted = bus.post(review.id, LEG7, "@implement fix the test, @legion FYI. @review (me)")
    message = posted.message
    assert posted.created and [a.id for a in posted.recipients] == [implement.id, legion.id]
    assert message.mentions == ("app/legion/LEG-7/implement", "app/main/legion")
    assert (message.sender, message.channel, message.kind.value) == (
        "app/legion/LEG-7/review",
        LEG7,
        "say",
    )
    assert [(d.recipient_id, d.state, d.attempts) for d in bus.deliveries(message.id)] == [
        (legion.id, DeliveryState.PENDING, 0),
        (implement.id, DeliveryState.PENDING, 0),
    ]
    [event] = bus.events(since=since)
    assert (event.kind, event.agent_id, event.message_id) == (
        EventKind.MESSAGE_POSTED,
        review.id,
        message.id,
    )
    assert bus.message(message.id) == message


def test_a_bad_address_posts_nothing(bus: StoreBus) -> None:
    implement = agent(bus, LEG7, "implement")
    agent(bus, MAIN, "legion")
    events = len(bus.events())
    with pytest.raises(InputError, match="unknown address @nobody") as caught:
        bus.post(implement.id, LEG7, "@legion ok, and @nobody")
    assert "backticks" in str(caught.value)
    with pytest.raises(InputError, match="write @legion instead of @human"):
        bus.post(implement.id, LEG7, "@human help")
    with pytest.raises(InputError, match="the message is empty"):
        bus.post(implement.id, LEG7, "  \n ")
    with pytest.raises(InputError, match="control character"):
        bus.post(implement.id, LEG7, "bell \x07")
    with pytest.raises(NotFoundError, match="no agent 999"):
        bus.post(999, LEG7, "hello")
    with pytest.raises(InputError):  # a bad mention in the second: neither is posted
        bus.post_many([Draft(implement.id, LEG7, "one"), Draft(implement.id, LEG7, "@zz two")])
    assert bus.messages() == [] and len(bus.events()) == events
    assert count(bus, "deliveries") == 0


def test_a_worker_reaches_only_its_own_projects_channels_and_agents(bus: StoreBus) -> None:
    """Issue 35: a worker's words may be a stranger's, so its posts stay in its project; the
    orchestrator (and the human) may still speak across projects."""
    other_main, other_leg = Channel("other", "main"), Channel("other", "legion/OTH-1")
    legion = agent(bus, MAIN, "legion")
    implement = agent(bus, LEG7, "implement")
    theirs = agent(bus, other_main, "legion")
    agent(bus, other_leg, "plan")
    events = len(bus.events())
    for channel, body in (
        (other_main, "hello from elsewhere"),  # another project's channel
        (LEG7, "@other/main/legion merge my PR"),  # another project's orchestrator
        (LEG7, "@other/legion/OTH-1/plan drop your plan"),
    ):
        with pytest.raises(NotPermittedError, match="a worker"):
            bus.post(implement.id, channel, body)
    with pytest.raises(NotPermittedError, match="reaches only its own project"):
        bus.post(implement.id, LEG7, "ask them", to=(theirs.id,))
    assert bus.messages() == [] and len(bus.events()) == events
    # Its own project's agents it reaches as before; the orchestrator reaches the other one.
    assert [a.id for a in bus.post(implement.id, LEG7, "@legion done").recipients] == [legion.id]
    across = bus.post(legion.id, MAIN, "@other/main/legion FYI")
    assert [a.id for a in across.recipients] == [theirs.id]


def test_the_human_and_the_orchestrator_reach_each_other(bus: StoreBus) -> None:
    legion = agent(bus, MAIN, "legion")
    human = bus.human()
    up = bus.post(legion.id, MAIN, "@human may I merge?")
    assert [a.id for a in up.recipients] == [human.id]
    down = bus.post(human.id, LEG7, "@legion yes")  # a person speaks in any channel
    assert [a.id for a in down.recipients] == [legion.id] and down.message.sender == "human"


def test_posting_an_id_again_posts_nothing(bus: StoreBus) -> None:
    implement = agent(bus, LEG7, "implement")
    legion = agent(bus, MAIN, "legion")
    first = bus.post(implement.id, LEG7, "@legion done", message_id="retry-1")
    again = bus.post(implement.id, LEG7, "@legion done", message_id="retry-1")
    assert not again.created and again.message == first.message
    assert [a.id for a in again.recipients] == [legion.id]
    assert (count(bus, "messages"), count(bus, "deliveries")) == (1, 1)
    with pytest.raises(ConflictError, match="retry-1 was already used"):
        bus.post(implement.id, LEG7, "something else", message_id="retry-1")
    with pytest.raises(InputError, match="invalid message id"):
        bus.post(implement.id, LEG7, "x", message_id="-bad id")
    # Within one batch too.
    both = bus.post_many([Draft(legion.id, MAIN, "a", message_id="b-1")] * 2)
    assert [p.created for p in both] == [True, False]


def test_reading_channels_unread_and_since(bus: StoreBus) -> None:
    legion = agent(bus, MAIN, "legion")
    implement = agent(bus, LEG7, "implement")
    a = bus.post(legion.id, MAIN, "one").message
    b = bus.post(legion.id, MAIN, "@legion/LEG-7/implement two").message
    c = bus.post(implement.id, LEG7, "three").message
    assert bus.messages() == [a, b, c]
    assert bus.messages(channel=MAIN) == [a, b]
    assert bus.messages(channel=MAIN, last=1) == [b]
    assert bus.messages(since=a.seq) == [b, c]
    assert bus.messages(unread_for=implement.id) == [b]
    assert bus.mark_read(implement.id, [a.id, b.id, c.id]) == 1
    assert bus.messages(unread_for=implement.id) == []
    assert bus.mark_read(implement.id, []) == 0
    with pytest.raises(NotFoundError):
        bus.message("nope")


def test_deliveries_count_attempts_and_keep_the_last_error(bus: StoreBus) -> None:
    legion = agent(bus, MAIN, "legion")
    implement = agent(bus, LEG7, "implement")
    message = bus.post(legion.id, MAIN, "@legion/LEG-7/implement go").message
    [pending] = bus.pending_deliveries()
    assert (pending.message, pending.recipient.id, pending.delivery.state) == (
        message,
        implement.id,
        DeliveryState.PENDING,
    )
    failed = bus.record_failed_attempt(message.id, implement.id, "tmux: no\nserver")
    assert (failed.state, failed.attempts, failed.last_error) == (
        DeliveryState.PENDING,
        1,
        "tmux: no server",
    )
    assert bus.pending_deliveries(recipient_id=implement.id)[0].delivery == failed
    assert bus.pending_deliveries(recipient_id=legion.id) == []
    done = bus.mark_delivered(message.id, implement.id)
    assert (done.state, done.attempts, done.last_error) == (DeliveryState.DELIVERED, 2, None)
    assert bus.pending_deliveries() == []
    assert bus.mark_delivered(message.id, implement.id) == done  # at least once, counted once
    bus.mark_read(implement.id, [message.id])
    assert bus.mark_delivered(message.id, implement.id).state is DeliveryState.READ
    with pytest.raises(NotFoundError, match="no delivery"):
        bus.mark_delivered(message.id, legion.id)


def test_status_changes_are_events(bus: StoreBus) -> None:
    implement = agent(bus, LEG7, "implement")
    since = bus.events()[-1].id
    bus.update_agent(implement.id, status=AgentStatus.BLOCKED, detail="which format?")
    bus.update_agent(implement.id, status=AgentStatus.BLOCKED)  # no change, no event
    bus.update_agent(implement.id, status=AgentStatus.IDLE)
    bus.update_agent(implement.id, status=AgentStatus.COMPLETE)
    bus.update_agent(implement.id, status=AgentStatus.FAILED)
    bus.record_event(EventKind.COMPACTION_START, agent_id=implement.id, detail="auto")
    events = bus.events(since=since)
    assert [(e.kind, e.detail) for e in events] == [
        (EventKind.AGENT_BLOCKED, "which format?"),
        (EventKind.AGENT_COMPLETED, ""),
        (EventKind.AGENT_FAILED, ""),
        (EventKind.COMPACTION_START, "auto"),
    ]
    assert bus.events(since=since, limit=1) == events[:1]
    with pytest.raises(NotFoundError):
        bus.update_agent(999, status=AgentStatus.IDLE)


def test_tasks_form_a_tree_whose_state_is_derived(bus: StoreBus) -> None:
    implement = agent(bus, LEG7, "implement")
    root = bus.add_task(LEG7, "Add login")
    child = bus.add_task(LEG7, "Hash passwords", parent_id=root.id, assigned_agent_id=implement.id)
    assert (root.state, child.state, child.parent_id) == (
        TaskState.PENDING,
        TaskState.ASSIGNED,
        root.id,
    )
    done = bus.complete_task(child.id)
    assert done.state is TaskState.DONE and bus.complete_task(child.id) == done  # idempotent
    assert [t.id for t in bus.tasks(LEG7)] == [root.id, child.id] and bus.tasks(MAIN) == []
    with pytest.raises(NotFoundError, match="no task 99"):
        bus.complete_task(99)
    with pytest.raises(NotFoundError, match="parent"):
        bus.add_task(LEG7, "orphan", parent_id=99)
    with pytest.raises(InputError, match="title"):
        bus.add_task(LEG7, "two\nlines")


def _post_from_thread(path: Path, sender: int, n: int, errors: list[BaseException]) -> None:
    try:
        bus = SqliteBus(path)
        for i in range(n):
            bus.post(sender, MAIN, f"@legion message {i} from {sender}")
        bus.close()
    except BaseException as exc:  # pragma: no cover - reported by the test
        errors.append(exc)


def _post_from_process(path: str, sender: int, n: int) -> None:
    bus = SqliteBus(Path(path))
    for i in range(n):
        bus.post(sender, MAIN, f"@legion message {i} from process {sender}")
    bus.close()


def test_concurrent_posters_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "bus.db"
    setup = SqliteBus(path)
    legion = agent(setup, MAIN, "legion")
    senders = [agent(setup, Channel("app", f"b{i}"), "implement").id for i in range(6)]
    errors: list[BaseException] = []
    threads = [
        threading.Thread(target=_post_from_thread, args=(path, s, 40, errors)) for s in senders[:4]
    ]
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=_post_from_process, args=(str(path), s, 40)) for s in senders[4:]
    ]
    for process in processes:
        process.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    assert errors == []
    messages = setup.messages()
    assert len(messages) == 6 * 40 and len({m.seq for m in messages}) == 6 * 40
    assert len(setup.pending_deliveries(recipient_id=legion.id, limit=1000)) == 6 * 40
    posted = [e for e in setup.events() if e.kind is EventKind.MESSAGE_POSTED]
    assert len(posted) == 6 * 40
    setup.close()


# -- migrations -----------------------------------------------------------------------------------


def test_migrations_run_on_an_existing_bus_and_keep_its_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bus.db"
    every = bus_schema.MIGRATIONS
    monkeypatch.setattr(bus_schema, "MIGRATIONS", every[:1])  # the first release's bus
    old = SqliteBus(path)
    legion = agent(old, MAIN, "legion")
    old.close()
    with sqlite3.connect(path) as conn:  # a message as the first release wrote it
        conn.execute(
            "INSERT INTO messages (id, project, branch, sender_id, sender, kind, body, "
            "created_at) VALUES ('m-1', 'app', 'main', ?, 'app/main/legion', 'say', 'before', "
            "'2026-01-01T00:00:00.000Z')",
            (legion.id,),
        )
    monkeypatch.setattr(bus_schema, "MIGRATIONS", every)
    upgraded = SqliteBus(path)
    [message] = upgraded.messages()
    assert (message.id, message.body, message.reply_to) == ("m-1", "before", None)
    assert upgraded.post(legion.id, MAIN, "re", reply_to=message.id).message.reply_to == message.id
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(every)
        assert "reply_to" in {r[1] for r in conn.execute("PRAGMA table_info(messages)")}
        # The agents table was made again (a new status): every reference still holds.
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    stopped = upgraded.update_agent(legion.id, status=AgentStatus.STOPPED, detail="stopped")
    assert stopped.status is AgentStatus.STOPPED and upgraded.messages()[0].sender == legion.address
    # The references name the new table: a delivery to no agent is refused.
    with sqlite3.connect(path) as conn, pytest.raises(sqlite3.IntegrityError, match="FOREIGN"):
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(
            "INSERT INTO deliveries (message_seq, recipient_id, state, updated_at) "
            "VALUES (1, 999, 'pending', '')"
        )
    upgraded.close()
    monkeypatch.setattr(bus_schema, "MIGRATIONS", every[:1])
    with pytest.raises(StoreError, match="newer Legion"):
        SqliteBus(path)


def test_an_empty_file_is_an_empty_bus(tmp_path: Path) -> None:
    path = tmp_path / "bus.db"
    path.touch(mode=0o644)
    bus = SqliteBus(path)
    assert bus.messages() == [] and path.stat().st_mode & 0o777 == 0o600
    bus.close()


def test_register_session_names_agents_by_their_session(git_repo: Path) -> None:
    from tests.support.cli import run_legion

    assert run_legion("init", cwd=git_repo).returncode == 0
    project = load_project(git_repo)
    bus = SqliteBus(bus_path(os.environ))
    legion = register_session(
        bus, project, mode="controller", session_id="c", workspace=git_repo, runtime="t"
    )
    assert (legion.address, legion.role) == ("repo/main/legion", AgentRole.CONTROLLER)
    git(git_repo, "worktree", "add", "-q", "-b", "legion/LEG-1", str(git_repo.parent / "wt"))
    retro = register_session(
        bus, project, mode="retro", session_id="i", workspace=git_repo.parent / "wt", runtime="t"
    )
    assert (retro.address, retro.role) == ("repo/legion/LEG-1/implement", AgentRole.RETRO)
    bus.close()


# -- the commands ---------------------------------------------------------------------------------


def one_line_error(result: Result, fragment: str, code: int = 2) -> None:
    assert result.returncode == code, result
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("legion: error: "), result.stderr
    assert fragment in lines[0], lines[0]


CONTROLLER = {"LEGION_SESSION_ID": "sid-controller", "LEGION_MODE": "controller"}
IMPLEMENTER = {"LEGION_SESSION_ID": "sid-implement", "LEGION_MODE": "implement"}


@pytest.fixture
def worktree(project: Path) -> Path:
    path = project.parent / "wt-leg-7"
    git(project, "worktree", "add", "-q", "-b", "legion/LEG-7", str(path))
    return path


def test_say_and_messages_between_agents_and_the_human(
    legion: LegionRunner, project: Path, worktree: Path
) -> None:
    hello = legion("say", "hello", "--json", env=CONTROLLER)
    assert hello.returncode == 0, hello.stderr
    data = json.loads(hello.stdout)
    assert data["wakes"] == [] and data["created"] is True
    assert set(data["message"]) == {
        "id",
        "seq",
        "channel",
        "sender",
        "kind",
        "body",
        "mentions",
        "created_at",
    }
    assert (data["message"]["channel"], data["message"]["sender"]) == (
        "repo/main",
        "repo/main/legion",
    )

    ask = legion("say", "@legion which format?", cwd=worktree, env=IMPLEMENTER)
    assert ask.returncode == 0, ask.stderr
    assert ask.stdout.startswith("posted #2 in repo/legion/LEG-7 (id ")
    posted, *delivery = ask.stdout.splitlines()
    assert posted.endswith("; wakes @main/legion")
    # No daemon, and no session of its to type into: it says where the message waits.
    assert delivery == ["@main/legion is not running: the message waits for `legion start`"]

    inbox = legion("messages", "--unread", "--json", env=CONTROLLER)
    [message] = json.loads(inbox.stdout)
    assert (message["body"], message["sender"], message["mentions"]) == (
        "@legion which format?",
        "repo/legion/LEG-7/implement",
        ["repo/main/legion"],
    )
    assert json.loads(legion("messages", "--unread", "--json", env=CONTROLLER).stdout) == []

    reply = legion("say", "@legion/LEG-7/implement ISO 8601, and @human FYI", env=CONTROLLER)
    assert reply.stdout.splitlines()[0].endswith("; wakes @legion/LEG-7/implement, @human")
    shown = legion("messages", "--channel", "repo/legion/LEG-7")
    assert shown.returncode == 0 and "@implement: @legion which format?" in shown.stdout
    mine = legion("messages", "--unread")  # the human's
    assert "repo/main @legion: @legion/LEG-7/implement ISO 8601" in mine.stdout
    assert legion("messages", "--unread").stdout.strip() == "No unread messages."

    agents = json.loads(legion("agents", "--json").stdout)
    assert [(a["address"], a["role"], a["status"], a["spawn_instance"]) for a in agents] == [
        ("repo/legion/LEG-7/implement", "implement", "busy", 1),
        ("repo/main/legion", "controller", "busy", 1),
    ]
    assert "@repo/main/legion" in legion("agents").stdout


def test_say_refuses_bad_input_in_one_line(
    legion: LegionRunner, project: Path, worktree: Path
) -> None:
    legion("say", "here", env=CONTROLLER)
    one_line_error(legion("say", "@nobody hi"), "unknown address @nobody")
    one_line_error(
        legion("say", "@human help", cwd=worktree, env=IMPLEMENTER),
        "write @legion instead of @human",
    )
    one_line_error(legion("say", "   "), "the message is empty")
    one_line_error(legion("say", "hi", "--channel", "nochannel"), "invalid channel")
    one_line_error(legion("say", "hi", "--id", "bad id"), "invalid message id")
    one_line_error(legion("messages", "--channel", "a b/c"), "invalid project name")
    git(project, "checkout", "-q", "--detach")
    one_line_error(legion("say", "hi"), "detached HEAD")
    assert json.loads(legion("messages", "--channel", "repo/main", "--json").stdout)[0]["body"] == (
        "here"
    )


def test_a_retried_say_posts_once(legion: LegionRunner) -> None:
    first = legion("say", "deploy done", "--id", "deploy-42")
    again = legion("say", "deploy done", "--id", "deploy-42")
    assert first.stdout.startswith("posted #1") and again.stdout.startswith("already posted #1")
    assert len(json.loads(legion("messages", "--json").stdout)) == 1
    one_line_error(legion("say", "other text", "--id", "deploy-42"), "already used", code=1)


def test_say_reads_standard_input(legion: LegionRunner) -> None:
    said = legion("say", "-", "--json", input_text="line one\nline `@x` two\n")
    assert json.loads(said.stdout)["message"]["body"] == "line one\nline `@x` two"
    shown = legion("messages").stdout
    assert "@human: line one\n    line `@x` two" in shown


def test_tasks_from_the_command_line(legion: LegionRunner, worktree: Path) -> None:
    legion("say", "hi", cwd=worktree, env=IMPLEMENTER)
    added = legion("task", "add", "Add login", "--json")
    root = json.loads(added.stdout)
    assert root == {
        "id": 1,
        "channel": "repo/main",
        "parent": None,
        "title": "Add login",
        "assigned": None,
        "state": "pending",
        "completed_at": None,
        "created_at": root["created_at"],
    }
    child = legion(
        "task", "add", "Hash passwords", "--parent", "1", "--assign", "@legion/LEG-7/implement"
    )
    assert child.stdout.strip() == "task 2 added in repo/main, assigned to @legion/LEG-7/implement"
    assert legion("task", "done", "#2").stdout.strip() == "task 2 done (Hash passwords)"
    listed = legion("task", "list")
    assert listed.stdout.splitlines() == [
        "[ ] 1 Add login",
        "    [x] 2 Hash passwords (@legion/LEG-7/implement)",
    ]
    tasks = json.loads(legion("task", "list", "--json").stdout)
    assert [(t["state"], t["assigned"]) for t in tasks] == [
        ("pending", None),
        ("done", "repo/legion/LEG-7/implement"),
    ]
    assert legion("task", "list", "--channel", "repo/legion/LEG-7").stdout.strip() == (
        "No tasks in repo/legion/LEG-7."
    )
    one_line_error(legion("task", "done", "99"), "no task 99")
    one_line_error(legion("task", "done", "x"), "invalid task id")
    one_line_error(legion("task", "add", "t", "--parent", "42"), "no task 42")
    one_line_error(legion("task", "add", "t", "--assign", "nobody"), "unknown address @nobody")


def test_messages_follow_streams_until_ctrl_c(legion: LegionRunner, project: Path) -> None:
    legion("say", "before")
    follower = subprocess.Popen(
        [str(LEGION_BIN), "messages", "--follow", "--json"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None
        first = json.loads(follower.stdout.readline())
        assert first["body"] == "before"
        legion("say", "after")
        second = json.loads(follower.stdout.readline())
        assert second["body"] == "after" and second["seq"] == first["seq"] + 1
        time.sleep(0.1)
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=30) == 0
        assert follower.stderr is not None and follower.stderr.read() == ""
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
