"""Who a comment is from (`legion.sessions.identity.default_author`): a session never writes under a
person's name, whatever name its environment carries."""

from __future__ import annotations

import pytest

from legion.sessions.identity import default_author


def test_a_person_writes_under_their_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEGION_MODE", raising=False)
    monkeypatch.setenv("LEGION_AUTHOR", "alice")
    assert default_author() == "alice"


@pytest.mark.parametrize("mode", ["controller", "implement"])
def test_a_session_writes_under_its_own_name_never_the_persons(
    monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Issue 36: the daemon runs the controller's commands with its own environment, where
    `LEGION_AUTHOR` names the person who started it; the comment is the controller's."""
    monkeypatch.setenv("LEGION_AUTHOR", "alice")
    monkeypatch.setenv("LEGION_MODE", mode)
    assert default_author() == f"legion-{mode}"
