"""The log of Legion's long-running processes: the daemon (its steps, and its model proxy and
relay, which are threads of it), a confined session's bridge, a workspace's setup run, a
worker window's launch, the hooks and Codex's turn loop.

Each module logs to `logging.getLogger(__name__)`, the standard library's; the process calls
`setup` once where it starts, and every record of Legion's is then one line on stderr:

    2025-05-01T12:00:00.123Z WARNING step=reconcile issue=LEG-7 session=- what happened

The time is UTC. `step` is the daemon's step that was running (`legion.daemon.steps`), `issue`
and `session` whom the line is about; one not known is `-`. A call names them with
`extra={"issue": ...}`, a block with `context(step=...)`; in a session's own processes they
default to its `LEGION_ISSUE_ID` and `LEGION_SESSION_ID`.

Stderr, because each of these processes' output already goes where its log belongs: the
daemon's to `daemon.log` in the project's state folder when it runs in the background (the
terminal with `--foreground`), a bridge's or a launch's to its session's window. The line is
written to whatever `sys.stderr` is at that moment, so the daemon's, which quotes trackers,
forges and workers, stays escaped (`legion.cli.common.escaped_output`).

`LEGION_LOG_LEVEL` (debug, info, warning or error, in any case; default info) chooses the
least a line must be to be written. The daemon refuses a value it does not know; a session's
processes say so once and log at info.

A `legion` command is not such a process: `setup_command` shows what it logs as the rest of its
output (`legion: warning: ...`), warnings and errors only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import TextIO

from legion.errors import ConfigError
from legion.setting_spec import choice

LEVEL_ENV = "LEGION_LOG_LEVEL"
LEVELS = ("debug", "info", "warning", "error")
DEFAULT_LEVEL = "info"
# The logger every module's is under (`legion.proxy.server` ...): only Legion's own records
# are written, never a library's (httpx says every request it sends at info).
ROOT_LOGGER = "legion"
FIELDS = ("step", "issue", "session")
ABSENT = "-"
# Where a session's own processes find whose they are (set by the daemon when it starts one).
FIELD_ENV = {"issue": "LEGION_ISSUE_ID", "session": "LEGION_SESSION_ID"}

_context: dict[str, ContextVar[str | None]] = {
    name: ContextVar(f"legion_log_{name}", default=None) for name in FIELDS
}
_parse_level = choice(LEVELS)


def level_from(env: Mapping[str, str]) -> int:
    """The level `LEGION_LOG_LEVEL` chooses (info when unset); a ConfigError, on one line,
    for a value that is none of the levels."""
    raw = env.get(LEVEL_ENV, "")
    if not raw.strip():
        return logging.INFO
    try:
        name = _parse_level(raw)
    except ValueError as exc:
        raise ConfigError(f"environment {LEVEL_ENV} {exc}") from None
    return logging.getLevelNamesMapping()[name.upper()]


@contextlib.contextmanager
def context(
    *, step: str | None = None, issue: str | None = None, session: str | None = None
) -> Iterator[None]:
    """Within the block (in this thread), the lines logged name this step, issue or session
    (those given), unless a call names its own."""
    given = {"step": step, "issue": issue, "session": session}
    tokens = [(_context[name], _context[name].set(value)) for name, value in given.items() if value]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


class _Fields(logging.Filter):
    """Gives every record its step, issue and session: the call's own (`extra`), else the
    block's (`context`), else the process's (`defaults`), else `-`."""

    def __init__(self, defaults: Mapping[str, str]) -> None:
        super().__init__()
        self.defaults = dict(defaults)

    def filter(self, record: logging.LogRecord) -> bool:
        for name in FIELDS:
            given = getattr(record, name, None)
            if given is None or given == "":
                found = _context[name].get() or self.defaults.get(name) or ABSENT
                setattr(record, name, found)
        return True


class LogFormatter(logging.Formatter):
    """One line: UTC time (ISO 8601, to the millisecond), level, step, issue, session, message
    (a traceback, when one is logged, on the lines after it)."""

    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s %(levelname)-7s step=%(step)s issue=%(issue)s session=%(session)s "
            "%(message)s"
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        at = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        return at.replace("+00:00", "Z")


class _CommandFormatter(logging.Formatter):
    """As a `legion` command says the rest: `legion: warning: ...`."""

    def format(self, record: logging.LogRecord) -> str:
        return f"legion: {record.levelname.lower()}: {super().format(record)}"


class _Stderr(logging.StreamHandler[TextIO]):
    """Writes to whatever `sys.stderr` is when a record comes, not what it was at `setup`."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr  # under the handler's lock: `Handler.handle` holds it
        super().emit(record)


def setup(env: Mapping[str, str] | None = None, *, strict: bool = True) -> None:
    """Legion's records, from now on, as lines on stderr (the module's docstring), at the level
    `LEGION_LOG_LEVEL` chooses. `strict` (the daemon): a value it does not know is a
    ConfigError; otherwise (a session's processes, which must not fail for it) it is said
    once, and info is used. Called again, it replaces what it set up before."""
    env = os.environ if env is None else env
    wrong: str | None = None
    try:
        level = level_from(env)
    except ConfigError as exc:
        if strict:
            raise
        level, wrong = logging.INFO, str(exc)
    defaults = {name: env.get(variable, "") for name, variable in FIELD_ENV.items()}
    _install(level, LogFormatter(), _Fields(defaults))
    if wrong is not None:
        logging.getLogger(__name__).warning("%s; logging at info", wrong)


def setup_command() -> None:
    """A `legion` command's records, as its own output on stderr: warnings and errors only,
    whatever `LEGION_LOG_LEVEL` says (a command run in a session talks to its model: the
    daemon's chatter is not for it)."""
    _install(logging.WARNING, _CommandFormatter(), _Fields({}))


def _install(level: int, formatter: logging.Formatter, fields: _Fields) -> None:
    logger = logging.getLogger(ROOT_LOGGER)
    for handler in [h for h in logger.handlers if isinstance(h, _Stderr)]:
        logger.removeHandler(handler)
    handler = _Stderr()
    handler.setFormatter(formatter)
    handler.addFilter(fields)
    logger.addHandler(handler)
    logger.setLevel(level)
