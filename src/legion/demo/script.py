"""What a scripted model server answers: the script model (`Script` of `Scenario`s, each a
list of turns of `TextBlock`s, tool blocks and `PauseBlock`s) and its JSON form, and the small
helpers an answer is built with (ids, a token estimate, a stream's chunks, an example value for a
structured-output schema). Shared by every scripted server (`legion.demo.scripted`).
"""

from __future__ import annotations

import itertools
import json
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Self, TypeVar

JSON = dict[str, Any]

FALLBACK_TEXT = "(fake model: no scripted turn left)"
SIDE_TEXT = "ok"

T = TypeVar("T")  # a server's tool-call block
S = TypeVar("S", bound="Scenario[Any]")  # a server's Scenario class

# --------------------------------------------------------------------------------------------
# Script model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextBlock:
    text: str


@dataclass(frozen=True)
class PauseBlock:
    """Not content: the server waits `seconds` at this point of the stream (busy UI in tests)."""

    seconds: float


def text(value: str) -> TextBlock:
    return TextBlock(value)


def pause(seconds: float) -> PauseBlock:
    return PauseBlock(seconds)


@dataclass
class Scenario(Generic[T]):
    """Turns to play when the latest human prompt matches `match`.

    `match` is a substring (case-sensitive) unless `regex` is true, in which case it is searched
    with `re.search` (pass flags inline, e.g. ``(?i)``).
    """

    match: str
    turns: Sequence[Sequence[TextBlock | T | PauseBlock]]
    name: str = ""
    regex: bool = False
    # Also matched against the text of a user message that holds tool results (a prompt the
    # CLI merged into the result's message): see the Anthropic server's `_prompt_and_turn`.
    anywhere: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            self.name = self.match
        self._pattern = re.compile(self.match) if self.regex else None

    def matches(self, prompt: str) -> bool:
        if self._pattern is not None:
            return self._pattern.search(prompt) is not None
        return self.match in prompt


@dataclass
class Script(Generic[T, S]):
    """The scenarios of a server; a subclass names its `Scenario` class (`scenario_type`, which
    `from_json` builds) and its tool block's JSON codec (`tool_from_json`, `tool_to_json`)."""

    scenarios: list[S] = field(default_factory=list)
    fallback_text: str = FALLBACK_TEXT
    side_text: str = SIDE_TEXT

    scenario_type: ClassVar[Callable[..., Any]] = Scenario

    def find(self, prompt: str) -> S | None:
        for scenario in self.scenarios:
            if scenario.matches(prompt):
                return scenario
        return None

    def find_anywhere(self, text: str) -> S | None:
        """The first scenario matched anywhere (`Scenario.anywhere`) that `text` matches."""
        for scenario in self.scenarios:
            if scenario.anywhere and scenario.matches(text):
                return scenario
        return None

    # ---- the tool block's JSON form (a subclass's) ----------------------------------------

    @classmethod
    def tool_from_json(cls, kind: Any, raw: Mapping[str, Any]) -> T | None:
        """The tool block a JSON block of type `kind` stands for, or None if it is none."""
        return None

    @classmethod
    def tool_to_json(cls, block: T) -> JSON:
        raise NotImplementedError

    # ---- JSON form ------------------------------------------------------------------------
    # {"scenarios": [{"name": "hi", "match": "say hi", "regex": false,
    #                 "turns": [[{"type": "text", "text": "hi"}],
    #                           [<a tool block, see the subclass>]]}],
    #  "fallback_text": "...", "side_text": "..."}

    @classmethod
    def block_from_json(cls, raw: Mapping[str, Any]) -> TextBlock | T | PauseBlock:
        kind = raw.get("type")
        if kind == "text":
            return TextBlock(str(raw["text"]))
        if kind == "pause":
            return PauseBlock(float(raw["seconds"]))
        tool = cls.tool_from_json(kind, raw)
        if tool is None:
            raise ValueError(f"unknown block type in script: {kind!r}")
        return tool

    @classmethod
    def block_to_json(cls, block: TextBlock | T | PauseBlock) -> JSON:
        if isinstance(block, TextBlock):
            return {"type": "text", "text": block.text}
        if isinstance(block, PauseBlock):
            return {"type": "pause", "seconds": block.seconds}
        return cls.tool_to_json(block)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        scenarios = []
        for raw in data.get("scenarios", []):
            turns = [[cls.block_from_json(b) for b in turn] for turn in raw.get("turns", [])]
            scenarios.append(
                cls.scenario_type(
                    match=str(raw["match"]),
                    turns=turns,
                    name=str(raw.get("name", "")),
                    regex=bool(raw.get("regex", False)),
                    anywhere=bool(raw.get("anywhere", False)),
                )
            )
        return cls(
            scenarios=scenarios,
            fallback_text=str(data.get("fallback_text", FALLBACK_TEXT)),
            side_text=str(data.get("side_text", SIDE_TEXT)),
        )

    @classmethod
    def load(cls, path: str | Path) -> Self:
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))

    def to_json(self) -> JSON:
        return {
            "scenarios": [
                {
                    "name": s.name,
                    "match": s.match,
                    "regex": s.regex,
                    "anywhere": s.anywhere,
                    "turns": [[self.block_to_json(b) for b in turn] for turn in s.turns],
                }
                for s in self.scenarios
            ],
            "fallback_text": self.fallback_text,
            "side_text": self.side_text,
        }

    def dump(self, path: str | Path) -> Path:
        out = Path(path)
        out.write_text(json.dumps(self.to_json(), indent=2), encoding="utf-8")
        return out


# --------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------


def example_for_schema(schema: Mapping[str, Any], text_value: str = SIDE_TEXT) -> Any:
    """A small value that satisfies a (simple) JSON schema, for structured-output requests."""
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for combinator in ("anyOf", "oneOf", "allOf"):
        if schema.get(combinator):
            return example_for_schema(schema[combinator][0], text_value)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {name: example_for_schema(props.get(name) or {}, text_value) for name in props}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return text_value


_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}_fake{next(_ids):04d}{uuid.uuid4().hex[:16]}"


def estimate_tokens(body: Any) -> int:
    return max(1, len(json.dumps(body, ensure_ascii=False)) // 4)


def chunks(value: str, size: int) -> Iterator[str]:
    for start in range(0, len(value), size):
        yield value[start : start + size]
