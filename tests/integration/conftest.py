"""Fixtures the integration tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from legion.bus.sqlite import SqliteBus


@pytest.fixture
def bus(tmp_path: Path) -> Iterator[SqliteBus]:
    """A bus of its own, in the test's folder."""
    opened = SqliteBus(tmp_path / "state" / "bus.db")
    yield opened
    opened.close()
