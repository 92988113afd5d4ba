"""The day's token budget (`daily_token_budget`) through the daemon's model proxy, against the
scripted model, and `legion status`: once the day's tokens reach it, every session's next
request is refused before it reaches the model (a worker's and the controller's alike), the
daemon is told, and status says so; at 00:00 UTC the day's count starts again. The proxy's
clock is injected, so the day ends when the test says; what the ledger records is real."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from legion.backends import open_backends
from legion.config import load_project
from legion.core.budget import Limits, Spent, day_start, seconds_to_next_day
from legion.proxy.ledger import Spender, UsageLedger
from legion.proxy.limits import why_held
from legion.relay.capabilities import Capabilities
from legion.store.sqlite import SqliteStore
from tests.fakes.model_server import FakeModelServer, Scenario, text
from tests.integration.test_model_proxy import ask, start_proxy
from tests.support.cli import LegionRunner

pytestmark = pytest.mark.timeout(90)

BUDGET = 10  # the first answer alone uses more
HELD = "the daily token budget is spent ({used:,} of 10 tokens today)"


@pytest.fixture(autouse=True)
def _private_tmux(tmux_socket: Path) -> None:
    """`legion status` looks at tmux: a private server."""


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer([Scenario("hello", [[text("hi there")]] * 5)]) as server:
        yield server


def test_the_days_budget_stops_every_session_is_in_status_and_ends_at_midnight_utc(
    project: Path, legion: LegionRunner, model: FakeModelServer
) -> None:
    if seconds_to_next_day(datetime.now(UTC)) < 30:
        # The ledger records the real time, and `legion status` reads the real day: not
        # across a real midnight.
        time.sleep(seconds_to_next_day(datetime.now(UTC)) + 1)
    db = open_backends(load_project(project)).db
    capabilities = Capabilities(SqliteStore(db.path))
    as_worker = {"authorization": f"Bearer {capabilities.mint('LEG-1', session_id='sid-1')}"}
    as_controller = {
        "authorization": f"Bearer {capabilities.mint(None, mode='controller', session_id='ctl')}"
    }
    today = datetime.now(UTC)
    midnight = day_start(today) + timedelta(days=1)
    clock = [today]
    told: list[tuple[Spender, Spent]] = []
    limits = Limits(daily_token_budget=BUDGET)
    proxy = start_proxy(
        db.path,
        {"ANTHROPIC_BASE_URL": model.base_url, "ANTHROPIC_API_KEY": "k"},
        limits=limits,
        refused=lambda *refused: told.append(refused),
        clock=lambda: clock[0],
    )
    try:
        assert why_held(db, limits, today) is None
        assert ask(proxy, as_worker).status_code == 200
        used = UsageLedger(db).total()
        assert used >= BUDGET

        # Spent: every session is refused, the controller too, and nothing reaches the model.
        for headers in (as_worker, as_controller):
            refused = ask(proxy, headers)
            assert refused.status_code == 402
            assert HELD.format(used=used) in refused.json()["error"]["message"]
        assert len(model.message_requests()) == 1
        assert [(s.session_id, s.issue, spent) for s, spent in told] == [
            ("sid-1", "LEG-1", Spent("", used, BUDGET)),
            ("ctl", "", Spent("", used, BUDGET)),
        ]
        assert told[0][1].daily  # the daemon stops the worker and asks nobody

        # `legion status` says so, in its text and its JSON.
        env = {"LEGION_DAILY_TOKEN_BUDGET": str(BUDGET)}
        shown = legion("status", env=env)
        assert shown.returncode == 0, shown.stderr
        line = f"model:      HELD: {HELD.format(used=used)}; Legion starts no more model requests"
        assert line in shown.stdout, shown.stdout
        data = legion("status", "--json", env=env)
        assert HELD.format(used=used) in data.stdout
        assert '"model_held": null' in legion("status", "--json").stdout  # no daily budget

        # The day's last second: still spent.
        clock[0] = midnight - timedelta(seconds=1)
        assert ask(proxy, as_worker).status_code == 402
        assert why_held(db, limits, clock[0]) is not None

        # 00:00 UTC: a new day, yesterday's tokens no longer count, and requests go again.
        clock[0] = midnight
        assert why_held(db, limits, midnight) is None
        assert ask(proxy, as_worker).status_code == 200
        assert ask(proxy, as_controller).status_code == 200
        assert len(model.message_requests()) == 3
    finally:
        proxy.stop()
        db.close()
