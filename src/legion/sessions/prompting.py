"""The one confirmed way to type a prompt into a session: type it, then confirm the session
took it (its transcript recorded the prompt; growth alone may be the last turn's tail). The
CLI drops an Enter that comes while its input is not ready (just after a turn ended), leaving
the text in the input box: Enter is pressed once more, and if that is not taken either, the
box is cleared, so the text never joins the next prompt."""

from __future__ import annotations

import time
from pathlib import Path

from legion.core.liveness import ACCEPT_S
from legion.runtime.tmux import Tmux
from legion.runtime.transcript import prompt_fingerprint, records_prompt


def transcript_size(path: Path) -> int:
    """A transcript's size in bytes; 0 for one not written yet."""
    from legion.files.worker_written import transcript_stat

    try:  # the session's file: a link or a fifo planted there counts as none
        return transcript_stat(path).st_size
    except OSError:
        return 0


def wait_for_prompt(transcript: Path, mark: int, text: str, timeout: float = ACCEPT_S) -> bool:
    """Whether `transcript` records the prompt `text` past `mark` bytes within `timeout`
    seconds (`records_prompt`; the file is read only when it has grown)."""
    fingerprint = prompt_fingerprint(text)
    deadline = time.monotonic() + timeout
    read_at = mark
    while True:
        size = transcript_size(transcript)
        if size > read_at:
            if records_prompt(transcript, mark, fingerprint):
                return True
            read_at = size
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def type_prompt(tmux: Tmux, window_id: str, text: str, transcript: Path, mark: int) -> bool:
    """Type `text` into the idle session in `window_id`; True once its transcript has recorded
    it past `mark` (its size before: the caller records it first, as what it hands over may
    depend on it). Raises `TmuxError` when tmux cannot type."""
    tmux.send_text(window_id, text)
    if wait_for_prompt(transcript, mark, text):
        return True
    tmux.send_keys(window_id, "Enter")
    if wait_for_prompt(transcript, mark, text):
        return True
    tmux.send_keys(window_id, "C-u")  # never leave our text for the next prompt
    return False
