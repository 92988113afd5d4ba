"""The event bus: agents address one another with @mentions in messages posted to channels
(a project and a branch); every message is delivered to each addressee at least once.

Callers hold a `Bus` (the protocol, `legion.bus.protocol`) from `open_bus`, never an
implementation: `legion.bus.sqlite` (a package, one piece per job) is the one there is, and
another (server-backed) would be its sibling. The rest of the package: `model` (the records),
`schema` (SQLite's migrations), `address` (who a message is addressed to), `validate` (what
the bus accepts), `delivery` (the state machine that hands a message to a session) and
`delivery_text` (what the session is shown), `inbox` (what a busy session's hooks hand over),
`session_hooks` (what a session is given at its boundaries), `actions`, `sessions` and
`context`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from legion.bus.protocol import Bus

BUS_FILE_NAME = "bus.db"

__all__ = ["BUS_FILE_NAME", "Bus", "bus_path", "open_bus"]


def bus_path(env: Mapping[str, str]) -> Path:
    """Where the machine's bus is: `$XDG_STATE_HOME/legion/bus.db`."""
    from legion.config import state_home

    return state_home(env) / BUS_FILE_NAME


def open_bus(env: Mapping[str, str]) -> Bus:
    """The machine's bus."""
    from legion.bus.sqlite import SqliteBus

    return SqliteBus(bus_path(env))
