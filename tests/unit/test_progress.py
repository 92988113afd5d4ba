"""A long test run is never silent for long (`tests/support/progress.py`): under xdist, as
`scripts/test` and CI run the suite, a line names the tests still running."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.claude_env import REPO_ROOT


def test_a_quiet_run_says_which_tests_still_run(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        "from tests.support.progress import StillRunning\n"
        "def pytest_configure(config):\n"
        "    config.pluginmanager.register(StillRunning(config, quiet=1.0, look=0.2))\n"
    )
    (tmp_path / "test_slow.py").write_text("import time\ndef test_slow():\n    time.sleep(3)\n")
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "1", "-p", "no:randomly",
         "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "[still running: test_slow.py::test_slow (" in ran.stdout, ran.stdout


def test_every_run_ends_with_its_fifteen_slowest_tests() -> None:
    """The README says a run lists its fifteen slowest tests at the end: pytest's own option,
    in the options every run gets."""
    import tomllib

    options = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    assert "--durations=15" in options["ini_options"]["addopts"].split()
