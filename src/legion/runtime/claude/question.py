"""Answering Claude Code's `AskUserQuestion` screen through tmux: each question's option
numbers (or "Type something." and free text), then, for several questions, Submit."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence

from legion.errors import InputError
from legion.runtime.claude.runtime import CURSOR
from legion.runtime.tmux import Tmux
from legion.runtime.transcript import PendingQuestion


def answer_question(
    tmux: Tmux, window_id: str, question: PendingQuestion, answers: Sequence[str]
) -> None:
    """Type `answers` (one per part of `question`, in order) into the question screen."""
    items = question.items
    if len(answers) != len(items):
        raise InputError(
            f"the question has {len(items)} part(s): give {len(items)} answer(s), in order"
        )
    for item, answer in zip(items, answers, strict=True):
        _answer_item(tmux, window_id, item.options, item.multi_select, answer)
    if len(items) > 1:
        _wait_for_screen(tmux, window_id, lambda screen: "Submit" in screen)
        tmux.send_keys(window_id, "Tab")
        _wait_for_screen(tmux, window_id, lambda screen: "Submit answers" in screen)
        tmux.send_keys(window_id, "1")


def _answer_item(
    tmux: Tmux, target: str, options: tuple[str, ...], multi_select: bool, answer: str
) -> None:
    if not answer.strip():
        raise InputError("the answer is empty")
    chosen = option_numbers(options, answer, multi_select)
    if chosen:
        for number in chosen:
            tmux.send_keys(target, str(number))
        if multi_select:
            tmux.send_keys(target, "Tab")  # on to the next question or Submit
        return
    # Free text: move to "Type something.", then type. Text typed while the option list
    # has focus would be dropped and the Enter would pick option 1.
    other = len(options) + 1
    tmux.send_keys(target, str(other))
    row = re.compile(rf"{CURSOR}\s*{other}\.")
    _wait_for_screen(tmux, target, lambda screen: bool(row.search(screen)))
    tmux.send_text(target, answer)


def _wait_for_screen(
    tmux: Tmux, target: str, ready: Callable[[str], bool], timeout: float = 5.0
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready(tmux.capture(target, lines=60)):
            return
        time.sleep(0.05)


def option_numbers(options: tuple[str, ...], answer: str, multi_select: bool) -> list[int]:
    """The option numbers `answer` names (by label, any case, or by number); [] for free text."""
    parts = [part.strip() for part in answer.split(",")] if multi_select else [answer.strip()]
    numbers = []
    for part in parts:
        lowered = part.lower()
        match = next(
            (index for index, label in enumerate(options, 1) if label.lower() == lowered), None
        )
        if match is None and part.isdigit() and 1 <= int(part) <= len(options):
            match = int(part)
        if match is None:
            return []
        numbers.append(match)
    return numbers
