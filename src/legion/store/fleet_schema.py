"""The fleet's tables (`legion.fleet`), one text for both engines' migrations (SQLite's 11,
PostgreSQL's 2): times are seconds since the epoch by the store's clock."""

FLEET_TABLES = """
    CREATE TABLE hosts (
        name TEXT PRIMARY KEY,
        machine TEXT NOT NULL DEFAULT '',
        pid INTEGER NOT NULL DEFAULT 0,
        capacity INTEGER NOT NULL,
        draining INTEGER NOT NULL DEFAULT 0,
        started_at REAL NOT NULL,
        heartbeat_at REAL NOT NULL
    );
    CREATE TABLE leases (
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        expires_at REAL NOT NULL
    );
"""
