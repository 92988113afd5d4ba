"""One Claude Code version: the one the tests pin is the one `legion demo` installs."""

from __future__ import annotations

from pathlib import Path


def test_the_demo_installs_the_claude_code_version_the_tests_pin() -> None:
    from legion.demo.run import CLAUDE_CODE_VERSION

    pinned = Path(__file__).resolve().parents[2] / "scripts" / "claude-code-version"
    assert pinned.read_text(encoding="utf-8").strip() == CLAUDE_CODE_VERSION
