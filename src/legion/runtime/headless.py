"""The daemon's side of the runtimes whose sessions are turn loops (Codex's and Gemini's: one
headless turn of the CLI at a time, `legion.runtime.turn_loop`): what their `AgentRuntime`s
share. Their transcript is Legion's link to the CLI's own file of the session; beside it the
turn loop keeps its word on whether a turn runs (`turn_state_file`), which says more than the
transcript does (a turn killed half-way leaves its file in the middle of a turn, but the
session waits for input)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from legion.core.model import Mode
from legion.core.task_list import TaskList
from legion.errors import ConflictError
from legion.files.worker_written import read_text, transcript_stat
from legion.runtime.tmux import Tmux
from legion.runtime.transcript import PendingQuestion, TranscriptSummary, Turn, read_tail

TURN_STATE_BYTES = 64  # "running", "idle", or "refused <why>"
# The turn loop's word for a session whose last turn's key the model's API refused.
TURN_REFUSED = "refused"


def turn_state_file(link: Path) -> Path:
    """The turn loop's word on whether a turn runs (`running`, `idle`, `refused <why>`)."""
    return link.with_suffix(".turn")


def summarize_turn_loop(
    transcript: Path, summarize: Callable[[Iterable[str]], TranscriptSummary]
) -> TranscriptSummary | None:
    """The session's state from its transcript's tail (`summarize`, the CLI's reading of its
    file), corrected by what its turn loop says: idle (its turn is over, however the file
    ends), running, or refused (it cannot reach the model: the key was refused). None when
    there is no transcript (yet)."""
    try:
        transcript_stat(transcript)  # Legion's link, never followed elsewhere
    except OSError:
        return None
    summary = summarize(read_tail(transcript))
    state = turn_state_file(transcript)
    try:
        said = read_text(state.parents[1], state, cap=TURN_STATE_BYTES).strip()
    except OSError:
        return summary
    if said == "idle":
        return TranscriptSummary(summary.entries, Turn.ENDED, None, summary.unreachable)
    if said.startswith(TURN_REFUSED):
        why = said.removeprefix(TURN_REFUSED).strip() or "the key was refused"
        return TranscriptSummary(summary.entries, Turn.ENDED, None, f"API Error: {why}")
    if said == "running":
        return TranscriptSummary(summary.entries, Turn.OPEN, None)
    return summary


class HeadlessRuntime:
    """What an `AgentRuntime` of a turn loop does the same whatever its CLI: no first-run
    dialog, no question screen (its sessions ask on the bus, with `legion ask`), no task list
    its files show, its worker's prompt the skill's; its session's last activity, the time its
    transcript last changed."""

    product = "this CLI"  # its name, in what Legion says

    def skill_prompt(self, skill: str, args: str) -> str:
        raise NotImplementedError

    def last_activity(self, transcript: Path) -> float | None:
        try:
            return transcript_stat(transcript).st_mtime
        except OSError:
            return None

    def first_run_dialog(self, screen: str) -> tuple[str, list[str]] | None:
        return None  # headless turns show none

    def answer_question(
        self, tmux: Tmux, window_id: str, question: PendingQuestion, answers: Sequence[str]
    ) -> None:
        raise ConflictError(f"a {self.product} session has no question screen: reply on the bus")

    def worker_prompt(self, issue: str, mode: Mode) -> str:
        from legion.runtime.base import worker_skill_args

        return self.skill_prompt("legion-worker", worker_skill_args(issue, mode))

    def task_list(self, session_id: str) -> TaskList | None:
        return None  # what it plans is in its transcript only
