"""Errors a user can act on. Each renders as one line: what is wrong and what to do.

The one tree of Legion's errors (code matches on the class, never on the text):

    LegionError                 exit 1 (the CLI renders any as `legion: error: …`)
    ├── InputError              exit 2: a value Legion cannot accept
    ├── NotFoundError           an issue, pull request or project that does not exist
    ├── ConfigError             a configuration file or setting is missing or malformed
    ├── StoreError              the embedded database cannot be used
    ├── ToolMissingError        git, tmux, claude or codex is not installed
    ├── ConflictError           it would overwrite or lose something
    │   ├── StaleSignalError    a signal from a session that has since been replaced
    │   └── TamperedWorkspaceError  a workspace's .git no longer points where Legion put it
    ├── NotPermittedError       exit 2: outside the session's capability
    ├── BackendError            a tracker's or forge's API failed, with its kind
    │                           (transient, rate limited, auth, not found, invalid)
    ├── GitError                a git command failed
    ├── JjError                 a jj command failed
    ├── TmuxError               a tmux command failed
    │   └── TmuxUnavailable     tmux could not be asked: what runs is unknown
    ├── WorkerStartError        a worker's process ended before its session began
    ├── ProtocolError           a relay request or answer off the protocol
    ├── RelayUnavailableError   the daemon that makes a session's calls is not there
    └── NoDaemonError           a session would start with no daemon to host it
"""

from __future__ import annotations

from enum import Enum


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
    """An issue, pull request, project or host that does not exist."""


class ConfigError(LegionError):
    """A configuration file or setting is missing or malformed."""


class StoreError(LegionError):
    """The embedded database cannot be used (corrupt, locked, unwritable)."""


class StoreUnreachableError(StoreError):
    """The store's server cannot be reached now (down, restarting, cut off): a wait, not a
    fault of the data."""


class ToolMissingError(LegionError):
    """An external program Legion drives (git, tmux, claude) is not installed."""


class ConflictError(LegionError):
    """The operation would overwrite or lose something, so it was refused."""


class NoRoomError(ConflictError):
    """No host of the fleet has room for another session now: the start waits."""


class StaleSignalError(ConflictError):
    """A signal from a session that has since been replaced (an older spawn instance)."""


class TamperedWorkspaceError(ConflictError):
    """A workspace's `.git` no longer points where Legion put it (`core.worktree_link`): git
    is not run on it, and it is left as it is."""


class NotPermittedError(LegionError):
    """A session asked for something its capability does not cover (a worker, another issue):
    refused by the daemon, which makes the tracker's and forge's calls for it."""

    exit_code = 2


class BackendErrorKind(Enum):
    """What the reconciler does about a failed call to a tracker or forge."""

    TRANSIENT = "transient"  # a 5xx, a timeout, a dropped connection: retry with backoff
    RATE_LIMITED = "rate_limited"  # wait until the reset the server gave
    AUTH = "auth"  # stop dispatching, tell the human once, point at `legion doctor`
    NOT_FOUND = "not_found"  # that item is unknown this pass
    INVALID = "invalid"  # Legion sent something the server refused: a bug, logged by operation


class BackendError(LegionError):
    """A tracker's or forge's API failed. `operation` names the request (a GraphQL operation
    name or a REST route), never its variables, so the line is safe to log."""

    def __init__(
        self,
        backend: str,
        kind: BackendErrorKind,
        message: str,
        *,
        operation: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        where = f"{backend} {operation}" if operation else backend
        super().__init__(f"{where}: {message}{_HINTS.get(kind, '')}")
        self.backend = backend
        self.kind = kind
        self.operation = operation
        self.retry_after = retry_after
        # Whether the request may have reached the server (and so taken effect): only a
        # connection that was never made is known not to have.
        self.delivered = True

    @property
    def retryable(self) -> bool:
        return self.kind in (BackendErrorKind.TRANSIENT, BackendErrorKind.RATE_LIMITED)


_HINTS = {BackendErrorKind.AUTH: " (run `legion doctor` to check the credentials)"}


class GitError(LegionError):
    """A git command failed; the message carries git's own last words."""


class JjError(LegionError):
    """A jj command failed."""


class TmuxError(LegionError):
    """A tmux command failed."""


class TmuxUnavailable(TmuxError):
    """tmux could not be asked (it failed, hung or was killed): what runs in it is unknown.

    Never read this as "nothing runs": skip the decision and look again later."""


class WorkerStartError(LegionError):
    """The worker's process ended before its session began."""


class ProtocolError(LegionError):
    """A relay request or answer that does not follow the protocol."""


class RelayUnavailableError(LegionError):
    """The Legion daemon, which makes this session's tracker and forge calls, is not there."""


class NoDaemonError(LegionError):
    """A session would start while no daemon runs for its project: only the daemon holds the
    model key and Legion's state, so only under it does a session start."""
