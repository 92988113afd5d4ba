"""What a view does with news that comes as the app closes: nothing (its widgets are gone)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec

from textual.css.query import NoMatches

P = ParamSpec("P")


def while_open(method: Callable[P, None]) -> Callable[P, None]:
    """For a message handler or a worker thread's result: once the app is closing its
    widgets are gone, and there is nothing left to update."""

    @functools.wraps(method)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            method(*args, **kwargs)
        except NoMatches:
            return

    return guarded
