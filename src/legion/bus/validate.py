"""What the bus accepts, checked the same by every implementation: channels, message ids and
bodies, a draft made of them, and an agent's name for its role (all pure); and a fresh (random)
message id. Agent and project names are read where addresses are (`legion.bus.address`).
"""

from __future__ import annotations

import os
import re

from legion.bus.address import clean_agent_name, clean_project_name
from legion.bus.model import HUMAN_NAME, ORCHESTRATOR_NAME, AgentRole, Channel, Draft
from legion.core.text import clean_body, clean_branch
from legion.errors import InputError

# Client-chosen message ids: a UUID, or any short token a client can make unique.
_MESSAGE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


def new_message_id() -> str:
    """A random (version 4) UUID, as `str(uuid.uuid4())` writes it, made without building a
    `uuid.UUID` (a third of the Python time of a post without mentions)."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def clean_channel(channel: Channel) -> Channel:
    return Channel(clean_project_name(channel.project), clean_branch(channel.branch))


# Channels already cleaned (a poster writes in a few): cleaning is pure, and only channels
# that passed are kept, so a bad one is refused each time exactly as `clean_channel` does.
_CLEAN_CHANNELS: dict[Channel, Channel] = {}
_CLEAN_CHANNELS_MAX = 1024


def clean_channel_cached(channel: Channel) -> Channel:
    cleaned = _CLEAN_CHANNELS.get(channel)
    if cleaned is None:
        cleaned = clean_channel(channel)
        if len(_CLEAN_CHANNELS) >= _CLEAN_CHANNELS_MAX:
            _CLEAN_CHANNELS.clear()
        _CLEAN_CHANNELS[channel] = cleaned
    return cleaned


def clean_draft(draft: Draft) -> Draft:
    """`draft` with its channel, body and ids checked and cleaned (InputError if bad)."""
    return Draft(
        draft.sender_id,
        clean_channel_cached(draft.channel),
        clean_message_body(draft.body),
        draft.kind,
        None if draft.message_id is None else clean_message_id(draft.message_id),
        None if draft.reply_to is None else clean_message_id(draft.reply_to),
        draft.to,
    )


def clean_message_id(text: str) -> str:
    if not _MESSAGE_ID.fullmatch(text):
        raise InputError(
            f"invalid message id {text!r}: up to 128 letters, digits, '.', '_', ':' and '-'"
        )
    return text


def clean_message_body(text: str) -> str:
    body = clean_body(text, "the message").strip()
    if not body:
        raise InputError("the message is empty")
    return body


def clean_registration(channel: Channel, name: str, role: AgentRole) -> tuple[Channel, str]:
    """The channel and name of an agent registering in `role`: the human is not registered
    (it is one agent for the machine), and the orchestrator, only it, is called `legion`."""
    channel = clean_channel(channel)
    name = clean_agent_name(name)
    if role is AgentRole.HUMAN or name == HUMAN_NAME:
        raise InputError(f"{HUMAN_NAME!r} is the human's name on the bus, not an agent's")
    if (name == ORCHESTRATOR_NAME) != (role is AgentRole.CONTROLLER):
        raise InputError(
            f"the name {ORCHESTRATOR_NAME!r} is the orchestrator's (role controller), "
            "and the orchestrator is called by it"
        )
    return channel, name
