"""`legion.services.messaging` on a real SQLite bus, without the CLI around it: the rules `legion
say`, `messages`, `events` and `task` follow, callable by the TUI and the daemon alike; and a piece
of the SQLite bus working on its own over the one database."""

from __future__ import annotations

from pathlib import Path

import pytest

from legion.bus import schema
from legion.bus.model import AgentRole, Channel, EventKind
from legion.bus.stored import SqliteBus
from legion.bus.stored.tasks import StoredTasks
from legion.config import Project
from legion.errors import InputError, NotFoundError
from legion.services.messaging import events_asked_for, hand_over, known_channel, reading
from legion.sessions.identity import Speaker
from legion.store.sqlite import SqliteStore

HERE = Channel("app", "main")


def _nowhere() -> Project:
    raise NotFoundError("not in a project")


def test_a_channel_of_a_project_the_bus_does_not_know_is_refused(bus: SqliteBus) -> None:
    bus.claim_project("id-app", "app", Path("/srv/app"))
    assert known_channel(bus, None, _nowhere) is None
    assert known_channel(bus, HERE, _nowhere) == HERE
    with pytest.raises(InputError, match=r"no project 'ghost' on the bus \(its projects: app\)"):
        known_channel(bus, Channel("ghost", "main"), _nowhere)


def test_what_a_reader_was_shown_counts_as_read(bus: SqliteBus) -> None:
    bus.claim_project("id-app", "app", Path("/srv/app"))
    worker = bus.register_agent(
        HERE, "implement", role=AgentRole.IMPLEMENT, runtime="claude", session_id=None
    )
    human = bus.human()
    bus.post(human.id, HERE, "@implement first")
    bus.post(human.id, Channel("app", "other"), "@main/implement second")
    me = Speaker(worker, lambda: HERE)

    unread = reading(bus, me, None, unread=True)
    assert unread.channel is None  # unread: every channel's, unless one is named
    found = unread.messages()
    assert [m.body for m in found] == ["@implement first", "@main/implement second"]
    unread.shown(found[:1])
    assert [m.body for m in unread.messages()] == ["@main/implement second"]
    assert reading(bus, me, None, unread=False).channel == HERE  # else the reader's own


def test_a_message_to_nobody_or_posted_before_is_not_handed_over(bus: SqliteBus) -> None:
    posted = bus.post(bus.human().id, HERE, "to nobody", message_id="m-1")
    assert hand_over(bus, posted, {}, _nowhere) == {}
    again = bus.post(bus.human().id, HERE, "to nobody", message_id="m-1")
    assert not again.created and hand_over(bus, again, {}, _nowhere) == {}


def test_the_events_asked_for_by_name() -> None:
    assert events_asked_for([]) == set(EventKind) - {EventKind.MESSAGE_POSTED}
    assert events_asked_for(["blocked", " AGENT_COMPLETED "]) == {
        EventKind.AGENT_BLOCKED,
        EventKind.AGENT_COMPLETED,
    }
    with pytest.raises(InputError, match="unknown event kind 'nope'"):
        events_asked_for(["nope"])


def test_a_piece_of_the_sqlite_bus_works_on_its_own(tmp_path: Path) -> None:
    db = SqliteStore(tmp_path / "bus.db", create=True, migrations=schema.MIGRATIONS, empty_ok=True)
    try:
        tasks = StoredTasks(db)
        parent = tasks.add_task(HERE, "Write the parser")
        child = tasks.add_task(HERE, "Tokens", parent_id=parent.id)
        done = tasks.complete_task(child.id)
        assert done.completed_at is not None
        assert tasks.complete_task(child.id).completed_at == done.completed_at
        assert [t.title for t in tasks.tasks(HERE)] == ["Write the parser", "Tokens"]
    finally:
        db.close()
