"""Locks: nobody waits forever, and a waiter says whom it waits for."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from legion.errors import ConflictError
from legion.files.locking import exclusive


def test_a_held_lock_makes_the_waiter_give_up_naming_the_holder(tmp_path: Path) -> None:
    lock = tmp_path / "reconcile.lock"
    with exclusive(lock), pytest.raises(ConflictError) as caught, exclusive(lock, timeout=0.3):
        pass
    message = str(caught.value)
    assert "gave up after 0.3 s" in message
    assert f"pid {os.getpid()}" in message


def test_a_waiter_is_told_once_and_gets_the_lock_when_it_is_released(tmp_path: Path) -> None:
    lock = tmp_path / "workers.lock"
    told: list[str] = []
    holding = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with exclusive(lock):
            holding.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    holding.wait(5)

    def waiting(said: str) -> None:  # released once the wait was said, however late
        told.append(said)
        release.set()

    with exclusive(lock, timeout=10, on_wait=waiting):
        pass
    thread.join()
    assert len(told) == 1 and told[0].startswith("waiting for workers.lock, held by pid ")


def test_an_uncontended_lock_is_taken_at_once(tmp_path: Path) -> None:
    with exclusive(tmp_path / "a.lock", timeout=0):
        pass
    with exclusive(tmp_path / "a.lock", timeout=0):
        pass
