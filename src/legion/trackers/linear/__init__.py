"""The Linear tracker backend (`tracker = "linear"`, `linear_team = "ENG"`).

Imported only when a project uses Linear (`legion.backends`); httpx is imported later still,
at the first request.
"""

from __future__ import annotations

from legion.trackers.linear.adapter import LinearTracker, open_tracker
from legion.trackers.linear.doctor import doctor_checks

__all__ = ["LinearTracker", "doctor_checks", "open_tracker"]
