"""Posting to the bus (`messages`, `deliveries`): a message written with one pending
delivery per addressee, all or nothing, and a retry under the same id answered with what was
posted the first time.

Who a message is addressed to is `legion.bus.address`'s to say; this module reads only the
agents an address could name, and writes what it decides. The `message_posted` event is
written by a trigger of `legion.bus.schema`, in the same transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from legion.bus.address import (
    addressees,
    agents_by_key,
    lookup_for,
    may_reach_human,
    outside_project,
    parse_mentions,
    within_project,
)
from legion.bus.model import ORCHESTRATOR_NAME, Agent, Channel, Draft, Message, MessageKind, Posted
from legion.bus.stored.rows import (
    AGENT_COLUMNS,
    MESSAGE_COLUMNS,
    agent_from_row,
    agent_in,
    all_agents,
    message_from_row,
    qualified,
    stamp,
)
from legion.bus.validate import (
    clean_channel_cached,
    clean_draft,
    clean_message_body,
    clean_message_id,
    new_message_id,
)
from legion.errors import ConflictError, NotFoundError, NotPermittedError
from legion.store import Connection, Row, Store


class StoredPosting:
    """Messages posted: addressed, delivered to each addressee (pending), posted once per id."""

    def __init__(self, db: Store, signal: str | None = None) -> None:
        self._db = db
        # A statement run in each post's transaction once per addressee's project, with the
        # project's name: PostgreSQL's NOTIFY, which wakes that project's daemon on any host
        # when the post commits (`legion.daemon.bus_listener`). None: SQLite, one machine,
        # whose daemons a `legion` command wakes itself.
        self._signal = signal
        # Senders already seen: (address, may address the human, the project it is held to or
        # None). None can change: an address is the agent's identity, and its role comes with
        # its name. Kept, a post without mentions reads nothing before it writes.
        self._senders: dict[int, tuple[str, bool, str | None]] = {}

    def post(
        self,
        sender_id: int,
        channel: Channel,
        body: str,
        *,
        kind: MessageKind = MessageKind.SAY,
        message_id: str | None = None,
        reply_to: str | None = None,
        to: Sequence[int] = (),
    ) -> Posted:
        # `post_many` for one draft, built clean at once (no `dataclasses.replace`).
        draft = Draft(
            sender_id,
            clean_channel_cached(channel),
            clean_message_body(body),
            kind,
            None if message_id is None else clean_message_id(message_id),
            None if reply_to is None else clean_message_id(reply_to),
            tuple(to),
        )
        with self._db.write() as conn:
            return self._post_in(conn, draft)

    def post_many(self, drafts: Sequence[Draft]) -> list[Posted]:
        # Checked before the write lock is taken: bad input never holds up other posters.
        cleaned = [clean_draft(draft) for draft in drafts]
        with self._db.write() as conn:
            return [self._post_in(conn, draft) for draft in cleaned]

    def _post_in(self, conn: Connection, draft: Draft) -> Posted:
        if draft.message_id is not None:
            # A retry: what was posted under this id stands, whatever changed since.
            earlier = conn.execute(
                f"SELECT {MESSAGE_COLUMNS}, sender_id FROM messages WHERE id = ?",
                (draft.message_id,),
            ).fetchone()
            if earlier is not None:
                return _posted_before(conn, earlier, draft)
        sender, may_reach_human, held_to = self._sender(conn, draft.sender_id)
        # No "@", no mention: the parse (a regular expression over the body) is skipped.
        mentioned = parse_mentions(draft.body) if "@" in draft.body else ()
        recipients = _addressees(conn, draft.sender_id, may_reach_human, draft.channel, mentioned)
        for agent_id in draft.to:
            named = agent_in(conn, agent_id)
            if named.id != draft.sender_id and all(named.id != a.id for a in recipients):
                recipients.append(named)
        if held_to is not None:
            outside = outside_project(held_to, draft.channel, recipients)
            if outside is not None:
                raise NotPermittedError(outside)
        if (
            draft.reply_to is not None
            and not conn.execute(
                "SELECT 1 FROM messages WHERE id = ?", (draft.reply_to,)
            ).fetchone()
        ):
            raise NotFoundError(f"no message {draft.reply_to!r} on the bus (to reply to)")
        message_id = draft.message_id or new_message_id()
        mentions = tuple(agent.address for agent in recipients)
        when = stamp()
        # The `message_posted` event is written by a trigger, in this transaction.
        seq = conn.execute(
            "INSERT INTO messages (id, project, branch, sender_id, sender, kind, body, "
            "mentions, created_at, reply_to) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "RETURNING seq",
            (
                message_id,
                draft.channel.project,
                draft.channel.branch,
                draft.sender_id,
                sender,
                draft.kind.value,
                draft.body,
                json.dumps(mentions) if mentions else "[]",
                when,
                draft.reply_to,
            ),
        ).fetchone()[0]
        if recipients:
            conn.executemany(
                "INSERT INTO deliveries (message_seq, recipient_id, state, updated_at) "
                "VALUES (?, ?, 'pending', ?)",
                [(seq, agent.id, when) for agent in recipients],
            )
            if self._signal is not None:
                for project in sorted({agent.project for agent in recipients}):
                    conn.execute(self._signal, (project,))
        message = Message(
            message_id,
            seq,
            draft.channel.project,
            draft.channel.branch,
            sender,
            draft.kind,
            draft.body,
            mentions,
            when,
            draft.reply_to,
        )
        return Posted(message, tuple(recipients), created=True)

    def _sender(self, conn: Connection, sender_id: int) -> tuple[str, bool, str | None]:
        known = self._senders.get(sender_id)
        if known is None:
            agent = agent_in(conn, sender_id)
            held_to = agent.project if within_project(agent.role) else None
            known = (agent.address, may_reach_human(agent.role), held_to)
            self._senders[sender_id] = known
        return known


def _addressees(
    conn: Connection,
    sender_id: int,
    reach_human: bool,
    channel: Channel,
    mentioned: Sequence[str],
) -> list[Agent]:
    """The agents the mentions name (`legion.bus.address.addressees`), reading only those an
    address could name (`lookup_for`)."""
    if not mentioned:
        return []
    lookup = lookup_for(mentioned, channel)
    clauses = ["(project = ? AND branch = ? AND name = ?)"] * len(lookup.keys)
    args = [part for key in sorted(lookup.keys) for part in (key.project, key.branch, key.name)]
    if lookup.orchestrator_of is not None:  # on whichever branch
        clauses.append("(project = ? AND name = ?)")
        args += [lookup.orchestrator_of, ORCHESTRATOR_NAME]
    rows = conn.execute(
        f"SELECT {AGENT_COLUMNS} FROM agents WHERE {' OR '.join(clauses)}", args
    ).fetchall()
    return addressees(
        mentioned,
        channel,
        agents_by_key(agent_from_row(row) for row in rows),
        sender_id=sender_id,
        reach_human=reach_human,
        everyone=lambda: agents_by_key(all_agents(conn)).keys(),
    )


def _posted_before(conn: Connection, row: Row, draft: Draft) -> Posted:
    """What was posted under `draft`'s id, when `draft` is that same message again; a different
    message under a used id is refused."""
    message = message_from_row(tuple(row)[:-1])
    if (row["sender_id"], message.channel, message.kind, message.body, message.reply_to) != (
        draft.sender_id,
        draft.channel,
        draft.kind,
        draft.body,
        draft.reply_to,
    ):
        raise ConflictError(
            f"message id {message.id} was already used for another message "
            f"(#{message.seq} in {message.channel}); choose a new id"
        )
    rows = conn.execute(
        f"SELECT {qualified(AGENT_COLUMNS, 'a')} "
        "FROM deliveries d JOIN agents a ON a.id = d.recipient_id "
        "WHERE d.message_seq = ? ORDER BY a.id",
        (message.seq,),
    ).fetchall()
    order = {address: n for n, address in enumerate(message.mentions)}
    recipients = sorted((agent_from_row(r) for r in rows), key=lambda a: order.get(a.address, 0))
    return Posted(message, tuple(recipients), created=False)
