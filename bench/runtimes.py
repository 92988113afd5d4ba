"""Agent runtimes side by side (printed, never asserted): the same 3-issue demo on the scripted
model with every session on Claude Code, every session on Codex, and mixed (Codex implementers):
wall time to all Done, model requests, and the time each worker took from its start to its
end (median), from the demo's own figures. Each CLI's cost per turn shows in the last: Claude
Code stays up between turns, while a Codex session starts one `codex exec` process per turn.

Run: .venv/bin/python bench/runtimes.py   (needs the pinned CLIs: legion doctor --install --codex)
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.claude_env import find_claude
from tests.support.codex_env import find_codex

from legion.demo.run import run_demo

ISSUES = 3


def main() -> None:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        os.environ["LEGION_CLAUDE_BIN"] = str(find_claude())
        os.environ["LEGION_CODEX_BIN"] = str(find_codex())
        for runtime in ("claude-code", "codex", "mixed"):
            lines: list[str] = []

            def say(line: str, lines: list[str] = lines) -> None:
                lines.append(line)

            started = time.monotonic()
            result = run_demo(
                Path(tmp) / f"demo-{runtime}", issues=ISSUES, mode="auto", real=False,
                timeout=900, say=say, runtime=runtime,
            )  # fmt: skip
            took = time.monotonic() - started
            done = sum(1 for status in result.statuses.values() if status == "Done")
            workers = [
                float(line.rsplit("(", 1)[1].split(" s)")[0])
                for line in lines
                if "worker finished (" in line
            ]
            median = statistics.median(workers) if workers else float("nan")
            print(
                f"{runtime:11}: {done}/{ISSUES} Done in {result.seconds:.0f} s "
                f"({took:.0f} s with set-up), {result.requests} model requests, "
                f"worker start to end median {median:.1f} s over {len(workers)} workers"
            )


if __name__ == "__main__":
    main()
