"""A real PostgreSQL server for the tests, from Debian's `postgresql` package (`.ci/run`
installs it): one per pytest process, started on first use (`legion.store.private_server`, which
`legion demo --hosts N` runs too), on a free port of 127.0.0.1 and a socket in its own folder,
with password logins only.

Each test asks for a database of its own (`PostgresServer.database`). The server outlives the
test that started it: its environment has the run's reaper mark, not the test's, so the run's
sweep ends it if the fixture's clean-up never runs.
"""

from __future__ import annotations

from legion.store.private_server import PrivatePostgres
from tests.support import reaper

SUPERUSER = "legion_test"


class PostgresServer(PrivatePostgres):
    superuser = SUPERUSER
    database_prefix = "t_"
    unmarked = (reaper.TEST_MARK,)
