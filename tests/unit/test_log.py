"""`legion.diagnostics.log`: one line per record on stderr (UTC time, level, step, issue,
session, message; a field not known is `-`), at the level `LEGION_LOG_LEVEL` chooses; a value
it does not know is refused in one line, or said once by a session's processes."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pytest

from legion.diagnostics import log
from legion.errors import ConfigError

LINE = re.compile(
    r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (?P<level>[A-Z]+) +"
    r"step=(?P<step>\S+) issue=(?P<issue>\S+) session=(?P<session>\S+) (?P<message>.*)$"
)


@pytest.fixture(autouse=True)
def legion_logger() -> Iterator[logging.Logger]:
    """Whatever a test sets up is undone after it: the logger is the process's."""
    logger = logging.getLogger(log.ROOT_LOGGER)
    handlers, level = list(logger.handlers), logger.level
    yield logger
    logger.handlers[:] = handlers
    logger.setLevel(level)


def lines(err: str) -> list[dict[str, str]]:
    found = []
    for line in err.splitlines():
        match = LINE.match(line)
        assert match is not None, f"not a log line: {line!r}"
        found.append(match.groupdict())
    return found


def test_a_line_says_when_how_bad_which_step_issue_and_session(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log.setup({})
    logger = logging.getLogger("legion.daemon.test")
    with log.context(step="reconcile", issue="LEG-1"):
        logger.warning("the tracker said no", extra={"session": "s-1"})
    [line] = lines(capsys.readouterr().err)
    assert line["level"] == "WARNING"
    assert (line["step"], line["issue"], line["session"]) == ("reconcile", "LEG-1", "s-1")
    assert line["message"] == "the tracker said no"
    assert line["time"].endswith("Z")  # UTC


def test_a_field_not_known_is_a_dash_and_a_call_names_its_own(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log.setup({})
    logger = logging.getLogger("legion.proxy.test")
    logger.info("nothing known")
    with log.context(issue="LEG-1"):
        logger.info("this one's", extra={"issue": "LEG-2"})
    logger.info("the block is over")
    first, second, third = lines(capsys.readouterr().err)
    assert (first["step"], first["issue"], first["session"]) == ("-", "-", "-")
    assert second["issue"] == "LEG-2"
    assert third["issue"] == "-"


def test_a_sessions_process_names_its_issue_and_session_from_its_environment(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log.setup({"LEGION_ISSUE_ID": "LEG-7", "LEGION_SESSION_ID": "s-7"}, strict=False)
    logging.getLogger("legion.sandbox.bridge").warning("cannot listen")
    [line] = lines(capsys.readouterr().err)
    assert (line["issue"], line["session"]) == ("LEG-7", "s-7")


def test_only_legions_records_are_written(capsys: pytest.CaptureFixture[str]) -> None:
    log.setup({})
    logging.getLogger("httpx").warning("a library's")  # pytest's own handler takes it
    logging.getLogger("legion.x").warning("ours")
    assert [line["message"] for line in lines(capsys.readouterr().err)] == ["ours"]


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("", ["info", "warning", "error"]),  # the default: info
        ("debug", ["debug", "info", "warning", "error"]),
        ("WARNING", ["warning", "error"]),  # any case
        (" error ", ["error"]),
    ],
)
def test_the_level_variable_chooses_what_is_written(
    value: str, written: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    log.setup({"LEGION_LOG_LEVEL": value} if value else {})
    logger = logging.getLogger("legion.x")
    for level in ("debug", "info", "warning", "error"):
        getattr(logger, level)(level)
    assert [line["message"] for line in lines(capsys.readouterr().err)] == written


def test_a_level_it_does_not_know_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError) as refused:
        log.setup({"LEGION_LOG_LEVEL": "verbose"})
    assert str(refused.value) == (
        "environment LEGION_LOG_LEVEL must be one of debug, info, warning, error, got 'verbose'"
    )
    with pytest.raises(ConfigError, match='did you mean "debug"'):
        log.level_from({"LEGION_LOG_LEVEL": "debgu"})


def test_a_sessions_process_says_a_wrong_level_once_and_logs_at_info(
    capsys: pytest.CaptureFixture[str],
) -> None:
    log.setup({"LEGION_LOG_LEVEL": "loud"}, strict=False)
    logging.getLogger("legion.x").info("still written")
    said, written = lines(capsys.readouterr().err)
    assert said["level"] == "WARNING" and "LEGION_LOG_LEVEL" in said["message"]
    assert said["message"].endswith("got 'loud'; logging at info")
    assert written["message"] == "still written"


def test_setting_up_again_replaces_the_handler(capsys: pytest.CaptureFixture[str]) -> None:
    log.setup({})
    log.setup({})
    logging.getLogger("legion.x").warning("once")
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_the_daemons_log_is_escaped_as_its_output_is(capsys: pytest.CaptureFixture[str]) -> None:
    """The line goes to whatever stderr is when it is logged: the daemon's is escaped
    (`escaped_output`), and what it logs quotes trackers, forges and workers."""
    from legion.cli.common import escaped_output
    from tests.support.hostile import HOSTILE, assert_inert

    log.setup({})
    with escaped_output():
        logging.getLogger("legion.x").warning("the tracker said: %s", HOSTILE)
    assert_inert(capsys.readouterr().err, where="daemon log", shown=False)


def test_a_command_says_warnings_as_its_own_output(capsys: pytest.CaptureFixture[str]) -> None:
    log.setup_command()
    logger = logging.getLogger("legion.forges.x")
    logger.info("not for the user")
    logger.warning("the local main not updated")
    assert capsys.readouterr().err == "legion: warning: the local main not updated\n"
