"""The kill campaign over every named fault point (`legion.diagnostics.faults.POINTS`): for
each, a small swarm is SIGKILLed at the point and run again without the fault
(tests/support/campaign.py says what is checked). Prints each point's result and how many
kill points were survived.

Run: .venv/bin/python bench/faults.py [POINT[:N] ...]   (needs the pinned Claude Code:
legion doctor --install)
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.campaign import CAMPAIGN, run_point


def main(specs: list[str]) -> int:
    started = time.monotonic()
    survived = 0
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        for index, spec in enumerate(specs):
            root = Path(tmp) / f"run-{index}"
            home = root / "home"
            home.mkdir(parents=True)
            (home / ".gitconfig").write_text(
                "[user]\n\tname = Bench\n\temail = bench@legion.invalid\n"
                "[init]\n\tdefaultBranch = main\n"
            )
            os.environ |= {
                "HOME": str(home),
                "XDG_STATE_HOME": str(home / "state"),
                "XDG_CONFIG_HOME": str(home / "config"),
                "GIT_CONFIG_NOSYSTEM": "1",
            }
            try:
                result = run_point(spec, root / "run", home)
            except Exception as exc:  # a broken run counts as not survived, and says why
                print(f"{spec:28} ERROR   {type(exc).__name__}: {exc}", flush=True)
                continue
            ok = result.survived
            survived += ok
            why = "" if ok else "  " + "; ".join(result.problems or ["never reached"])
            print(
                f"{spec:28} {'ok' if ok else 'FAILED':7} {result.seconds:5.1f} s{why}", flush=True
            )
    total = time.monotonic() - started
    print(f"kill points survived: {survived}/{len(specs)} ({total:.0f} s)")
    return 0 if survived == len(specs) else 1


if __name__ == "__main__":
    for name in list(os.environ):
        if name.startswith("LEGION_"):
            del os.environ[name]
    sys.exit(main(sys.argv[1:] or list(CAMPAIGN)))
