"""How far the human has read each channel: the unread counts in the TUI's sidebar.

The bus records reads per delivery, and only messages addressed to someone have deliveries;
a human watching a channel also wants to know that *anything* new was said there. So the TUI
keeps, per channel, the newest `seq` it has shown the human, in a small file of the state
folder (`$XDG_STATE_HOME/legion/tui.json`): a message is unread when its `seq` is above its
channel's mark and the human did not write it. A channel never opened counts from the
*baseline*, the newest `seq` on the bus when the TUI first ran on this machine, so a first
start does not greet the human with every message ever posted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from legion.bus.model import Channel
from legion.config.paths import state_home
from legion.files.private import write_private

FILE_NAME = "tui.json"


def marks_path(env: Mapping[str, str]) -> Path:
    return state_home(env) / FILE_NAME


@dataclass
class ReadMarks:
    """Per channel, the newest `seq` shown to the human. `path` None: kept in memory only."""

    path: Path | None
    baseline: int
    seen: dict[str, int] = field(default_factory=dict)
    dirty: bool = False

    @classmethod
    def load(cls, path: Path | None, newest_seq: int) -> ReadMarks:
        """The marks saved at `path`; a missing or unreadable file starts afresh from
        `newest_seq` (a broken file is not worth stopping the TUI for: it is replaced)."""
        if path is None:
            return cls(None, newest_seq)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            baseline = int(data["baseline"])
            seen = {str(name): int(seq) for name, seq in dict(data["seen"]).items()}
        except (OSError, ValueError, KeyError, TypeError):
            return cls(path, newest_seq, dirty=True)
        return cls(path, baseline, seen)

    def last_seen(self, channel: Channel) -> int:
        return self.seen.get(str(channel), self.baseline)

    def mark(self, channel: Channel, seq: int) -> None:
        """The human has seen `channel` up to `seq` (a mark never goes back)."""
        if seq > self.last_seen(channel):
            self.seen[str(channel)] = seq
            self.dirty = True

    def save(self) -> None:
        """Write the marks if they changed (atomically, 0600). A failure to write is not
        reported: the counts are a convenience, and the file is tried again next time."""
        if self.path is None or not self.dirty:
            return
        text = json.dumps({"baseline": self.baseline, "seen": self.seen}, sort_keys=True)
        try:
            write_private(self.path, text + "\n")
        except OSError:
            return
        self.dirty = False
