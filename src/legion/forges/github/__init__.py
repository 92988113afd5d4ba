"""The GitHub forge (`forge = "github"`): pull requests over GitHub's GraphQL API."""

from __future__ import annotations

from legion.forges.github.adapter import GitHubForge, open_forge
from legion.forges.github.doctor import doctor_checks

__all__ = ["GitHubForge", "doctor_checks", "open_forge"]
