"""The event bus: agents address one another with @mentions in messages posted to channels
(a project and a branch); every message is delivered to each addressee at least once.

Callers use `legion.bus.store.Bus` (and `open_bus`), never the SQLite implementation itself.
"""
