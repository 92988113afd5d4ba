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


class AsTheController:
    """An issue's labels as the controller's relay writes them: refused as the relay refuses
    them (`legion.relay.operations`, `roles.label_refusal`)."""

    def __init__(self, labels: set[str]) -> None:
        self.labels = labels

    def get_issue(self, identifier: str) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(identifier=identifier, labels=sorted(self.labels), status=None)

    def update_labels(
        self, identifier: str, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Any:
        from legion.core import roles
        from legion.errors import NotPermittedError

        refused = roles.label_refusal(
            roles.CONTROLLER, frozenset(add), frozenset(remove), frozenset(self.labels)
        )
        if refused is not None:
            raise NotPermittedError(refused)
        self.labels = (self.labels | set(add)) - set(remove)


def test_the_oracles_answer_succeeds_on_a_question_no_person_owns() -> None:
    """The controller's Oracle answers a blocked worker (`legion answer`): the answer is typed,
    and the command succeeds. It failed once the answer was typed (it asked to take off
    `user-input-needed`, which is not there and is a person's), and a chain of answers to
    several workers stopped at the first: the others waited for ever."""
    from types import SimpleNamespace

    from legion.core import roles
    from legion.reconcile import answer_worker

    typed: list[tuple[str, list[str]]] = []

    def answer(issue: str, answers: list[str]) -> Any:
        typed.append((issue, answers))
        return SimpleNamespace(record=SimpleNamespace(issue=issue))

    workers = SimpleNamespace(answer=answer)
    tracker = AsTheController({"worker-active"})
    view = answer_worker(workers, tracker, "LEG-2", ["Hello"], who=roles.CONTROLLER)  # type: ignore[arg-type]
    assert view.record.issue == "LEG-2" and typed == [("LEG-2", ["Hello"])]
    assert tracker.labels == {"worker-active"}
