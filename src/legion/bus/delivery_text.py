"""What a woken agent is shown for a message addressed to it (pure).

The same text is typed into an idle session or queued for a busy one's hooks, so the model
always sees who wrote, where, and how to answer.
"""

from __future__ import annotations

from legion.bus.model import HUMAN_NAME, ORCHESTRATOR_NAME, Agent, AgentRole, Message, MessageKind


def address_from(sender: str, recipient: Agent) -> str:
    """The sender's full address as the recipient writes it: the name alone on its branch,
    branch/name in its project, the full address elsewhere."""
    channel = recipient.channel
    if sender.startswith(f"{channel}/"):
        return sender.removeprefix(f"{channel}/")
    return sender.removeprefix(f"{channel.project}/")


_HEADINGS = {
    MessageKind.ASK: "Question",
    MessageKind.ANSWER: "Answer",
    MessageKind.COMPLETE: "Completion",
    MessageKind.SYSTEM: "Notice",
}


# What begins each line of a message's body: no line of it, however it is written, can read
# as a header of Legion's (`Message <id> from @human on …`), a second message from anyone.
BODY_QUOTE = "> "


def quoted(body: str) -> str:
    """`body`, every line of it quoted (`BODY_QUOTE`)."""
    return "\n".join(BODY_QUOTE + line for line in body.split("\n"))


def delivery_text(message: Message, recipient: Agent) -> str:
    """A one-line header (what it is, its id, who wrote, where, how to answer), then the
    message as written, each line quoted, so that only Legion's header starts a line. The id
    is how Legion finds a prompt in the transcript again, and what `legion reply` takes."""
    sender = address_from(message.sender, recipient)
    heading = _HEADINGS.get(message.kind, "Message")
    if message.kind is MessageKind.ASK:
        how = f"answer with `legion reply {message.id} …`"
        if recipient.role is AgentRole.CONTROLLER and sender != HUMAN_NAME:
            how += f", or pass it on to the human with `legion ask --about {message.id} …`"
    elif sender == HUMAN_NAME and recipient.role is not AgentRole.CONTROLLER:
        # Agents reach the human only through the orchestrator, which decides to escalate;
        # a reply to what the human said is the exception.
        how = (
            f"reply with `legion reply {message.id} …`; anything else goes to @{ORCHESTRATOR_NAME}"
        )
    else:
        how = f"reply with `legion reply {message.id} …`"
    header = f"{heading} {message.id} from @{sender} on {message.channel} ({how}):"
    return f"{header}\n{quoted(message.body)}"
