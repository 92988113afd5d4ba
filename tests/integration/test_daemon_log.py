"""The daemon's log, as `legion start` runs it: its lines go where its output always went
(`daemon.log` in the state folder, in the background) in the one format of
`legion.diagnostics.log`, and a `LEGION_LOG_LEVEL` it does not know is refused before anything
starts, in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support.cli import LegionRunner

LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (?P<level>[A-Z]+) +"
    r"step=\S+ issue=\S+ session=\S+ (?P<message>.*)$"
)


def test_a_log_level_it_does_not_know_is_refused_before_anything_starts(
    legion: LegionRunner,
) -> None:
    refused = legion("start", env={"LEGION_LOG_LEVEL": "loud"})
    assert refused.returncode == 1, refused
    assert refused.stderr == (
        "legion: error: environment LEGION_LOG_LEVEL must be one of debug, info, warning, "
        "error, got 'loud'\n"
    )


def test_the_background_daemon_logs_to_its_log_file_in_the_one_format(
    legion: LegionRunner, project: Path, tmux_socket: Path, fake_claude: Path
) -> None:
    started = legion("start", "--tick", "3600", "--json")
    try:
        assert started.returncode == 0, started.stderr
    finally:
        stopped = legion("stop", "--all")
    assert stopped.returncode == 0, stopped.stderr
    log_path = Path(json.loads(started.stdout)["log"])
    # Beside the lines `legion start --foreground` prints itself (it runs there, without a
    # terminal), each line is a log line.
    text = log_path.read_text()
    logged = [LINE.match(line) for line in text.splitlines() if line[:1].isdigit()]
    assert logged and all(logged), text
    said = [(m["level"], m["message"].split(" (pid")[0]) for m in logged if m is not None]
    assert said == [
        ("INFO", "daemon started"),
        ("INFO", "SIGTERM: stopping the daemon"),
        ("INFO", "daemon stopped"),
    ], text
