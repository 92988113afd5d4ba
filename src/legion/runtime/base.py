"""What Legion needs from an agent runtime (a coding agent's CLI it runs in tmux): the
protocol the worker manager, the daemon and the TUI use. Claude Code
(`legion.runtime.claude.runtime.ClaudeRuntime`) and Codex
(`legion.runtime.codex.runtime.CodexRuntime`) are its two implementations;
`docs/architecture.md` ("Agent runtimes") sets them side by side.

A session is known by the deterministic id Legion gives it; the runtime says how to start or
resume it in a workspace with a prompt, where its own record of the conversation lives (the
transcript), and how to read that record: the turn's state and any pending question, the time
of its last activity, and the tokens it used. Delivery at a turn boundary and the context
given back after a resume or a compaction are the runtime's too: `command` is handed the
session's inbox and context files, which Claude Code's hooks read, and Codex's turn loop reads
the same way. Skills are invoked through `skill_prompt`; they are Legion's part of every
session's own home (`legion.runtime.homes`), which `prepare` makes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from legion.core.model import Mode, normalize_identifier
from legion.core.task_list import TaskList
from legion.core.usage import Usage
from legion.runtime.tmux import Tmux
from legion.runtime.transcript import PendingQuestion, TranscriptSummary
from legion.sandbox.policy import Access


class AgentRuntime(Protocol):
    @property
    def name(self) -> str:
        """How the bus and the config name it (`claude-code`)."""
        ...

    def executable(self) -> str:
        """The CLI to run; a `ToolMissingError` saying how to get it when there is none."""
        ...

    def no_credential(self, env: Mapping[str, str]) -> str | None:
        """Why its sessions could reach no model, started from `env` (the daemon's: the keys it
        holds) with your own login: one line saying how to fix it; None when they can."""
        ...

    def command(
        self,
        session_id: str,
        prompt: str,
        *,
        resume: bool,
        inbox: Path | None = None,
        context: Path | None = None,
    ) -> list[str]:
        """argv that starts session `session_id` (or resumes it) with `prompt`. `inbox`: the
        file of messages the session is to be handed at its next turn boundary; `context`: the
        wake-up context it is given back after a resume or a compaction (see
        `legion.runtime.claude.hooks`)."""
        ...

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """Variables the CLI needs besides those it inherits."""
        ...

    def home(self, session_id: str) -> Path:
        """Session `session_id`'s own CLI home (`legion.runtime.homes`)."""
        ...

    def sandbox_access(self, env: Mapping[str, str], session_id: str, *, own_login: bool) -> Access:
        """What a confined session of this CLI uses besides its workspace: its own home
        (read-write, with Legion's part of it read-only), its install (read-only), and, when
        the daemon holds no key for it (`own_login`), your login file (read-only). `env`: the
        daemon's, which says where your CLI's home is."""
        ...

    def prepare(
        self,
        env: Mapping[str, str],
        workspace: Path,
        session_id: str,
        *,
        own_login: bool,
        confined: bool,
    ) -> dict[str, str]:
        """Make the session's own home ready for its start in `workspace` (no process of it
        runs), with the CLI's first-run questions answered there, so an unattended session
        does not stop at one; `confined`: whether it runs in the sandbox. Returns the variables
        that point the CLI at its home."""
        ...

    def transcript(self, workspace: Path, session_id: str) -> Path:
        """Where the session's record of the conversation is (it may not exist yet)."""
        ...

    def summarize(self, transcript: Path) -> TranscriptSummary | None:
        """The turn's state and any pending question; None when there is no transcript."""
        ...

    def last_activity(self, transcript: Path) -> float | None:
        """When the session (its subagents included) last wrote, in seconds since the epoch."""
        ...

    def usage(self, transcript: Path) -> list[tuple[str, Usage]]:
        """Each model response of the session: (when, its tokens)."""
        ...

    def first_run_dialog(self, screen: str) -> tuple[str, list[str]] | None:
        """When `screen` shows one of the CLI's first-run dialogs: the choice and the keys."""
        ...

    def answer_question(
        self, tmux: Tmux, window_id: str, question: PendingQuestion, answers: Sequence[str]
    ) -> None:
        """Type `answers` (one per part, in order) into the question screen of the session in
        `window_id`, which shows `question` (its pending one). Raises `InputError` for answers
        that do not fit it."""
        ...

    def skill_prompt(self, skill: str, args: str) -> str:
        """A prompt that has the session use Legion's skill `skill` with `args`."""
        ...

    def worker_prompt(self, issue: str, mode: Mode) -> str:
        """The first prompt of a worker in `mode` on `issue` (how its skill is invoked)."""
        ...

    def task_list(self, session_id: str) -> TaskList | None:
        """The session's own task list (what it is in the middle of); None when the CLI
        keeps none, or the session has none."""
        ...


def worker_skill_args(issue: str, mode: Mode) -> str:
    """What a worker's skill is given: the mode and the issue (`implement mode for LEG-1`)."""
    return f"{mode.value} mode for {normalize_identifier(issue)}"
