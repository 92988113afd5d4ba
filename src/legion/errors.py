"""Errors a user can act on. Each renders as one line: what is wrong and what to do."""

from __future__ import annotations


class LegionError(Exception):
    """Base class: the message is shown to the user as is, on one line."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        # One line, always: a multi-line message would break `legion: error: ...`.
        return " ".join(self.message.split("\n"))


class InputError(LegionError):
    """The user (or a worker) gave a value Legion cannot accept."""

    exit_code = 2


class NotFoundError(LegionError):
    """An issue, pull request or project that does not exist."""


class ConfigError(LegionError):
    """A configuration file or setting is missing or malformed."""


class StoreError(LegionError):
    """The embedded database cannot be used (corrupt, locked, unwritable)."""


class ToolMissingError(LegionError):
    """An external program Legion drives (git, tmux, claude) is not installed."""


class ConflictError(LegionError):
    """The operation would overwrite or lose something, so it was refused."""
