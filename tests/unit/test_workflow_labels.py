"""The labels a worker's start and an answer write have one writer, the reconciler's functions;
the session layer takes the marker as an argument and writes none."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from legion.reconcile import worker_active


class Labels:
    """A tracker's label writes, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []

    def update_labels(
        self, identifier: str, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Any:
        self.calls.append((identifier, tuple(add), tuple(remove)))


def test_worker_active_goes_on_before_the_start_and_stays() -> None:
    tracker = Labels()
    with worker_active(tracker, "LEG-1"):  # type: ignore[arg-type]
        assert tracker.calls == [("LEG-1", ("worker-active",), ())]
    assert tracker.calls == [("LEG-1", ("worker-active",), ())]


def test_worker_active_comes_off_again_when_the_start_fails() -> None:
    tracker = Labels()
    with pytest.raises(RuntimeError), worker_active(tracker, "LEG-1"):  # type: ignore[arg-type]
        raise RuntimeError("the window did not start")
    assert tracker.calls == [("LEG-1", ("worker-active",), ()), ("LEG-1", (), ("worker-active",))]


def test_the_session_layer_writes_no_label() -> None:
    import importlib
    import inspect
    import pkgutil

    import legion.sessions

    for info in pkgutil.iter_modules(legion.sessions.__path__):
        module = importlib.import_module(f"legion.sessions.{info.name}")
        assert "update_labels" not in inspect.getsource(module), info.name
