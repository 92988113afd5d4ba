"""The project's tmux session and its windows: what every caller needs of a session's window
(list, find, read the screen, type, close, attach) goes through here, so none reaches for tmux.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from legion.config import Project
from legion.core.ids import short_id
from legion.errors import TmuxError
from legion.runtime.tmux import Attach, Tmux, Window
from legion.sessions import prompting
from legion.sessions.observer import CONTROLLER_WINDOW
from legion.store import now

# The window that keeps the project's tmux session open while no session runs.
logger = logging.getLogger(__name__)

ANCHOR_WINDOW = "legion"


class SessionWindows:
    def __init__(
        self,
        project: Project,
        tmux: Tmux,
        ended: Callable[[str], object] | None = None,
        exited: Callable[[str, str], object] | None = None,
    ) -> None:
        """`ended`: what is done as a session ends (its capability revoked), with its id;
        `exited`: what is done once a session's CLI is seen to have exited by itself, with its
        id and when the look that saw it began (its capabilities minted before then revoked)."""
        self.project = project
        self.tmux = tmux
        self._ended = ended
        self._exited = exited
        self._looking = 0  # how deep in `one_look` blocks
        self._look: list[Window] | None = None  # the windows seen in this look, until a change
        self._look_at = ""  # when that look began (`legion.store.now`)
        # Dead windows whose session's end was done: when first (window id: instant), and
        # those done again at a later second (see `end_exited`).
        self._exit_seen: dict[str, str] = {}
        self._exit_done: set[str] = set()

    @contextlib.contextmanager
    def one_look(self) -> Iterator[None]:
        """Within, `list` asks tmux once and answers from that look until a window is opened
        or closed through these windows: a daemon tick looks at the windows from several steps
        (worker and controller health, statuses, the pass), each a tmux client otherwise.
        What another process changes meanwhile is seen at the next tick, as it would be a
        moment after any look."""
        self._looking += 1
        try:
            yield
        finally:
            self._looking -= 1
            if not self._looking:
                self._look = None

    def _changed(self) -> None:
        self._look = None

    @property
    def session(self) -> str:
        """The project's tmux session."""
        return f"legion-{short_id(self.project.settings.project_id)}"

    def ensure_session(self) -> None:
        """Open the project's tmux session (its anchor window) unless it is open."""
        if self.tmux.has_session(self.session):
            return
        self._changed()
        anchor = [sys.executable, "-m", "legion.runtime.anchor"]
        try:
            self.tmux.new_session(self.session, ANCHOR_WINDOW, anchor, self.project.root)
        except TmuxError:
            if not self.tmux.has_session(self.session):  # else another process made it first
                raise

    def list(self) -> list[Window]:
        """The project's windows. Raises `TmuxUnavailable` when tmux cannot say which run: that
        is unknown, never "none"."""
        return list(self._seen()[0])

    def _seen(self) -> tuple[Sequence[Window], str]:
        """`list`, and when the look it comes from began (`legion.store.now`)."""
        if self._looking and self._look is not None:
            return list(self._look), self._look_at
        at = now()
        windows = self.tmux.list_windows(self.session)
        if self._looking:
            self._look, self._look_at = windows, at
        return list(windows), at

    def controller_window(self) -> Window | None:
        """The controller's window (dead or alive), or None when there is none."""
        return next((w for w in self.list() if w.name == CONTROLLER_WINDOW), None)

    def live_window(self, sid: str) -> Window | None:
        """The live window running session `sid`, or None."""
        return next((w for w in self.list() if w.tag == sid and not w.pane_dead), None)

    def start(self, name: str, command: Sequence[str], cwd: Path, *, tag: str) -> Window:
        """Open window `name` running `command` (its dead pane kept for `peek`), tagged."""
        self._changed()
        try:
            return self.tmux.start_window(self.session, name, [*command], cwd, tag=tag)
        finally:
            self._changed()

    def screen(self, window_id: str, lines: int = 60) -> str:
        """What the window shows (its last `lines`), as text: what the terminal has already
        acted on."""
        return self.tmux.capture(window_id, lines=lines)

    def screens(self, window_ids: Sequence[str], lines: int = 60) -> dict[str, str]:
        """`screen` of several windows, read with one tmux client; a window gone is left out."""
        return self.tmux.capture_many(window_ids, lines=lines)

    def send_text(self, window_id: str, text: str) -> None:
        """Type `text` into the window as it is (`send-keys -l`) and press Enter."""
        self.tmux.send_text(window_id, text)

    def type_prompt(self, window_id: str, text: str, transcript: Path, mark: int) -> bool:
        """Type a prompt into an idle session, confirmed (`legion.sessions.prompting`)."""
        return prompting.type_prompt(self.tmux, window_id, text, transcript, mark)

    def end(self, sid: str) -> None:
        """Session `sid` ends: every way a session ends comes here (each close below, a retire,
        a kill), so its capability is refused from now on, by the proxy and the relay, even
        while its process is still on its way out. A store that fails is said on stderr and
        never keeps a window open: the session's next start revokes it all the same."""
        if not sid or self._ended is None:
            return
        try:
            self._ended(sid)
        except Exception as exc:  # whatever it is, the window closes all the same
            logger.warning(
                "session %s's capability not revoked: %s: %s",
                sid,
                type(exc).__name__,
                exc,
                extra={"session": sid},
            )

    def end_exited(self) -> Sequence[str]:
        """A session whose CLI exited by itself (its dead pane kept for `peek`: the CLI quit,
        crashed, or finished) ends too once Legion sees it: its capability is revoked, as at
        every end Legion makes (`end`). Only the capabilities minted before the look that saw
        the dead pane go: a start of the same session closes that window before it mints its
        own, so one minted since is a new session's. (Minting is recorded to the second: a
        dead window is done again at a later second, then left.) The sessions done now."""
        if self._exited is None:
            return []
        windows, at = self._seen()
        done = []
        for window in windows:
            if not window.pane_dead or not window.tag or window.id in self._exit_done:
                continue
            first = self._exit_seen.get(window.id)
            if first is not None and at <= first:
                continue  # done at this second already
            try:
                self._exited(window.tag, at)
            except Exception as exc:  # said; looked at again at the next tick
                logger.warning(
                    "session %s's capability not revoked: %s: %s",
                    window.tag,
                    type(exc).__name__,
                    exc,
                    extra={"session": window.tag},
                )
                continue
            if first is None:
                self._exit_seen[window.id] = at
            else:
                self._exit_done.add(window.id)
            done.append(window.tag)
        present = {window.id for window in windows}
        self._exit_seen = {key: at for key, at in self._exit_seen.items() if key in present}
        self._exit_done &= present
        return done

    def close_window(self, window: Window, *, pane_pid: int | None = None) -> None:
        """Close a window (a stuck worker's: the reconciler restarts its session; a killed
        one's) and wait for its process."""
        self.end(window.tag)
        self._changed()
        self.tmux.kill_window(window.id, pane_pid=pane_pid)

    def close_and_wait(self, window: Window) -> None:
        """Close a window and wait for its process (a leftover of the session about to start)."""
        pid = None if window.pane_dead else window.pane_pid
        self.end(window.tag)
        self._changed()
        self.tmux.kill_window(window.id, pane_pid=pid)

    def close_retired(self, window: Window) -> None:
        """Close a retired worker's window; its process is waited for (SIGKILL after the grace
        period) beside the caller. Nothing takes its place: the next worker runs another
        session, and a start of the same session first waits for whatever still runs it
        (`SessionSupervisor.start_session_window`), so the hand-off need not wait for a CLI's
        exit."""
        pid = None if window.pane_dead else window.pane_pid
        self.end(window.tag)
        self._changed()
        self.tmux.kill_window(window.id, pane_pid=pid, wait=False)

    def attach_command(self, window_id: str, environ: Mapping[str, str]) -> Attach:
        """How this terminal opens the window read-write (`legion attach`, the TUI)."""
        return self.tmux.attach_command(self.session, window_id, environ)

    def check_tmux(self) -> None:
        """Raise when tmux cannot be run."""
        self.tmux.run("-V")

    def running(self) -> bool:
        """Whether the project's tmux session is there (its sessions may run)."""
        return self.tmux.has_session(self.session)

    def close_all(self) -> bool:
        """Close the project's tmux session, every window in it; False when there was none."""
        if not self.tmux.has_session(self.session):
            return False
        ending = [window.tag for window in self.list()]
        self._changed()
        # Closed first: a fleet host that lost its lead stops them on time, whatever its
        # store (where capabilities are) answers.
        self.tmux.kill_session(self.session)
        for sid in ending:
            self.end(sid)
        return True
