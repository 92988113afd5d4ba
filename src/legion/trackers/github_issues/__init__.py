"""The GitHub Issues tracker backend (`tracker = "github"`, `github_repo = "OWNER/NAME"`, and
optionally `github_project = N` for a Projects (v2) board whose Status field is the status).

Imported only when a project uses it (`legion.backends`); httpx is imported later still, at
the first request.
"""

from __future__ import annotations

from legion.trackers.github_issues.adapter import GitHubIssuesTracker, open_tracker
from legion.trackers.github_issues.doctor import doctor_checks

__all__ = ["GitHubIssuesTracker", "doctor_checks", "open_tracker"]
