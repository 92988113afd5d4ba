"""The hook command's old path, `python -P -m legion.runtime.hook_entry EVENT …`, kept because a
Claude Code session started before the hooks moved to `legion.runtime.claude.hook_entry` still
has it in its `--settings` until it is restarted or resumed: its hooks must keep answering.
"""

from __future__ import annotations

import sys

from legion.runtime.claude.hook_entry import main

if __name__ == "__main__":
    sys.exit(main())
