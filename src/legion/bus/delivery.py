"""What a woken agent is shown for a message addressed to it (pure).

The same text is typed into an idle session or queued for a busy one's hooks, so the model
always sees who wrote, where, and how to answer.
"""

from __future__ import annotations

from legion.bus.model import HUMAN_NAME, ORCHESTRATOR_NAME, Agent, AgentRole, Message

# How a message handed over by typing it into an idle session is recorded in its inbox (the
# hooks record theirs by event name): the daemon marks those delivered itself.
TYPED = "typed"


def address_from(sender: str, recipient: Agent) -> str:
    """The sender's full address as the recipient writes it: the name alone on its branch,
    branch/name in its project, the full address elsewhere."""
    channel = recipient.channel
    if sender.startswith(f"{channel}/"):
        return sender.removeprefix(f"{channel}/")
    return sender.removeprefix(f"{channel.project}/")


def delivery_text(message: Message, recipient: Agent) -> str:
    """A one-line header (who wrote, where, how to answer), then the message as written."""
    sender = address_from(message.sender, recipient)
    if sender == HUMAN_NAME and recipient.role is not AgentRole.CONTROLLER:
        # Agents reach the human only through the orchestrator, which decides to escalate.
        how = f"answer with `legion say @{ORCHESTRATOR_NAME} …`, who passes it on to the human"
    else:
        how = f"answer with `legion say @{sender} …`"
    return f"Message from @{sender} on {message.channel} ({how}):\n{message.body}"
