"""A session's inbox: the messages waiting for its next turn boundary, which its hooks (Claude
Code's, or Codex's turn loop) hand to the model, and what they handed over, until the watcher
has marked it delivered on the bus.

One JSON file per session, Legion's, written by the watcher and read (the queue also emptied)
by the session's hooks, under a lock:

    {"messages": [{"id": "m-1", "text": "..."}],
     "delivered": [{"id": "m-1", "via": "Stop", "at": 1700000000.0, "session_id": "..."}],
     "stop_streak": {"prompt_id": "...", "count": 1}}

`enqueue` adds a message (unless its id is queued, or delivered and not yet taken), a hook
moves what it hands to the model to `delivered` (`via` says how: a hook's event, or `TYPED`),
`take_queued` takes the queued messages for another way in (typed into an idle session), and
`peek_delivered`/`forget_delivered` give the watcher what was delivered and forget it once it
is recorded. `stop_streak` is Claude Code's (`legion.runtime.claude.hooks`), kept here as it is.
All but the file's I/O at the end is pure.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from legion.files.locking import exclusive_folder
from legion.files.private import private_folder
from legion.files.worker_written import read_regular, replace_file

JSON = dict[str, Any]
T = TypeVar("T")

# How a message handed over by typing it into an idle session is recorded in its inbox (the
# hooks record theirs by their event's name): the watcher marks those delivered itself.
TYPED = "typed"


@dataclass(frozen=True)
class InboxMessage:
    id: str
    text: str


@dataclass(frozen=True)
class Inbox:
    messages: tuple[InboxMessage, ...] = ()
    delivered: tuple[JSON, ...] = ()
    # The last Stop seen: its turn (`prompt_id`), and how many blocks came right before it.
    stop_prompt: str | None = None
    stop_streak: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys kept as they are

    def known_ids(self) -> set[str]:
        return {m.id for m in self.messages} | {str(d.get("id")) for d in self.delivered}


_INBOX_KEYS = ("messages", "delivered", "stop_streak")


class InboxError(ValueError):
    """The inbox file is not what Legion writes."""


def parse_inbox(text: str) -> Inbox:
    if not text.strip():
        return Inbox()
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise InboxError(f"not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise InboxError("not a JSON object")
    messages = []
    for item in raw.get("messages") or []:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise InboxError(f"a message is not {{'id', 'text'}}: {item!r}")
        messages.append(InboxMessage(str(item.get("id", "")), item["text"]))
    delivered = tuple(d for d in raw.get("delivered") or [] if isinstance(d, dict))
    streak = raw.get("stop_streak") or {}
    if not isinstance(streak, dict):
        streak = {}
    prompt = streak.get("prompt_id")
    count = streak.get("count")
    return Inbox(
        messages=tuple(messages),
        delivered=delivered,
        stop_prompt=prompt if isinstance(prompt, str) else None,
        stop_streak=count if isinstance(count, int) else 0,
        extra={k: v for k, v in raw.items() if k not in _INBOX_KEYS},
    )


def dump_inbox(inbox: Inbox) -> str:
    raw: JSON = dict(inbox.extra)
    raw["messages"] = [{"id": m.id, "text": m.text} for m in inbox.messages]
    raw["delivered"] = list(inbox.delivered)
    if inbox.stop_streak or inbox.stop_prompt is not None:
        raw["stop_streak"] = {"prompt_id": inbox.stop_prompt, "count": inbox.stop_streak}
    return json.dumps(raw, ensure_ascii=False, indent=1) + "\n"


def with_message(inbox: Inbox, message_id: str, text: str) -> Inbox | None:
    """`inbox` with the message queued; None when that id is queued or delivered already."""
    if message_id in inbox.known_ids():
        return None
    return replace(inbox, messages=(*inbox.messages, InboxMessage(message_id, text)))


def format_messages(messages: Sequence[InboxMessage]) -> str:
    """What the model is shown: the messages' texts, as Legion wrote them, a blank line apart."""
    return "\n\n".join(m.text for m in messages)


# Whether the queued messages may be handed over now, and the inbox as it is to be kept either
# way (None: unchanged): a CLI's own limit (Claude Code's cap on Stop blocks in a row).
Gate = Callable[[Inbox], tuple[bool, Inbox | None]]


def hand_over(
    inbox: Inbox, *, via: str, session_id: str | None, now: float, gate: Gate | None = None
) -> tuple[str | None, Inbox | None]:
    """The queued messages as the model is shown them, and the inbox with them moved to
    `delivered` (`via`: how, by session `session_id`, at `now`); the text is None when none
    is queued or `gate` holds them, and the inbox None when it is unchanged."""
    go, counted = (True, None) if gate is None else gate(inbox)
    current = counted or inbox
    if not go or not current.messages:
        return None, counted
    done = tuple(
        {"id": m.id, "via": via, "at": now, "session_id": session_id} for m in current.messages
    )
    after = replace(current, messages=(), delivered=(*current.delivered, *done))
    return format_messages(current.messages), after


# -- the inbox file (I/O, under the inbox's lock) ----------------------------------------

LOCK_TIMEOUT_S = 10.0
# An inbox is a few messages waiting for a turn's end; one past this is not Legion's.
INBOX_BYTES = 16 * 1024 * 1024


def update_inbox(path: Path, change: Callable[[Inbox], tuple[T, Inbox | None]]) -> T:
    """Read the inbox, apply `change` (returns a result and the new inbox, None: unchanged),
    write it back atomically, all under the inbox's lock; returns the result.

    The inbox's folder (`sessions/<id>/`) is the session's to write, and the daemon reads and
    writes it too: the lock is the folder's own (no lock file a link could stand in for), the
    file is read only as a regular file reached through no link, and written as a new file
    renamed over the name (`legion.files.worker_written`). A refused file is an InboxError."""
    folder = private_folder(path.parent)  # Legion's; the session cannot replace it
    with exclusive_folder(folder, timeout=LOCK_TIMEOUT_S):
        try:
            data = read_regular(folder, path.name, cap=INBOX_BYTES)
        except FileNotFoundError:
            data = b""
        except OSError as exc:
            raise InboxError(f"{path} refused: {exc.strerror or exc}") from None
        result, after = change(parse_inbox(data.decode("utf-8", errors="replace")))
        if after is not None:
            replace_file(folder, path.name, dump_inbox(after).encode("utf-8"))
        return result


def enqueue(path: Path, message_id: str, text: str) -> bool:
    """Queue a message for the session; False when that id was queued or delivered before."""

    def change(inbox: Inbox) -> tuple[bool, Inbox | None]:
        after = with_message(inbox, message_id, text)
        return after is not None, after

    return update_inbox(path, change)


def take_queued(path: Path, via: str, session_id: str | None = None) -> list[InboxMessage]:
    """Take the queued messages for delivery another way (typed into an idle session, given
    to a resume), recorded as delivered `via` that; the hooks then no longer hand them over."""

    def change(inbox: Inbox) -> tuple[list[InboxMessage], Inbox | None]:
        _, after = hand_over(inbox, via=via, session_id=session_id, now=time.time())
        return list(inbox.messages), after

    if not path.exists():
        return []
    return update_inbox(path, change)


def peek_delivered(path: Path) -> list[JSON]:
    """What the hooks handed to the model and Legion has not yet forgotten (see
    `forget_delivered`)."""

    def change(inbox: Inbox) -> tuple[list[JSON], Inbox | None]:
        return list(inbox.delivered), None

    return update_inbox(path, change)


def forget_delivered(path: Path, message_ids: set[str]) -> None:
    """Forget these delivered entries, once Legion has recorded them."""

    def change(inbox: Inbox) -> tuple[None, Inbox | None]:
        kept = tuple(d for d in inbox.delivered if str(d.get("id")) not in message_ids)
        if len(kept) == len(inbox.delivered):
            return None, None
        return None, replace(inbox, delivered=kept)

    update_inbox(path, change)


def take_delivered(path: Path) -> list[JSON]:
    """The messages the hooks handed to the model since the last call (and forget them)."""

    def change(inbox: Inbox) -> tuple[list[JSON], Inbox | None]:
        if not inbox.delivered:
            return [], None
        return list(inbox.delivered), replace(inbox, delivered=())

    return update_inbox(path, change)
