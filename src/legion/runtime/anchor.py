"""The first window of a project's tmux session: keeps the session alive whatever else comes
and goes, and says what the other windows are."""

from __future__ import annotations

import signal
import sys

HELP = """Legion session.

  main              the controller (started by `legion start`)
  <issue>-<mode>    one window per worker, e.g. leg-7-implement

Switch windows with Ctrl-b w. `legion status` and `legion workers` describe them.
"""


def main() -> int:
    sys.stdout.write(HELP)
    sys.stdout.flush()
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main())
