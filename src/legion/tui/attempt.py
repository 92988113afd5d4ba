"""A call on the app's thread whose refusal is shown, not raised: bad input, a locked bus, a
rule of the bus's, each one line in a notification (the app escapes it); nothing once the app
is closing (its widgets are gone)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from textual.app import App
from textual.css.query import NoMatches

from legion.errors import LegionError

T = TypeVar("T")


def attempt(app: App[Any], call: Callable[[], T]) -> T | None:
    """`call()`, or None after showing its error in one line."""
    try:
        return call()
    except LegionError as exc:
        app.notify(str(exc), severity="error", markup=False)
        return None
    except NoMatches:
        return None  # the app is closing: its widgets are gone
