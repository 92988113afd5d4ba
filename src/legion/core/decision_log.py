"""What the action log keeps of each decision of the table, and the rules over it.

An entry of a table's action keeps what the table was given (the `Observation`), the row that
matched and what the pass's admission saw (`Gates`: the dispatch pause, a model hold, the WIP
limit and the hosts' room). That is enough to say why (`legion why`) and to run a later table
over the same inputs (`legion log --replay`): the entries it decides differently are what a
change to the table would have changed in this team's own history.

A skip changes nothing, so a pass logs one only when the issue's decision changed (not at
every tick), and never the first decision about an issue that is not Legion's to work on (row
1): a tracker's Done and Backlog hold hundreds of issues Legion never touched. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from legion.core.decide import Action, Decision, Observation, Verdict, explain
from legion.core.model import Mode

# The row of an issue nobody works on (Triage, Icebox, Done, Backlog not opted in).
NOT_LEGIONS_ROW = 1
# The most of a kept row's words read back.
MAX_WORDS = 300


@dataclass(frozen=True, slots=True)
class Gates:
    """What the pass's admission saw when it carried the action out (None: not known, as a
    person's dispatch or a dry run's). Kept to explain a deferral; the table does not read it."""

    paused: str | None = None  # why dispatch is paused
    model_held: str | None = None  # why no model request may go now
    code_workers: int | None = None  # live workers counting toward the WIP limit
    wip_limit: int | None = None
    sessions: int | None = None  # live sessions, against the hosts' capacity
    capacity: int | None = None
    draining: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "paused": self.paused,
            "model_held": self.model_held,
            "wip": [self.code_workers, self.wip_limit],
            "sessions": [self.sessions, self.capacity],
            "draining": self.draining,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Gates:
        wip = _pair(data.get("wip"))
        sessions = _pair(data.get("sessions"))
        return cls(
            paused=_text(data.get("paused")),
            model_held=_text(data.get("model_held")),
            code_workers=wip[0],
            wip_limit=wip[1],
            sessions=sessions[0],
            capacity=sessions[1],
            draining=data.get("draining") is True,
        )

    @property
    def words(self) -> list[str]:
        """What held or bounded a start, for a person: `WIP 2 of 2`, `dispatch paused: …`."""
        said = []
        if self.paused:
            said.append(f"dispatch paused: {self.paused}")
        if self.model_held:
            said.append(f"model held: {self.model_held}")
        if self.wip_limit is not None and self.code_workers is not None:
            said.append(f"WIP {self.code_workers} of {self.wip_limit}")
        if self.capacity is not None and self.sessions is not None:
            said.append(f"sessions {self.sessions} of {self.capacity}")
        if self.draining:
            said.append("this host drains")
        return said


def _pair(value: Any) -> tuple[int | None, int | None]:
    if not isinstance(value, list) or len(value) != 2:
        return None, None
    first, second = value
    return (
        first if isinstance(first, int) and not isinstance(first, bool) else None,
        second if isinstance(second, int) and not isinstance(second, bool) else None,
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class Decided:
    """One decision as the action log keeps it: the table's inputs, the row and the decision
    it gave, and what admission saw."""

    observation: Observation
    verdict: Verdict
    gates: Gates = field(default_factory=Gates)
    # The row's words when it was decided: a later table may number its rows otherwise.
    said: str = ""

    @property
    def key(self) -> DecisionKey:
        return key_of(self.verdict)

    @property
    def why(self) -> str:
        """Why, in the words of the table that decided it."""
        return self.said or self.verdict.why

    def to_json(self) -> dict[str, Any]:
        decision = self.verdict.decision
        return {
            "why": self.why,
            "row": self.verdict.row,
            "action": decision.action.value,
            "mode": None if decision.mode is None else decision.mode.value,
            "inputs": self.observation.to_json(),
            "gates": self.gates.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Decided:
        """A decision the log kept; ValueError when it is not one (written by a version that
        knew other values, or not by Legion)."""
        try:
            row, action, mode = data["row"], data["action"], data["mode"]
            inputs, gates = data["inputs"], data.get("gates") or {}
            if not isinstance(row, int) or isinstance(row, bool):
                raise ValueError("a row that is not a number")
            if not isinstance(inputs, Mapping) or not isinstance(gates, Mapping):
                raise ValueError("inputs that are not an object")
            decision = Decision(Action(action), None if mode is None else Mode(mode))
            verdict = Verdict(decision, row)
            said = data.get("why")
            return cls(
                Observation.from_json(inputs),
                verdict,
                Gates.from_json(gates),
                said[:MAX_WORDS] if isinstance(said, str) else "",
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a decision: {exc}") from None


# What makes two decisions the same one: the row, the action and its worker.
DecisionKey = tuple[int, str, str | None]


def key_of(verdict: Verdict) -> DecisionKey:
    mode = verdict.decision.mode
    return verdict.row, verdict.decision.action.value, None if mode is None else mode.value


def worth_logging(last: DecisionKey | None, verdict: Verdict) -> bool:
    """Whether a pass logs a skip: when the issue's decision changed since the last one
    logged, and not for the first decision about an issue that is not Legion's to work on."""
    if last is None:
        return verdict.row != NOT_LEGIONS_ROW
    return last != key_of(verdict)


@dataclass(frozen=True, slots=True)
class Logged:
    """An entry of the action log that keeps a decision (`legion log --replay`'s input)."""

    entry_id: int
    at: str
    issue: str
    decided: Decided


@dataclass(frozen=True, slots=True)
class Difference:
    """An entry today's table decides otherwise: what it was then, and what it would be now."""

    entry: Logged
    now: Verdict

    def to_json(self) -> dict[str, Any]:
        then = self.entry.decided.verdict
        return {
            "id": self.entry.entry_id,
            "created_at": self.entry.at,
            "issue": self.entry.issue,
            "then": {"row": then.row, **_decision_json(then.decision)},
            "now": {"row": self.now.row, **_decision_json(self.now.decision)},
            "inputs": self.entry.decided.observation.to_json(),
        }


def _decision_json(decision: Decision) -> dict[str, Any]:
    return {
        "action": decision.action.value,
        "mode": None if decision.mode is None else decision.mode.value,
    }


def replay(entries: Iterable[Logged]) -> list[Difference]:
    """The entries today's table decides differently (another action, or another worker)
    from the same inputs, oldest first. A row renumbered alone is not a different decision."""
    differences = []
    for entry in entries:
        now = explain(entry.decided.observation)
        if now.decision != entry.decided.verdict.decision:
            differences.append(Difference(entry, now))
    return differences


def inputs_words(obs: Observation) -> str:
    """What the table was given, in one line a person reads (`legion why`, the web view)."""
    labels = ", ".join(sorted(label.value for label in obs.labels)) or "none"
    pr = f"review {obs.pr_review.value}" if obs.has_pr else "none"
    if not obs.has_pr and obs.pr_review.value == "unknown":
        pr = "not read"
    latest = "none" if obs.latest_mode is None else obs.latest_mode.value
    parts = [
        f"status {obs.status.value}",
        f"labels {labels}",
        f"live worker {'yes' if obs.has_live_worker else 'no'}",
        f"PR {pr}",
        f"checks {obs.checks.value}",
        f"latest worker {latest}",
        f"blocked by {', '.join(obs.open_blockers) or 'nothing'}",
    ]
    if obs.status.value == "Backlog":
        parts.append(f"opted in {'yes' if obs.opted_in else 'no'}")
    if obs.children:
        waiting = f" ({', '.join(obs.open_children)} not Done)" if obs.open_children else ""
        parts.append(f"children {', '.join(obs.children)}{waiting}")
    return "; ".join(parts)
