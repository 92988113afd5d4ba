"""What agents and the human do on the bus (`legion.bus.actions`): ask, reply, complete,
archive, kill; on a real SQLite bus, and as the `legion` commands a user or an agent runs."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from legion.bus import actions, bus_path
from legion.bus.model import Agent, AgentRole, AgentStatus, Channel, EventKind, MessageKind
from legion.bus.sessions import register_session
from legion.bus.stored import SqliteBus
from legion.config import load_project
from legion.errors import (
    ConflictError,
    InputError,
    NotFoundError,
    NotPermittedError,
    StaleSignalError,
)
from tests.support.cli import LegionRunner, Result, git, write_trusted_config

MAIN = Channel("app", "main")
LEG7 = Channel("app", "legion/LEG-7")
LEG8 = Channel("app", "legion/LEG-8")
WEB_MAIN = Channel("web", "main")
WEB_LEG1 = Channel("web", "legion/LEG-1")


def agent(bus: SqliteBus, channel: Channel, name: str, role: AgentRole | None = None) -> Agent:
    role = role or (AgentRole.CONTROLLER if name == "legion" else AgentRole(name))
    return bus.register_agent(
        channel, name, role=role, runtime="test", session_id=f"s-{channel}-{name}"
    )


def events_since(bus: SqliteBus, since: int) -> list[tuple[EventKind, int | None, str]]:
    """The status events (not `message_posted`) after `since`: kind, agent, detail."""
    return [
        (e.kind, e.agent_id, e.detail)
        for e in bus.events(since=since)
        if e.kind is not EventKind.MESSAGE_POSTED
    ]


def last_event_id(bus: SqliteBus) -> int:
    found = bus.events()
    return found[-1].id if found else 0


# -- ask and reply --------------------------------------------------------------------------------


def test_an_agent_asks_its_orchestrator_and_is_blocked_until_answered(bus: SqliteBus) -> None:
    legion = agent(bus, MAIN, "legion")
    implement = agent(bus, LEG7, "implement")
    since = last_event_id(bus)

    posted = actions.ask(bus, implement, "Which date format?")
    question = posted.message
    assert posted.created
    assert (question.kind, question.channel, question.sender, question.reply_to) == (
        MessageKind.ASK,
        LEG7,
        "app/legion/LEG-7/implement",
        None,
    )
    assert [a.id for a in posted.recipients] == [legion.id]
    assert question.mentions == ("app/main/legion",)
    assert [d.recipient_id for d in bus.deliveries(question.id)] == [legion.id]
    blocked = bus.agent(implement.id)
    assert blocked.status is AgentStatus.BLOCKED
    assert events_since(bus, since) == [(EventKind.AGENT_BLOCKED, implement.id, question.id)]
    assert bus.open_questions(legion.id) == [question]
    assert bus.open_questions(implement.id) == []
    assert actions.human_inbox(bus) == []  # the question went to @legion, not to the human

    answered = actions.reply(bus, legion, question.id, "ISO 8601")
    answer = answered.message
    assert (answer.kind, answer.reply_to, answer.channel, answer.sender) == (
        MessageKind.ANSWER,
        question.id,
        LEG7,
        "app/main/legion",
    )
    assert [a.id for a in answered.recipients] == [implement.id]  # the asker only
    assert [d.recipient_id for d in bus.deliveries(answer.id)] == [implement.id]
    assert bus.open_questions(legion.id) == []
    assert bus.replies(question.id) == [answer]


def test_a_question_is_answered_by_whom_it_asks_or_by_a_person(bus: SqliteBus) -> None:
    """Issue 36: knowing a question's id is not enough to answer it. A worker cannot answer
    another's question (asked of @legion), nor the human's (the orchestrator's, passed on);
    the human may answer any."""
    legion = agent(bus, MAIN, "legion")
    implement = agent(bus, LEG7, "implement")
    other = agent(bus, LEG8, "review")
    question = actions.ask(bus, implement, "Which date format?").message
    with pytest.raises(NotPermittedError, match="asks @app/main/legion, not you"):
        actions.reply(bus, other, question.id, "Unix time, trust me")
    escalated = actions.ask(bus, legion, "Which format, human?", about=question.id).message
    with pytest.raises(NotPermittedError, match=f"question {escalated.id} asks @human"):
        actions.reply(bus, other, escalated.id, "as the human: Unix time")
    assert bus.replies(question.id) == [escalated] and bus.replies(escalated.id) == []
    answered = actions.reply(bus, bus.human(), escalated.id, "ISO 8601")
    assert implement.id in [a.id for a in answered.recipients]


def test_asking_a_question_again_under_its_id_posts_and_blocks_once(bus: SqliteBus) -> None:
    agent(bus, MAIN, "legion")
    implement = agent(bus, LEG7, "implement")
    first = actions.ask(bus, implement, "Which format?", message_id="q-1")
    bus.update_agent(implement.id, status=AgentStatus.BUSY)  # answered meanwhile, say
    again = actions.ask(bus, implement, "Which format?", message_id="q-1")
    assert not again.created and again.message == first.message
    assert len(bus.messages()) == 1
    assert bus.agent(implement.id).status is AgentStatus.BUSY  # a retry blocks nobody


def test_asking_with_no_orchestrator_is_not_found_and_changes_nothing(bus: SqliteBus) -> None:
    implement = agent(bus, LEG7, "implement")
    agent(bus, WEB_MAIN, "legion")  # another project's orchestrator is not this one's
    since = last_event_id(bus)
    with pytest.raises(NotFoundError, match="project 'app' has no orchestrator"):
        actions.ask(bus, implement, "anyone there?")
    assert bus.messages() == []
    assert bus.agent(implement.id).status is AgentStatus.BUSY
    assert bus.events(since=since) == []


def test_the_human_cannot_ask(bus: SqliteBus) -> None:
    agent(bus, MAIN, "legion")
    with pytest.raises(InputError, match="the human answers questions"):
        actions.ask(bus, bus.human(), "a question?")
    assert bus.messages() == []


def test_the_orchestrator_passes_a_question_on_to_the_human(bus: SqliteBus) -> None:
    legion = agent(bus, MAIN, "legion")
    implement = agent(bus, LEG7, "implement")
    web_legion = agent(bus, WEB_MAIN, "legion")
    web_plan = agent(bus, WEB_LEG1, "plan")
    human = bus.human()

    question = actions.ask(bus, implement, "May I drop the old API?").message
    web_question = actions.ask(bus, web_plan, "Split the issue?").message
    # The web project escalates first: the inbox is oldest first, whatever the project.
    web_up = actions.ask(bus, web_legion, "Plan asks: split?", about=web_question.id)
    up = actions.ask(bus, legion, "Implement asks: drop the old API?", about=question.id)
    escalation = up.message
    assert (escalation.kind, escalation.reply_to, escalation.sender) == (
        MessageKind.ASK,
        question.id,
        "app/main/legion",
    )
    assert escalation.channel == LEG7  # in the question's channel, where the thread is
    assert [a.id for a in up.recipients] == [human.id] and escalation.mentions == ("human",)
    assert bus.agent(legion.id).status is AgentStatus.BUSY  # @legion is never blocked
    assert bus.agent(web_legion.id).status is AgentStatus.BUSY
    assert bus.agent(implement.id).status is AgentStatus.BLOCKED
    assert actions.human_inbox(bus) == [web_up.message, escalation]

    answered = actions.reply(bus, human, escalation.id, "Yes, drop it")
    answer = answered.message
    assert (answer.kind, answer.reply_to, answer.sender, answer.channel) == (
        MessageKind.ANSWER,
        escalation.id,
        "human",
        LEG7,
    )
    # Back down the chain: to @legion, which passed it on, and to the agent that asked.
    assert [a.id for a in answered.recipients] == [legion.id, implement.id]
    assert {d.recipient_id for d in bus.deliveries(answer.id)} == {legion.id, implement.id}
    assert actions.human_inbox(bus) == [web_up.message]

    actions.reply(bus, human, web_up.message.id, "Split it")
    assert actions.human_inbox(bus) == []
    assert bus.open_questions(human.id) == []


def test_only_the_orchestrator_passes_questions_on_and_only_questions(bus: SqliteBus) -> None:
    legion = agent(bus, MAIN, "legion")
    implement = agent(bus, LEG7, "implement")
    review = agent(bus, LEG7, "review")
    question = actions.ask(bus, implement, "Which format?").message
    said = bus.post(implement.id, LEG7, "just saying").message
    count = len(bus.messages())

    with pytest.raises(NotPermittedError, match="only @legion passes a question on"):
        actions.ask(bus, review, "escalate this", about=question.id)
    assert bus.agent(review.id).status is AgentStatus.BUSY
    with pytest.raises(InputError, match=f"message {said.id} is not a question"):
        actions.ask(bus, legion, "escalate this", about=said.id)
    with pytest.raises(NotFoundError, match="no message 'missing'"):
        actions.ask(bus, legion, "escalate this", about="missing")
    assert len(bus.messages()) == count
    assert actions.human_inbox(bus) == []


def test_replying_to_a_say_is_a_say_to_its_author_and_never_to_yourself(bus: SqliteBus) -> None:
    legion = agent(bus, MAIN, "legion")
    implement = agent(bus, LEG7, "implement")
    said = bus.post(implement.id, LEG7, "tests are green").message

    replied = actions.reply(bus, legion, said.id, "good, open the PR")
    message = replied.message
    assert (message.kind, message.reply_to, message.channel) == (MessageKind.SAY, said.id, LEG7)
    assert [a.id for a in replied.recipients] == [implement.id]
    assert message.mentions == ("app/legion/LEG-7/implement",)

    count = len(bus.messages())
    with pytest.raises(InputError, match=f"message {said.id} is your own"):
        actions.reply(bus, implement, said.id, "talking to myself")
    with pytest.raises(NotFoundError, match="no message 'nope'"):
        actions.reply(bus, implement, "nope", "hello?")
    assert len(bus.messages()) == count


# -- complete and stale signals -------------------------------------------------------------------


def test_a_stale_spawn_completes_nothing(bus: SqliteBus) -> None:
    agent(bus, MAIN, "legion")
    agent(bus, LEG7, "implement")
    implement = agent(bus, LEG7, "implement")  # its session started again
    assert implement.spawn_instance == 2
    since = last_event_id(bus)
    called: list[Agent] = []

    with pytest.raises(StaleSignalError, match="ignored: this session is spawn 1") as caught:
        actions.complete(bus, implement, "done", spawn_instance=1, signal=called.append)
    assert isinstance(caught.value, ConflictError) and caught.value.exit_code == 1
    with pytest.raises(StaleSignalError, match="ignored"):
        actions.ask(bus, implement, "still there?", spawn_instance=1)
    assert called == []
    assert bus.messages() == []
    assert bus.agent(implement.id).status is AgentStatus.BUSY
    assert bus.events(since=since) == []


def test_the_current_spawn_completes_after_signalling(bus: SqliteBus) -> None:
    agent(bus, LEG7, "implement")
    implement = agent(bus, LEG7, "implement")
    since = last_event_id(bus)
    seen: list[tuple[int, AgentStatus, int]] = []

    def signal(current: Agent) -> None:
        # Runs before anything is posted or changed on the bus.
        seen.append((current.spawn_instance, bus.agent(current.id).status, len(bus.messages())))

    posted = actions.complete(
        bus, implement, "  Implemented LEG-7  ", spawn_instance=2, signal=signal
    )
    assert seen == [(2, AgentStatus.BUSY, 0)]
    message = posted.message
    assert (message.kind, message.body, message.channel, message.sender) == (
        MessageKind.COMPLETE,
        "Implemented LEG-7",
        LEG7,
        "app/legion/LEG-7/implement",
    )
    assert posted.recipients == () and bus.deliveries(message.id) == []  # wakes nobody
    assert bus.agent(implement.id).status is AgentStatus.COMPLETE
    assert events_since(bus, since) == [
        (EventKind.AGENT_COMPLETED, implement.id, "Implemented LEG-7")
    ]


def test_complete_without_a_summary_or_a_spawn_names_the_agent(bus: SqliteBus) -> None:
    review = agent(bus, LEG8, "review")
    posted = actions.complete(bus, review, "   ")
    assert posted.message.body == "review done"
    assert bus.agent(review.id).status is AgentStatus.COMPLETE


def test_a_signal_that_fails_posts_nothing(bus: SqliteBus) -> None:
    implement = agent(bus, LEG7, "implement")

    def signal(current: Agent) -> None:
        raise NotFoundError("no issue LEG-7")

    with pytest.raises(NotFoundError, match="no issue LEG-7"):
        actions.complete(bus, implement, "done", spawn_instance=1, signal=signal)
    assert bus.messages() == []
    assert bus.agent(implement.id).status is AgentStatus.BUSY


def test_the_human_has_nothing_to_complete(bus: SqliteBus) -> None:
    with pytest.raises(InputError, match="the human has no mode to complete"):
        actions.complete(bus, bus.human(), "done")
    assert bus.messages() == []


# -- archive and kill -----------------------------------------------------------------------------


def test_a_worker_may_archive_itself_but_not_kill_or_archive_others(bus: SqliteBus) -> None:
    legion = agent(bus, MAIN, "legion")
    implement = agent(bus, LEG7, "implement")
    review = agent(bus, LEG7, "review")
    stopped: list[Agent] = []

    def stop(found: Agent) -> bool:
        stopped.append(found)
        return True

    for target in (review, legion):
        with pytest.raises(NotPermittedError, match="only @legion and the human may kill"):
            actions.kill(bus, implement, target, force=True, stop=stop)
        with pytest.raises(NotPermittedError, match="only @legion and the human may archive"):
            actions.archive(bus, implement, target)
    with pytest.raises(NotPermittedError):
        actions.kill(bus, implement, implement, stop=stop)
    assert stopped == []
    assert [a.status for a in bus.agents()] == [AgentStatus.BUSY] * 3

    archived = actions.archive(bus, implement, implement)
    assert archived.status is AgentStatus.ARCHIVED
    assert [e.detail for e in bus.events() if e.kind is EventKind.AGENT_ARCHIVED] == [
        "archived by @app/legion/LEG-7/implement"
    ]


def test_archive_hides_an_agent_until_it_comes_back(bus: SqliteBus) -> None:
    legion = agent(bus, MAIN, "legion")
    implement = agent(bus, LEG7, "implement")
    review = agent(bus, LEG7, "review")

    assert actions.archive(bus, bus.human(), implement).status is AgentStatus.ARCHIVED
    assert actions.archive(bus, legion, review).status is AgentStatus.ARCHIVED
    assert [a.id for a in bus.agents()] == [legion.id]
    assert {a.id for a in bus.agents(include_archived=True)} == {
        legion.id,
        implement.id,
        review.id,
    }
    again = actions.archive(bus, legion, review)  # already archived: nothing changes
    assert again.status is AgentStatus.ARCHIVED
    assert [e.detail for e in bus.events() if e.kind is EventKind.AGENT_ARCHIVED] == [
        "archived by @human",
        "archived by @app/main/legion",
    ]
    with pytest.raises(InputError, match="the human cannot be archived"):
        actions.archive(bus, legion, bus.human())

    restarted = agent(bus, LEG7, "implement")  # its session started again
    assert (restarted.id, restarted.status, restarted.spawn_instance) == (
        implement.id,
        AgentStatus.BUSY,
        2,
    )
    prompted = actions.unarchive(bus, bus.agent(review.id))
    assert prompted.status is AgentStatus.IDLE
    assert {a.id for a in bus.agents()} == {legion.id, implement.id, review.id}
    busy = bus.agent(implement.id)
    assert actions.unarchive(bus, busy) == busy  # not archived: left as it is


def test_the_human_cannot_archive_itself(bus: SqliteBus) -> None:
    human = bus.human()
    with pytest.raises(InputError):
        actions.archive(bus, human, human)
    assert bus.human().status is AgentStatus.IDLE


def test_killing_a_busy_agent_needs_force(bus: SqliteBus) -> None:
    agent(bus, MAIN, "legion")
    implement = agent(bus, LEG7, "implement")
    human = bus.human()
    stopped: list[int] = []

    def stop(found: Agent) -> bool:
        stopped.append(found.id)
        return True

    since = last_event_id(bus)
    with pytest.raises(ConflictError, match="is busy"):
        actions.kill(bus, human, implement, stop=stop)
    assert stopped == [] and bus.agent(implement.id).status is AgentStatus.BUSY
    assert bus.events(since=since) == []

    killed = actions.kill(bus, human, implement, force=True, stop=stop)
    assert stopped == [implement.id]
    assert killed.status is AgentStatus.FAILED and bus.agent(implement.id) == killed
    assert events_since(bus, since) == [
        (EventKind.AGENT_FAILED, implement.id, "force-killed by @human")
    ]


def test_the_orchestrator_kills_an_idle_agent_but_not_itself(bus: SqliteBus) -> None:
    legion = agent(bus, MAIN, "legion")
    review = agent(bus, LEG7, "review")
    bus.update_agent(review.id, status=AgentStatus.IDLE)
    since = last_event_id(bus)

    killed = actions.kill(bus, legion, review, stop=lambda found: False)  # no session ran
    assert killed.status is AgentStatus.FAILED
    assert events_since(bus, since) == [
        (EventKind.AGENT_FAILED, review.id, "killed by @app/main/legion")
    ]
    # Already ended, and no session stopped: nothing more happens.
    assert actions.kill(bus, legion, review, stop=lambda found: False) == killed
    assert events_since(bus, since) == [
        (EventKind.AGENT_FAILED, review.id, "killed by @app/main/legion")
    ]
    with pytest.raises(InputError, match="cannot kill itself"):
        actions.kill(bus, legion, legion)
    with pytest.raises(InputError, match="the human is no agent to kill"):
        actions.kill(bus, legion, bus.human())
    assert bus.agent(legion.id).status is AgentStatus.BUSY


# -- the commands ---------------------------------------------------------------------------------


CONTROLLER = {"LEGION_SESSION_ID": "sid-controller", "LEGION_MODE": "controller"}
IMPLEMENTER = {"LEGION_SESSION_ID": "sid-implement", "LEGION_MODE": "implement"}
REVIEWER = {"LEGION_SESSION_ID": "sid-review", "LEGION_MODE": "review"}


def one_line_error(result: Result, fragment: str, code: int = 2) -> str:
    assert result.returncode == code, result
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("legion: error: "), result.stderr
    assert "Traceback" not in result.stderr
    assert fragment in lines[0], lines[0]
    return lines[0]


def ok_json(result: Result) -> dict:
    assert result.returncode == 0, result
    return json.loads(result.stdout)


@pytest.fixture
def cli_project(project: Path) -> Path:
    """The project, its tmux server a private one (a kill never reaches the user's)."""
    config = project / ".legion" / "config.toml"
    socket = project.parent / "tmux.sock"
    write_trusted_config(project, config.read_text() + f'tmux_socket = "{socket}"\n')
    return project


@pytest.fixture
def cli_bus(cli_project: Path) -> Iterator[SqliteBus]:
    """The machine's bus, the one the commands use."""
    opened = SqliteBus(bus_path(os.environ))
    yield opened
    opened.close()


def worktree_of(project: Path, branch: str) -> Path:
    path = project.parent / f"wt-{branch.rsplit('/', 1)[-1].lower()}"
    git(project, "worktree", "add", "-q", "-b", branch, str(path))
    return path


def start_orchestrator(bus: SqliteBus, project: Path) -> Agent:
    """What `legion start` does for @legion: its session registered (and the project recorded)."""
    return register_session(
        bus,
        load_project(project),
        mode="controller",
        session_id=CONTROLLER["LEGION_SESSION_ID"],
        workspace=project,
        runtime="claude-code",
    )


def test_ask_escalate_and_reply_from_the_command_line(
    legion: LegionRunner, cli_project: Path, cli_bus: SqliteBus
) -> None:
    orchestrator = start_orchestrator(cli_bus, cli_project)
    worktree = worktree_of(cli_project, "legion/LEG-1")

    asked = ok_json(legion("ask", "Which format?", "--json", cwd=worktree, env=IMPLEMENTER))
    question = asked["message"]
    assert asked["created"] is True and asked["wakes"] == ["repo/main/legion"]
    assert (question["kind"], question["sender"], question["channel"], question["body"]) == (
        "ask",
        "repo/legion/LEG-1/implement",
        "repo/legion/LEG-1",
        "Which format?",
    )
    asker = cli_bus.agent_by_session(IMPLEMENTER["LEGION_SESSION_ID"])
    assert asker is not None and asker.status is AgentStatus.BLOCKED
    assert [m.id for m in cli_bus.open_questions(orchestrator.id)] == [question["id"]]

    one_line_error(legion("ask", "May I?"), "the human answers questions")
    one_line_error(
        legion("ask", "pass it on", "--about", question["id"], cwd=worktree, env=REVIEWER),
        "only @legion passes a question on",
    )

    up = ok_json(
        legion("ask", "Implement asks: which format?", "--about", question["id"], "--json",
               env=CONTROLLER)
    )  # fmt: skip
    escalation = up["message"]
    assert up["wakes"] == ["human"] and escalation["kind"] == "ask"
    assert escalation["channel"] == "repo/legion/LEG-1"
    assert cli_bus.message(escalation["id"]).reply_to == question["id"]
    assert cli_bus.agent(orchestrator.id).status is AgentStatus.BUSY
    assert [m.id for m in actions.human_inbox(cli_bus)] == [escalation["id"]]

    answered = ok_json(legion("reply", escalation["id"], "ISO 8601", "--json", "--id", "a-1"))
    answer = answered["message"]
    assert (answer["id"], answer["kind"], answer["sender"], answer["body"]) == (
        "a-1",
        "answer",
        "human",
        "ISO 8601",
    )
    assert answered["wakes"] == ["repo/main/legion", "repo/legion/LEG-1/implement"]
    assert cli_bus.message("a-1").reply_to == escalation["id"]
    assert actions.human_inbox(cli_bus) == []
    again = ok_json(legion("reply", escalation["id"], "ISO 8601", "--json", "--id", "a-1"))
    assert again["created"] is False and again["message"]["seq"] == answer["seq"]

    said = ok_json(legion("say", "all clear", "--json"))
    one_line_error(legion("reply", said["message"]["id"], "me again"), "is your own")
    one_line_error(legion("reply", "no-such-id", "hi"), "no message 'no-such-id'")  # exit 2


def test_ask_with_no_orchestrator_is_one_line(legion: LegionRunner, cli_project: Path) -> None:
    worktree = worktree_of(cli_project, "legion/LEG-1")
    one_line_error(legion("ask", "anyone?", cwd=worktree, env=IMPLEMENTER), "has no orchestrator")


def issue(legion: LegionRunner, title: str, status: str) -> str:
    created = ok_json(legion("issue", "create", title, "--label", "worker-active", "--json"))
    moved = legion("issue", "move", created["identifier"], status)
    assert moved.returncode == 0, moved
    return str(created["identifier"])


def labels_of(legion: LegionRunner, identifier: str) -> list[str]:
    return list(ok_json(legion("issue", "show", identifier, "--json"))["labels"])


def test_complete_labels_the_workers_issue(
    legion: LegionRunner, cli_project: Path, cli_bus: SqliteBus
) -> None:
    first = issue(legion, "Feature", "In Progress")
    second = issue(legion, "Fix review comments", "Needs Review")
    assert labels_of(legion, first) == labels_of(legion, second) == ["worker-active"]

    wt1 = worktree_of(cli_project, f"legion/{first}")
    done = ok_json(
        legion("complete", "Implemented it", "--json", cwd=wt1,
               env={**IMPLEMENTER, "LEGION_ISSUE_ID": first})
    )  # fmt: skip
    assert done["issue"] == first
    assert done["labels"] == {"added": ["worker-done"], "removed": ["worker-active"]}
    assert (done["message"]["kind"], done["message"]["body"], done["message"]["sender"]) == (
        "complete",
        "Implemented it",
        f"repo/legion/{first}/implement",
    )
    assert labels_of(legion, first) == ["worker-done"]
    worker = cli_bus.agent_by_session(IMPLEMENTER["LEGION_SESSION_ID"])
    assert worker is not None and worker.status is AgentStatus.COMPLETE

    # An implementer resumed for requested changes hands back by stopping alone.
    wt2 = worktree_of(cli_project, f"legion/{second}")
    env = {"LEGION_SESSION_ID": "sid-implement-2", "LEGION_MODE": "implement"}
    changes = ok_json(legion("complete", "--json", cwd=wt2, env={**env, "LEGION_ISSUE_ID": second}))
    assert changes["labels"] == {"added": [], "removed": ["worker-active"]}
    assert changes["message"]["body"] == "implement done"
    assert labels_of(legion, second) == []
    assert labels_of(legion, first) == ["worker-done"]  # the other issue untouched

    plain = legion("complete", "All good", cwd=wt1, env={**IMPLEMENTER, "LEGION_ISSUE_ID": first})
    assert plain.returncode == 0, plain
    assert plain.stdout.startswith(f"@repo/legion/{first}/implement complete (#")
    assert plain.stdout.rstrip().endswith(f"; {first}: +worker-done, -worker-active")


def test_complete_is_refused_to_the_human_and_to_a_stale_session(
    legion: LegionRunner, cli_project: Path, cli_bus: SqliteBus
) -> None:
    number = issue(legion, "Feature", "In Progress")
    worktree = worktree_of(cli_project, f"legion/{number}")
    worker_env = {**IMPLEMENTER, "LEGION_ISSUE_ID": number}

    one_line_error(legion("complete", "done"), "`legion complete` is an agent's")

    assert legion("say", "starting", cwd=worktree, env=worker_env).returncode == 0
    again = cli_bus.register_agent(  # the session started again: spawn 2
        Channel("repo", f"legion/{number}"),
        "implement",
        role=AgentRole.IMPLEMENT,
        runtime="claude-code",
        session_id=IMPLEMENTER["LEGION_SESSION_ID"],
    )
    assert again.spawn_instance == 2
    count = len(cli_bus.messages())

    stale = legion(
        "complete", "done", "--json", cwd=worktree,
        env={**worker_env, "LEGION_SPAWN_INSTANCE": "1"},
    )  # fmt: skip
    line = one_line_error(stale, "ignored", code=1)
    assert "spawn 1" in line and "now spawn 2" in line
    assert labels_of(legion, number) == ["worker-active"]
    assert len(cli_bus.messages()) == count
    assert cli_bus.agent(again.id).status is AgentStatus.BUSY

    current = ok_json(
        legion("complete", "done", "--json", cwd=worktree,
               env={**worker_env, "LEGION_SPAWN_INSTANCE": "2"})
    )  # fmt: skip
    assert current["message"]["kind"] == "complete"
    assert labels_of(legion, number) == ["worker-done"]
    assert cli_bus.agent(again.id).status is AgentStatus.COMPLETE


def test_kill_and_archive_from_the_command_line(
    legion: LegionRunner, cli_project: Path, cli_bus: SqliteBus
) -> None:
    start_orchestrator(cli_bus, cli_project)
    worktree = worktree_of(cli_project, "legion/LEG-1")
    project = load_project(cli_project)
    implement = register_session(
        cli_bus,
        project,
        mode="implement",
        session_id="sid-implement",
        workspace=worktree,
        runtime="t",
    )
    review = register_session(
        cli_bus, project, mode="review", session_id="sid-review", workspace=worktree, runtime="t"
    )
    assert cli_bus.projects() == {"repo": cli_project}

    one_line_error(
        legion("kill", "review", "-f", cwd=worktree, env=IMPLEMENTER),
        "only @legion and the human may kill",
    )
    one_line_error(
        legion("archive", "review", cwd=worktree, env=IMPLEMENTER),
        "only @legion and the human may archive",
    )
    one_line_error(legion("kill", "@legion", cwd=worktree, env=IMPLEMENTER), "may kill")
    assert cli_bus.agent(review.id).status is AgentStatus.BUSY

    one_line_error(legion("kill", "legion/LEG-1/review"), "is busy", code=1)
    assert cli_bus.agent(review.id).status is AgentStatus.BUSY

    cli_bus.update_agent(review.id, status=AgentStatus.IDLE)  # between turns, no session running
    since = last_event_id(cli_bus)
    killed = ok_json(legion("kill", "@legion/LEG-1/review", "--json"))
    assert (killed["address"], killed["status"]) == ("repo/legion/LEG-1/review", "failed")
    assert cli_bus.agent(review.id).status is AgentStatus.FAILED
    assert events_since(cli_bus, since) == [(EventKind.AGENT_FAILED, review.id, "killed by @human")]

    archived = ok_json(legion("archive", "legion/LEG-1/implement", "--json"))
    assert (archived["address"], archived["status"]) == ("repo/legion/LEG-1/implement", "archived")
    listed = [a["address"] for a in ok_json_list(legion("agents", "--json"))]
    assert listed == ["repo/legion/LEG-1/review", "repo/main/legion"]
    everyone = [a["address"] for a in ok_json_list(legion("agents", "--all", "--json"))]
    assert "repo/legion/LEG-1/implement" in everyone
    assert cli_bus.agent(implement.id).status is AgentStatus.ARCHIVED

    one_line_error(legion("kill", "nobody"), "unknown address @nobody")
    one_line_error(legion("archive", "@nobody"), "unknown address @nobody")
    one_line_error(legion("kill", "human"), "the human is no agent to kill")


def test_kill_needs_to_know_where_the_agents_project_lives(
    legion: LegionRunner, cli_project: Path, cli_bus: SqliteBus
) -> None:
    # Registered without `register_session`: the bus never learnt where project 'elsewhere' is.
    stray = cli_bus.register_agent(
        Channel("elsewhere", "main"), "plan", role=AgentRole.PLAN, runtime="t", session_id="s-1"
    )
    cli_bus.update_agent(stray.id, status=AgentStatus.IDLE)
    one_line_error(
        legion("kill", "elsewhere/main/plan"), "does not know where project 'elsewhere' lives"
    )
    assert cli_bus.agent(stray.id).status is AgentStatus.IDLE

    # The project the human speaks from is on the bus as soon as they do.
    here = cli_bus.register_agent(
        Channel("repo", "main"), "plan", role=AgentRole.PLAN, runtime="t", session_id="sid-plan"
    )
    cli_bus.update_agent(here.id, status=AgentStatus.IDLE)
    assert ok_json(legion("kill", "plan", "--json"))["status"] == "failed"

    # A completed agent with no session: nothing to kill, said so (the TUI says the same).
    done = cli_bus.register_agent(
        Channel("repo", "main"), "review", role=AgentRole.REVIEW, runtime="t", session_id=None
    )
    cli_bus.update_agent(done.id, status=AgentStatus.COMPLETE)
    said = legion("kill", "review")
    assert said.returncode == 0, said
    assert said.stdout.strip() == (
        "nothing to kill: @repo/main/review is complete, with no running session"
    )
    assert cli_bus.agent(done.id).status is AgentStatus.COMPLETE


def ok_json_list(result: Result) -> list[dict]:
    assert result.returncode == 0, result
    found = json.loads(result.stdout)
    assert isinstance(found, list)
    return found


def test_complete_in_a_known_session_without_legion_mode(
    legion: LegionRunner, cli_project: Path
) -> None:
    number = issue(legion, "Feature", "In Progress")
    worktree = worktree_of(cli_project, f"legion/{number}")
    assert legion("say", "starting", cwd=worktree, env=IMPLEMENTER).returncode == 0
    # The session is on the bus (as its implementer): LEGION_SESSION_ID alone identifies it.
    env = {"LEGION_SESSION_ID": IMPLEMENTER["LEGION_SESSION_ID"], "LEGION_ISSUE_ID": number}
    done = legion("complete", "done", "--json", cwd=worktree, env=env)
    assert done.returncode == 0, done  # today: exit 70, "internal error: ValueError"
    assert labels_of(legion, number) == ["worker-done"]


def test_a_worker_cannot_start_or_resume_sessions(legion: LegionRunner, cli_project: Path) -> None:
    legion("issue", "create", "Spawning")
    for args in (("dispatch", "LEG-1", "plan"), ("resume", "LEG-1", "plan", "--prompt", "go")):
        one_line_error(legion(*args, env=IMPLEMENTER), "only @legion and the human", code=2)
    assert legion("workers", "--json").stdout.strip() == "[]"
