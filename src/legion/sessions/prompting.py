"""The one confirmed way to type a prompt into a session: type it, then confirm the session
took it (its transcript grew). The CLI drops an Enter that comes while its input is not ready
(just after a turn ended), leaving the text in the input box: Enter is pressed once more, and
if that is not taken either, the box is cleared, so the text never joins the next prompt."""

from __future__ import annotations

import time
from pathlib import Path

from legion.core.liveness import ACCEPT_S, transcript_grew
from legion.runtime.tmux import Tmux


def transcript_size(path: Path) -> int:
    """A transcript's size in bytes; 0 for one not written yet."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def wait_for_growth(transcript: Path, mark: int, timeout: float = ACCEPT_S) -> bool:
    """Whether `transcript` grows past `mark` bytes within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if transcript_grew(mark, transcript_size(transcript)):
            return True
        time.sleep(0.02)  # a stat: cheap, and every wait here delays the prompt
    return transcript_grew(mark, transcript_size(transcript))


def type_prompt(tmux: Tmux, window_id: str, text: str, transcript: Path, mark: int) -> bool:
    """Type `text` into the idle session in `window_id`; True once its transcript has grown past
    `mark` (its size before: the caller records it first, as what it hands over may depend on
    it). Raises `TmuxError` when tmux cannot type."""
    tmux.send_text(window_id, text)
    if wait_for_growth(transcript, mark):
        return True
    tmux.send_keys(window_id, "Enter")
    if wait_for_growth(transcript, mark):
        return True
    tmux.send_keys(window_id, "C-u")  # never leave our text for the next prompt
    return False
