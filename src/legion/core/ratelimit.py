"""A token bucket: how many calls one caller may make, in a burst and over time. Pure: the
clock is passed in.

The relay answers each session's tracker, forge and bus calls with the daemon's credentials,
so a session that calls without end would spend the team's GitHub or Linear quota (issue 35).
Each capability gets a bucket: a burst of `capacity` calls, then `per_second`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Bucket:
    capacity: float
    per_second: float
    tokens: float
    at: float  # when `tokens` was counted

    @classmethod
    def full(cls, capacity: float, per_second: float, now: float) -> Bucket:
        return cls(capacity, per_second, capacity, now)

    def take(self, now: float) -> tuple[Bucket, float]:
        """The bucket after one call at `now`, and 0.0; or, when it is empty, the bucket as it
        is and how many seconds until a call may go."""
        tokens = min(self.capacity, self.tokens + max(0.0, now - self.at) * self.per_second)
        if tokens >= 1.0:
            return Bucket(self.capacity, self.per_second, tokens - 1.0, now), 0.0
        return Bucket(self.capacity, self.per_second, tokens, now), (1.0 - tokens) / self.per_second
