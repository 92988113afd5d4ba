"""Token usage: what a model was sent and wrote, as the runtime recorded it. Pure.

`input` counts the tokens sent afresh, `cache_read` those the provider served from its prompt
cache (cheaper), `cache_write` those written into it; `output` what the model wrote. A phase's
usage is the sum over the model responses its session recorded while the phase ran.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Usage:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
        )

    @property
    def total(self) -> int:
        """Every token counted once: what a budget is measured in."""
        return self.input + self.output + self.cache_read + self.cache_write

    def to_json(self) -> dict[str, int]:
        return {
            "input": self.input,
            "output": self.output,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "total": self.total,
        }

    def describe(self) -> str:
        """One line for people: `12.3k in, 1.2k out, 40.0k cached`."""
        cached = self.cache_read + self.cache_write
        return f"{_short(self.input)} in, {_short(self.output)} out, {_short(cached)} cached"


@dataclass(frozen=True, slots=True)
class Price:
    """What a model's tokens cost, per million, in the user's currency (`[prices]`)."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, usage: Usage) -> float:
        return (
            usage.input * self.input
            + usage.output * self.output
            + usage.cache_read * self.cache_read
            + usage.cache_write * self.cache_write
        ) / 1_000_000


def total(usages: Iterable[Usage]) -> Usage:
    summed = Usage()
    for usage in usages:
        summed = summed + usage
    return summed


def larger_per_phase(
    a: dict[str, dict[str, Usage]], b: dict[str, dict[str, Usage]]
) -> dict[str, dict[str, Usage]]:
    """Two counts of the same tokens by issue and phase, as one: for each phase the count with
    the larger total (each was counted from a record that may miss responses, never one that
    adds any)."""
    merged: dict[str, dict[str, Usage]] = {}
    for issue in a.keys() | b.keys():
        left, right = a.get(issue, {}), b.get(issue, {})
        merged[issue] = {
            phase: max(left.get(phase, Usage()), right.get(phase, Usage()), key=_by_total)
            for phase in left.keys() | right.keys()
        }
    return merged


def _by_total(usage: Usage) -> int:
    return usage.total


def _short(count: int) -> str:
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k"
    return f"{count / 1_000_000:.2f}M"


def _count(data: dict[str, Any], key: str) -> int:
    value = data.get(key)
    return value if isinstance(value, int) and value > 0 else 0


def anthropic_usage(data: dict[str, Any]) -> Usage:
    """A Messages API `usage` object (what Claude Code records per response)."""
    return Usage(
        input=_count(data, "input_tokens"),
        output=_count(data, "output_tokens"),
        cache_read=_count(data, "cache_read_input_tokens"),
        cache_write=_count(data, "cache_creation_input_tokens"),
    )
