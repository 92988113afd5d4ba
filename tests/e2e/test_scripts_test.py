"""One Ctrl-C stops `scripts/test` at once (issue 24, item 12), with whatever its tests started.
End-to-end: `scripts/test` checks the tools before its tests (ruff and mypy skipped:
`LEGION_TEST_CHECKS=0`, which the test also proves: the hanging test is reached without them)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.reaper import alive

pytestmark = [pytest.mark.e2e]

REPO_ROOT = Path(__file__).resolve().parents[2]
# Where `scripts/test` installed the agent CLIs, read before a test's own HOME is set: its
# `legion doctor --install` finds them there, rather than installing all three again (20 s).
CLI_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


HANGING_TEST = """
import subprocess
from pathlib import Path

OUT = Path(__file__).parent


def test_hangs():
    loose = subprocess.Popen(["sleep", "600"], start_new_session=True)
    (OUT / "pids").write_text(str(loose.pid))
    with subprocess.Popen(["sleep", "600"]) as hanging:  # what subprocess.run does, and says so
        (OUT / "hanging").write_text(str(hanging.pid))
        try:
            hanging.wait()
        except BaseException:
            hanging.kill()
            raise
"""


def test_one_ctrl_c_stops_scripts_test(tmp_path: Path) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "test_hanging.py").write_text(HANGING_TEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEST_REAPER_")}
    env["LEGION_TEST_CHECKS"] = "0"  # ruff and mypy, a minute here, are no part of it
    env["XDG_CACHE_HOME"] = str(CLI_CACHE)
    proc = subprocess.Popen(
        [str(REPO_ROOT / "scripts" / "test"), "-q", "-p", "no:cacheprovider", "-p",
         "tests.conftest", "--rootdir", str(inner), str(inner / "test_hanging.py")],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 280
        while not (inner / "hanging").exists():  # the test is in its endless wait
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)  # what one Ctrl-C in a terminal does
        sent = time.monotonic()
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    took = time.monotonic() - sent
    loose = int((inner / "pids").read_text())
    left = alive(loose)
    if left:
        os.kill(loose, signal.SIGKILL)
    assert proc.returncode == 130, out[-3000:]
    # pytest's own clean-up takes seconds; one that does not end within 20 s is killed and what
    # its tests started swept by the run's mark (tests/support/reaper.py).
    assert took < 35, took
    assert "interrupted" in out
    assert "ruff and mypy skipped (LEGION_TEST_CHECKS=0)" in out and "== mypy" not in out
    assert not left, (took, out[-3000:])
