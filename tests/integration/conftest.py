"""Fixtures the integration tests share."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from legion.bus.stored import PostgresBus, SqliteBus, StoreBus
from legion.store import Store
from legion.store.postgres import PostgresStore
from legion.store.sqlite import SqliteStore
from tests.support.cli import sleeping_claude


@pytest.fixture
def fake_claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `claude` that only sleeps, and a Claude Code config that has seen its first run
    (`tests.support.cli.sleeping_claude`): what `legion start` checks for, where no session
    is to run."""
    values: dict[str, str] = {}
    binary = sleeping_claude(tmp_path, values)
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return binary


@pytest.fixture
def bus(tmp_path: Path) -> Iterator[SqliteBus]:
    """A bus of its own, in the test's folder."""
    opened = SqliteBus(tmp_path / "state" / "bus.db")
    yield opened
    opened.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def either_bus(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBus]:
    """A bus of its own: the SQLite file, then (the test again) the `legion_bus` schema of a
    real PostgreSQL server's database of the test's own. The bus's pieces run on both."""
    opened: StoreBus
    if request.param == "sqlite":
        opened = SqliteBus(tmp_path / "state" / "bus.db")
    else:
        opened = PostgresBus(request.getfixturevalue("postgres_url"))
    yield opened
    opened.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """Opens one project's store, the same each time: the SQLite file, then (the test again)
    a schema in a real PostgreSQL server. The code that owns each table runs on both."""
    opened: list[Store] = []  # those opened in the test's thread (a thread closes its own)
    project_id = str(uuid.uuid4())
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None

    def open_it() -> Store:
        store: Store
        if url is None:
            store = SqliteStore(tmp_path / "state" / "legion.db")
        else:
            store = PostgresStore(url, project_id, create=True)
        if threading.current_thread() is threading.main_thread():
            opened.append(store)
        return store

    yield open_it
    for store in opened:
        store.close()
