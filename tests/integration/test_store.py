"""The project's store on both engines: the SQLite file and a real PostgreSQL server
(`tests/support/postgres.py`). Each owner of a table does its work the same on both; what only
PostgreSQL has (a pool that outlives a server restart, migrations several hosts run at once,
a URL that is a credential) is tested on it alone."""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from legion.bus import postgres_schema as bus_schema
from legion.bus.stored import PostgresBus, SqliteBus
from legion.core.model import Mode
from legion.errors import ConflictError, StoreError
from legion.forges.reviewed import ReviewedHeads
from legion.proxy.budget import Allowances
from legion.proxy.ledger import Spender, UsageLedger
from legion.proxy.limits import HoldRecord
from legion.proxy.metering import Metered, ToolCall
from legion.proxy.questions import AskedQuestions
from legion.relay.capabilities import Capabilities
from legion.sessions.registry import Registry
from legion.store import Store
from legion.store.actionlog import ActionLog, OutcomeKind
from legion.store.postgres import PostgresStore, pg_sql, where
from legion.store.postgres_schema import MIGRATIONS as PG_MIGRATIONS
from legion.store.sqlite import SqliteStore
from legion.trackers.local import LocalTracker
from tests.support.postgres import PostgresServer

# -- every owner of a table, on both engines --------------------------------------------------


def test_the_worker_registry(open_store: Callable[[], Store], tmp_path: Path) -> None:
    registry = Registry(open_store())
    first = registry.start("leg-1", Mode.PLAN, "sid-1", "LEG-1:plan", tmp_path)
    again = registry.start("LEG-1", Mode.PLAN, "sid-2", "LEG-1:plan", tmp_path, runtime="codex")
    assert (first.window, again.runtime) == ("LEG-1:plan", "codex")
    assert [record.session_id for record in registry.current()] == ["sid-2"]
    assert registry.by_session("sid-1") is not None
    assert registry.latest_modes() == {"LEG-1": Mode.PLAN}
    registry.retire(again.id)
    assert registry.current() == []
    assert len(Registry(open_store()).history()) == 2


def test_one_live_worker_per_issue_holds_in_the_store(
    open_store: Callable[[], Store], tmp_path: Path
) -> None:
    """Two starters (a follower's `legion dispatch`, the leader's pass) each look and find no
    live worker; the one that records second is refused in its own transaction."""
    leader, follower = Registry(open_store()), Registry(open_store())
    dead = leader.start("LEG-1", Mode.PLAN, "sid-plan", "leg-1-plan", tmp_path)
    seen_by_both = frozenset({dead.id})  # a dead planner: no live worker
    first = follower.start(
        "LEG-1", Mode.IMPLEMENT, "sid-impl", "leg-1-implement", tmp_path, host="beta",
        seen=seen_by_both,
    )  # fmt: skip
    with pytest.raises(ConflictError, match="leg-1-implement on beta was started meanwhile"):
        leader.start(
            "LEG-1", Mode.IMPLEMENT, "sid-impl", "leg-1-implement", tmp_path, seen=seen_by_both
        )
    assert [record.id for record in leader.current()] == [dead.id, first.id]
    # Another issue, and a look that saw the new record, are not held back.
    leader.start("LEG-2", Mode.PLAN, "sid-2", "leg-2-plan", tmp_path, seen=frozenset())
    leader.start(
        "LEG-1", Mode.REVIEW, "sid-rev", "leg-1-review", tmp_path, seen={dead.id, first.id}
    )


def test_capabilities_and_the_model_ledger(open_store: Callable[[], Store]) -> None:
    store = open_store()
    capabilities = Capabilities(store)
    token = capabilities.mint("LEG-1", mode="plan", session_id="sid-1")
    scope = capabilities.lookup(token)
    assert scope is not None and scope.issue == "LEG-1"
    assert capabilities.revoke_session("sid-1") == 1
    assert capabilities.lookup(token) is None

    ledger = UsageLedger(store)
    spender = Spender("sid-1", "LEG-1", "plan", "claude-code")
    ledger.record(spender, Metered("m", input_tokens=10, output_tokens=5))
    ledger.record(spender, Metered("m", input_tokens=1, cache_read_tokens=100))
    assert ledger.total(issue="LEG-1") == 116
    [row] = ledger.rows(issue="LEG-1")
    assert (row.responses, row.used.input, row.used.cache_read) == (2, 11, 100)
    # Sums are ints on both (PostgreSQL's are `numeric`): `legion usage --json` prints them.
    assert {type(value) for value in row.to_json().values() if value is not None} <= {int, str}

    allowances = Allowances(store)
    assert allowances.get("LEG-1") is None
    allowances.set("LEG-1", 500)
    allowances.set("LEG-1", 900)
    assert Allowances(open_store()).get("LEG-1") == 900


def test_the_heads_approving_reviews_saw(open_store: Callable[[], Store]) -> None:
    heads = ReviewedHeads(open_store())
    assert heads.head(7, "legion/leg-7") is None
    heads.record(7, "legion/leg-7", "a" * 40)
    heads.record(7, "legion/leg-7", "b" * 40)  # approved again, at a newer head
    assert ReviewedHeads(open_store()).head(7, "legion/leg-7") == "b" * 40
    assert heads.head(7, "legion/leg-8") is None  # another PR of that number: nothing pinned
    heads.forget(7)
    assert heads.head(7, "legion/leg-7") is None


def test_the_egress_proxys_refusals(open_store: Callable[[], Store]) -> None:
    """Counted by session and destination; a session's first to a host (on any port) is the
    one the action log says."""
    from legion.proxy.egress_refusals import Refused, record_refusal, refusal_counts

    store = open_store()
    assert record_refusal(store, Refused("s-1", "LEG-1", "pypi.org", 443))
    assert not record_refusal(store, Refused("s-1", "LEG-1", "pypi.org", 443))
    assert not record_refusal(open_store(), Refused("s-1", "LEG-1", "pypi.org", 80))
    assert record_refusal(store, Refused("s-2", "", "pypi.org", 443))
    counts = {(c.session_id, c.port): c.count for c in refusal_counts(open_store())}
    assert counts == {("s-1", 443): 2, ("s-1", 80): 1, ("s-2", 443): 1}


def test_the_model_hold_and_asked_questions(open_store: Callable[[], Store]) -> None:
    store = open_store()
    hold = HoldRecord(store)
    assert hold.active() is None
    hold.set(datetime.now(UTC) + timedelta(minutes=5), "rate limited (429)")
    assert hold.active() == "rate limited (429)"
    assert hold.clear() and not hold.clear()

    asked = AskedQuestions(store)
    asked.record("sid-1", ToolCall("toolu_1", "AskUserQuestion", {"questions": ["100% sure?"]}))
    found = asked.last("sid-1")
    assert found is not None and found.input == {"questions": ["100% sure?"]}
    asked.forget("sid-1")
    assert asked.last("sid-1") is None


def test_a_failed_write_leaves_nothing(open_store: Callable[[], Store]) -> None:
    store = open_store()
    log = ActionLog(store)
    with pytest.raises(RuntimeError), store.write() as conn:
        conn.execute(
            "INSERT INTO actions (at, issue, action, outcome) VALUES (?, ?, ?, ?)",
            ("now", "LEG-1", "x", "done"),
        )
        raise RuntimeError("half-way")
    assert log.tail(10) == []
    log.append("LEG-1", "dispatch", OutcomeKind.DONE, "100% ?")
    assert [entry.detail for entry in ActionLog(open_store()).tail(10)] == ["100% ?"]


# -- the two schemas are one --------------------------------------------------------------------


def _sqlite_columns(path: Path) -> set[tuple[str, str]]:
    lite = sqlite3.connect(path)
    try:
        return {
            (table, column[1])
            for (table,) in lite.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            ).fetchall()
            for column in lite.execute(f"PRAGMA table_info({table})").fetchall()
        }
    finally:
        lite.close()


def _postgres_columns(url: str, schema: str) -> set[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return {
            (table, column)
            for table, column in conn.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name != 'legion_schema'",
                (schema,),
            ).fetchall()
        }


def test_the_postgresql_schema_has_every_sqlite_table_and_column(
    tmp_path: Path, postgres_url: str
) -> None:
    path = tmp_path / "legion.db"
    SqliteStore(path).close()
    store = PostgresStore(postgres_url, str(uuid.uuid4()), create=True)
    store.close()
    assert _postgres_columns(postgres_url, store.schema) == _sqlite_columns(path)


def test_the_buses_postgresql_schema_has_every_sqlite_table_and_column(
    tmp_path: Path, postgres_url: str
) -> None:
    path = tmp_path / "bus.db"
    SqliteBus(path).close()
    PostgresBus(postgres_url).close()
    assert _postgres_columns(postgres_url, bus_schema.SCHEMA) == _sqlite_columns(path)


# -- PostgreSQL only ----------------------------------------------------------------------------


def test_parameters_become_psycopgs_outside_quoted_text() -> None:
    assert pg_sql("SELECT * FROM t WHERE a = ? AND b = ?") == (
        "SELECT * FROM t WHERE a = %s AND b = %s"
    )
    assert pg_sql("SELECT '?', \"what?\", 5 % 2, '100%' FROM t WHERE x = ?") == (
        "SELECT '?', \"what?\", 5 %% 2, '100%%' FROM t WHERE x = %s"
    )


def test_a_url_is_shown_without_its_credentials(postgres_url: str) -> None:
    shown = where(postgres_url)
    assert shown.startswith("postgresql://127.0.0.1:") and "@" not in shown
    with pytest.raises(StoreError) as bad:
        where("postgresql://me:s3cret@[bad")
    assert "s3cret" not in str(bad.value)


def test_a_project_never_created_is_not_created_by_opening_it(postgres_url: str) -> None:
    with pytest.raises(StoreError, match="run `legion init`"):
        PostgresStore(postgres_url, str(uuid.uuid4()))


def test_two_projects_share_a_database_in_their_own_schemas(postgres_url: str) -> None:
    one = LocalTracker(PostgresStore(postgres_url, str(uuid.uuid4()), create=True), issue_key="A")
    two = LocalTracker(PostgresStore(postgres_url, str(uuid.uuid4()), create=True), issue_key="B")
    one.create_issue("first of A")
    two.create_issue("first of B")
    assert [i.identifier for i in one.list_issues()] == ["A-1"]
    assert [i.identifier for i in two.list_issues()] == ["B-1"]


def test_hosts_migrating_at_once_migrate_once(postgres_url: str) -> None:
    project_id = str(uuid.uuid4())
    errors: list[BaseException] = []

    def open_and_close() -> None:
        try:
            PostgresStore(postgres_url, project_id, create=True).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_and_close) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    store = PostgresStore(postgres_url, project_id)
    with psycopg.connect(postgres_url) as conn:
        version = conn.execute(f"SELECT version FROM {store.schema}.legion_schema").fetchone()
    assert version == (len(PG_MIGRATIONS),)
    store.close()


def test_a_newer_schema_is_refused(postgres_url: str) -> None:
    project_id = str(uuid.uuid4())
    store = PostgresStore(postgres_url, project_id, create=True)
    with psycopg.connect(postgres_url) as conn:
        conn.execute(f"UPDATE {store.schema}.legion_schema SET version = 99")
    store.close()
    with pytest.raises(StoreError, match=r"newer Legion \(schema 99\)"):
        PostgresStore(postgres_url, project_id)


def test_a_restarted_server_costs_no_error(postgres_server: PostgresServer) -> None:
    url = postgres_server.database()
    tracker = LocalTracker(PostgresStore(url, str(uuid.uuid4()), create=True), issue_key="LEG")
    tracker.create_issue("before")
    postgres_server.stop()
    postgres_server.start()
    tracker.create_issue("after")
    assert [i.title for i in tracker.list_issues()] == ["before", "after"]


def test_an_unreachable_or_refusing_server_is_one_line_without_the_password(
    postgres_server: PostgresServer,
) -> None:
    wrong = postgres_server.url("postgres", password="not-the-password")
    with pytest.raises(StoreError, match="refused the login") as refused:
        PostgresStore(wrong, str(uuid.uuid4()), create=True)
    closed = f"postgresql://u:hunter2secret@127.0.0.1:{_closed_port()}/db"
    with pytest.raises(StoreError, match="cannot reach the PostgreSQL store") as unreachable:
        PostgresStore(closed, str(uuid.uuid4()), create=True)
    for error in (refused, unreachable):
        text = str(error.value)
        assert "\n" not in text and "hunter2secret" not in text
        assert "not-the-password" not in text and postgres_server.password not in text


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
