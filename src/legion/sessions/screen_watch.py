"""One watch over sessions' screens, for the stuck rules (`legion.core.liveness`): what each
window's screen has shown and since when, one digest for every watcher (a blank screen, a CLI
still loading, is never still), and the confirming looks that tell a still screen from a
spinner's frame seen again by chance. The reaper watches the workers' windows with it, the
controller's supervision the controller's window before its first transcript line."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Collection

from legion.core.liveness import ScreenSeen, screen_seen
from legion.sessions.windows import SessionWindows

# A screen judged still is looked at this many more times, this far apart, before it counts
# (`ScreenWatch.confirmed_still`): a spinner shows another frame well within the span.
CONFIRM_LOOKS = 5
CONFIRM_GAP_S = 0.4


def screen_digest(screen: str) -> str:
    """A screen's digest; "" for a blank one (a CLI still loading: never still)."""
    return hashlib.sha256(screen.encode()).hexdigest() if screen.strip() else ""


class ScreenWatch:
    def __init__(self, windows: SessionWindows) -> None:
        self.windows = windows
        self._seen: dict[str, ScreenSeen] = {}  # by window id

    def seen(self, window_id: str) -> ScreenSeen | None:
        """What the window's screen showed at the last look, and since when."""
        return self._seen.get(window_id)

    def look(self, window_id: str, screen: str, now: float) -> ScreenSeen:
        """The window shows `screen` at `now` (monotonic seconds): unchanged since when?"""
        seen = screen_seen(self._seen.get(window_id), window_id, screen_digest(screen), now)
        self._seen[window_id] = seen
        return seen

    def keep_only(self, window_ids: Collection[str]) -> None:
        """Forget every window but these (the others are gone, or no longer watched)."""
        self._seen = {key: seen for key, seen in self._seen.items() if key in window_ids}

    def confirmed_still(self, window_id: str) -> bool:
        """Whether `CONFIRM_LOOKS` more looks, `CONFIRM_GAP_S` apart, all show what the last
        look saw (or the window is gone). Ticks are sparse while nothing happens, so two looks
        far apart can catch a spinner on the same frame: a screen is judged still only once a
        few looks in quick succession say so too. One that moved is watched as changed now."""
        seen = self._seen.get(window_id)
        if seen is None:
            return False
        for _ in range(CONFIRM_LOOKS):
            time.sleep(CONFIRM_GAP_S)
            screen = self.windows.screens([window_id]).get(window_id)
            if screen is None:
                return True
            digest = screen_digest(screen)
            if digest != seen.digest:
                self._seen[window_id] = screen_seen(None, window_id, digest, time.monotonic())
                return False
        return True
