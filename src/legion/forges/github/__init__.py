"""The GitHub forge (`forge = "github"`): pull requests over GitHub's GraphQL API."""

from __future__ import annotations

from legion.forges.github.adapter import GitHubForge, doctor_checks, open_forge

__all__ = ["GitHubForge", "doctor_checks", "open_forge"]
