"""The demo's words: one issue is "1 issue"."""

from __future__ import annotations

from legion.demo.run import issues_text


def test_issue_counts_agree_in_number() -> None:
    assert [issues_text(n) for n in (0, 1, 2, 5)] == ["0 issues", "1 issue", "2 issues", "5 issues"]
