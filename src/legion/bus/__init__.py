"""The event bus: agents address one another with @mentions in messages posted to channels
(a project and a branch); every message is delivered to each addressee at least once.

Callers hold a `Bus` (the protocol, `legion.bus.protocol`) from `open_bus`, never an
implementation: `legion.bus.stored` (a package, one piece per job) keeps it in the machine's
SQLite file or, when the `store` setting names one, the fleet's PostgreSQL database. The rest
of the package: `model` (the records), `schema` and `postgres_schema` (their migrations),
`address` (who a message is addressed to), `validate` (what the bus accepts), `delivery` (the
state machine that hands a message to a session) and `delivery_text` (what the session is
shown), `inbox` (what a busy session's hooks hand over), `session_hooks` (what a session is
given at its boundaries), `actions`, `sessions` and `context`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from legion.bus.protocol import Bus

BUS_FILE_NAME = "bus.db"

__all__ = ["BUS_FILE_NAME", "Bus", "bus_path", "bus_store", "bus_where", "open_bus"]


def bus_path(env: Mapping[str, str]) -> Path:
    """Where the machine's bus is: `$XDG_STATE_HOME/legion/bus.db`."""
    from legion.config.paths import state_home

    return state_home(env) / BUS_FILE_NAME


def bus_store(env: Mapping[str, str]) -> str | None:
    """The PostgreSQL store the bus is in, when the `store` setting names one (a setting of the
    machine's, never a repository's: every project here shares the bus); None for SQLite."""
    from legion.config.resolve import machine_settings

    return machine_settings(env).store


def bus_where(env: Mapping[str, str]) -> str:
    """Where the bus is, as its errors name it: the SQLite file, or the server and schema
    (never the URL's password)."""
    url = bus_store(env)
    if url is None:
        return str(bus_path(env))
    from legion.bus.postgres_schema import SCHEMA
    from legion.store.postgres import where

    return f"{where(url)} (schema {SCHEMA})"


def open_bus(env: Mapping[str, str]) -> Bus:
    """The bus: the fleet's, in its PostgreSQL store, when the `store` setting names one; else
    the machine's SQLite file."""
    url = bus_store(env)
    if url is not None:
        from legion.bus.stored import PostgresBus

        return PostgresBus(url)
    from legion.bus.stored import SqliteBus

    return SqliteBus(bus_path(env))
