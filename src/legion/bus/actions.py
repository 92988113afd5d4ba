"""What agents and the human do on the bus: say, ask, reply, complete, archive, kill.

The CLI and the TUI both call these, so a rule (who may kill, what an answer unblocks, when a
signal is stale) is written once. They take the bus and the acting agent and return what was
posted or changed; anything outside the bus (a tracker label, a tmux window) is the caller's,
handed in as a function where an action needs it.
"""

from __future__ import annotations

from collections.abc import Callable

from legion.bus import Bus
from legion.bus.model import (
    HUMAN_NAME,
    ORCHESTRATOR_NAME,
    Agent,
    AgentRole,
    AgentStatus,
    Channel,
    Message,
    MessageKind,
    Posted,
)
from legion.errors import (
    ConflictError,
    InputError,
    NotFoundError,
    NotPermittedError,
    StaleSignalError,
)

# Who may spawn, kill and archive others, and address the human directly: the seed's one
# privilege, the orchestrator's (and the human's, who is above it).
_IN_CHARGE = frozenset({AgentRole.CONTROLLER, AgentRole.HUMAN})
# What an agent may still be told after it ended: a message wakes it (the daemon resumes it).
_ENDED = frozenset(
    {AgentStatus.COMPLETE, AgentStatus.FAILED, AgentStatus.ARCHIVED, AgentStatus.STOPPED}
)


def check_current(agent: Agent, spawn_instance: int | None) -> None:
    """Refuse a signal (ask, complete) from an earlier spawn of `agent`: a killed session's
    late "done" must never act on the session that replaced it."""
    if spawn_instance is not None and spawn_instance != agent.spawn_instance:
        raise StaleSignalError(
            f"ignored: this session is spawn {spawn_instance} of @{agent.address}, which is now "
            f"spawn {agent.spawn_instance}; a replaced session's signals do nothing"
        )


def say(
    bus: Bus, sender: Agent, channel: Channel, body: str, *, message_id: str | None = None
) -> Posted:
    """Post in `channel`; each @mention wakes the agent it names."""
    return bus.post(sender.id, channel, body, message_id=message_id)


def orchestrator_of(bus: Bus, project: str) -> Agent:
    """The project's orchestrator (`@legion`), whichever branch it is on."""
    found = [a for a in bus.agents(include_archived=True) if a.project == project]
    for agent in found:
        if agent.name == ORCHESTRATOR_NAME:
            return agent
    raise NotFoundError(
        f"project {project!r} has no orchestrator on the bus yet (`legion start` starts it)"
    )


def ask(
    bus: Bus,
    asker: Agent,
    body: str,
    *,
    about: str | None = None,
    message_id: str | None = None,
    spawn_instance: int | None = None,
) -> Posted:
    """Ask a question and wait for the answer: the asker is blocked until one comes.

    An agent asks its project's orchestrator (`@legion`), which answers, asks the Oracle, or
    passes the question on to the human: `about` names the question it passes on, and the
    human's answer then goes back to the agent that asked. The orchestrator's own questions go
    to the human."""
    if asker.role is AgentRole.HUMAN:
        raise InputError("the human answers questions (`legion reply`); to ask, `legion say`")
    asker = bus.agent(asker.id)
    check_current(asker, spawn_instance)
    if about is not None:
        if asker.role is not AgentRole.CONTROLLER:
            raise NotPermittedError(
                f"only @{ORCHESTRATOR_NAME} passes a question on to the human; "
                f"ask @{ORCHESTRATOR_NAME} instead"
            )
        question = bus.message(about)
        if question.kind is not MessageKind.ASK:
            raise InputError(f"message {about} is not a question (it is a {question.kind.value})")
    if asker.role is AgentRole.CONTROLLER:
        to = bus.human()
        channel = asker.channel if about is None else bus.message(about).channel
    else:
        to = orchestrator_of(bus, asker.project)
        channel = asker.channel
    posted = bus.post(
        asker.id,
        channel,
        body,
        kind=MessageKind.ASK,
        message_id=message_id,
        reply_to=about,
        to=(to.id,),
    )
    if posted.created and asker.role is not AgentRole.CONTROLLER:
        # The orchestrator is never blocked by a question it passes on: it has others to run.
        bus.update_agent(asker.id, status=AgentStatus.BLOCKED, detail=posted.message.id)
    return posted


def thread_askers(bus: Bus, question: Message) -> list[Message]:
    """The question and, when it passes another one on (an escalation), that one too, and so
    on back to the first: every asker in the chain is owed the answer."""
    chain = [question]
    seen = {question.id}
    while chain[-1].reply_to is not None and chain[-1].kind is MessageKind.ASK:
        try:
            earlier = bus.message(chain[-1].reply_to)
        except NotFoundError:
            break
        if earlier.id in seen or earlier.kind is not MessageKind.ASK:
            break
        seen.add(earlier.id)
        chain.append(earlier)
    return chain


def reply(
    bus: Bus, sender: Agent, message_id: str, body: str, *, reply_id: str | None = None
) -> Posted:
    """Reply to a message, in its channel, addressed to whoever wrote it. A reply to a
    question is its answer: it goes to every asker down the chain of escalations, whose
    sessions it wakes (the asker is busy again once it is delivered)."""
    original = bus.message(message_id)
    if original.kind is MessageKind.ASK and sender.role is not AgentRole.HUMAN:
        _addressee_of(bus, sender, original)
    chain = thread_askers(bus, original) if original.kind is MessageKind.ASK else [original]
    to: list[int] = []
    for message in chain:
        author = _author(bus, message)
        if author is not None and author.id != sender.id and author.id not in to:
            to.append(author.id)
    if not to:
        raise InputError(f"message {message_id} is your own: there is nobody to reply to")
    kind = MessageKind.ANSWER if original.kind is MessageKind.ASK else MessageKind.SAY
    return bus.post(
        sender.id,
        original.channel,
        body,
        kind=kind,
        message_id=reply_id,
        reply_to=original.id,
        to=tuple(to),
    )


def _addressee_of(bus: Bus, sender: Agent, question: Message) -> None:
    """A question is answered by whom it asks (a worker's, the orchestrator; the
    orchestrator's, the human), or by a person: knowing its id is not enough, or a worker could
    answer another's question, or the human's, with whatever it likes."""
    if sender.id not in {delivery.recipient_id for delivery in bus.deliveries(question.id)}:
        asked = ", ".join(f"@{address}" for address in question.mentions) or "someone else"
        raise NotPermittedError(
            f"question {question.id} asks {asked}, not you: only they (or a person) answer it"
        )


def _author(bus: Bus, message: Message) -> Agent | None:
    if message.sender == HUMAN_NAME:
        return bus.human()
    try:
        return bus.resolve_agent(message.sender, message.channel)
    except (InputError, NotFoundError):
        return None  # its author is gone from the bus


def human_inbox(bus: Bus) -> list[Message]:
    """Every question waiting for the human, across projects, oldest first."""
    return bus.open_questions(bus.human().id)


def complete(
    bus: Bus,
    agent: Agent,
    summary: str | None,
    *,
    spawn_instance: int | None = None,
    signal: Callable[[Agent], None] | None = None,
) -> Posted:
    """The agent's mode is done. `signal` writes what the swarm acts on (a worker's tracker
    label); it runs first, so a completion the tracker did not take is not announced. The
    completion is posted in the agent's channel for people and the TUI, and wakes nobody: the
    reconciler moves the issue on from the label, which costs no model turn."""
    if agent.role is AgentRole.HUMAN:
        raise InputError("the human has no mode to complete; `legion complete` is for agents")
    current = bus.agent(agent.id)
    check_current(current, spawn_instance)
    if signal is not None:
        signal(current)
    text = summary.strip() if summary and summary.strip() else f"{current.name} done"
    posted = bus.post(current.id, current.channel, text, kind=MessageKind.COMPLETE, to=())
    bus.update_agent(current.id, status=AgentStatus.COMPLETE, detail=text[:200])
    return posted


def _in_charge(actor: Agent, target: Agent, what: str) -> None:
    if actor.role not in _IN_CHARGE:
        raise NotPermittedError(
            f"only @{ORCHESTRATOR_NAME} and the human may {what} an agent; "
            f"ask with `legion say @{ORCHESTRATOR_NAME} …`"
        )
    if target.role is AgentRole.HUMAN:
        raise InputError(f"the human is no agent to {what}")


def archive(bus: Bus, actor: Agent, target: Agent) -> Agent:
    """Hide an agent from the lists (its messages stay). It comes back by itself when it is
    started or prompted again."""
    if target.role is AgentRole.HUMAN:
        raise InputError("the human cannot be archived")
    if actor.id != target.id:
        _in_charge(actor, target, "archive")
    current = bus.agent(target.id)
    if current.status is AgentStatus.ARCHIVED:
        return current
    return bus.update_agent(
        current.id, status=AgentStatus.ARCHIVED, detail=f"archived by @{actor.address}"
    )


def unarchive(bus: Bus, agent: Agent) -> Agent:
    """An archived agent prompted again is back in the lists (idle until it runs)."""
    if agent.status is not AgentStatus.ARCHIVED:
        return agent
    return bus.update_agent(agent.id, status=AgentStatus.IDLE, detail="prompted again")


def kill(
    bus: Bus,
    actor: Agent,
    target: Agent,
    *,
    force: bool = False,
    stop: Callable[[Agent], bool] | None = None,
) -> Agent:
    """End an agent's session. A busy agent is in the middle of a turn: killing it needs
    `force`. `stop` closes its session (True if one was running); the agent is then failed,
    with who killed it."""
    _in_charge(actor, target, "kill")
    current = bus.agent(target.id)
    if current.id == actor.id:
        raise InputError("an agent cannot kill itself; `legion complete` ends your mode")
    if current.status is AgentStatus.BUSY and not force:
        raise ConflictError(
            f"@{current.address} is busy (in the middle of a turn); "
            "`legion kill -f` kills it anyway"
        )
    stopped = stop(current) if stop is not None else False
    if not stopped and current.status in _ENDED:
        return current
    how = "force-killed" if force else "killed"
    return bus.update_agent(
        current.id, status=AgentStatus.FAILED, detail=f"{how} by @{actor.address}"
    )
