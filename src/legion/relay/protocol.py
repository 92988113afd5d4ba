"""The relay's wire format: one request and one answer per connection, each one JSON line.

Request:  {"version": 1, "capability": TOKEN, "op": "tracker.add_comment", "args": {...}}
Answer:   {"result": VALUE}
      or  {"error": {"type": "NotFoundError", "module": "legion.errors", "message": "...",
                     "kind": "auth" | ... | null,
                     "classes": [["legion.errors", "NotFoundError"], ...],  (a LegionError)
                     "backend": ..., "operation": ..., "retry_after": ...}}  (a BackendError)

Values are JSON with tags for what JSON lacks, so that what the client gets back is equal to
what the server's backend returned (an exact round trip): every JSON object on the wire is a
tag, `{"$tuple": [...]}`, `{"$frozenset": [...]}`, `{"$dict": {...}}` (string keys),
`{"$enum": NAME, "value": ...}` or `{"$type": NAME, "fields": {...}}`, and only the types
named in `DATACLASSES` and `ENUMS` are ever built from a tag. Lists, strings, numbers, booleans
and null are themselves.

An error comes back as the same `LegionError` subclass with the same message (and, for a
`BackendError`, the same kind, operation and retry time), so a command's exit code and its one
line on stderr are what they would be without the relay. The class is the first of `classes`
(its own, then its bases) that a `legion` module already loaded in the client defines: nothing
is imported because an answer names it, and the errors callers tell apart (`legion.errors`) are
always loaded. It is rebuilt without calling its constructor (its message is complete already).
Any other exception the server met is rebuilt as the built-in exception of that name when there
is one (so the CLI reports it as the internal error it is), else as a RuntimeError; the
traceback stays in the server.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import sys
from enum import Enum
from typing import Any

from legion.bus.model import (
    Agent,
    AgentRole,
    AgentStatus,
    Channel,
    Message,
    MessageKind,
    Posted,
    Task,
    TaskState,
)
from legion.core.model import ChecksState, Status
from legion.core.usage import Usage
from legion.errors import BackendError, BackendErrorKind, LegionError, ProtocolError
from legion.forges.base import Check, CheckLog, PrChecks, PrState, PullRequest, Review
from legion.trackers.base import Comment, Issue

VERSION = 1
# A request or answer longer than this is refused: a comment or PR body is far shorter.
MAX_LINE_BYTES = 16 * 1024 * 1024

DATACLASSES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        *(Issue, Comment, PullRequest, Review, Check, PrChecks, CheckLog),
        *(Agent, Channel, Message, Posted, Task, Usage),
    )
}
ENUMS: dict[str, type[Enum]] = {
    cls.__name__: cls
    for cls in (Status, PrState, ChecksState, AgentRole, AgentStatus, MessageKind, TaskState)
}


# -- values ----------------------------------------------------------------------------------------


def encode(value: Any) -> Any:
    """`value` as JSON-ready data, tagged so `decode` gives back an equal value."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Enum):
        name = type(value).__name__
        if ENUMS.get(name) is not type(value):
            raise TypeError(f"the relay does not carry {name}")
        return {"$enum": name, "value": encode(value.value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if DATACLASSES.get(name) is not type(value):
            raise TypeError(f"the relay does not carry {name}")
        fields = {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"$type": name, "fields": fields}
    if isinstance(value, list):
        return [encode(item) for item in value]
    if isinstance(value, tuple):
        return {"$tuple": [encode(item) for item in value]}
    if isinstance(value, frozenset | set):
        items = sorted(value) if all(isinstance(i, str) for i in value) else list(value)
        return {"$frozenset": [encode(item) for item in items]}
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise TypeError("the relay carries only mappings with string keys")
        return {"$dict": {key: encode(item) for key, item in value.items()}}
    raise TypeError(f"the relay does not carry {type(value).__name__}")


def decode(data: Any) -> Any:
    """The value `encode` made `data` from. Raises ProtocolError on anything else."""
    if data is None or isinstance(data, bool | int | float | str):
        return data
    if isinstance(data, list):
        return [decode(item) for item in data]
    if not isinstance(data, dict) or not data:
        raise ProtocolError(f"unreadable value of type {type(data).__name__}")
    if set(data) == {"$tuple"}:
        return tuple(decode(item) for item in _list(data["$tuple"]))
    if set(data) == {"$frozenset"}:
        return frozenset(decode(item) for item in _list(data["$frozenset"]))
    if set(data) == {"$dict"}:
        mapping = data["$dict"]
        if not isinstance(mapping, dict):
            raise ProtocolError("a $dict holds an object")
        return {key: decode(item) for key, item in mapping.items()}
    if set(data) == {"$enum", "value"}:
        enum = ENUMS.get(data["$enum"]) if isinstance(data["$enum"], str) else None
        if enum is None:
            raise ProtocolError(f"unknown enum {data['$enum']!r}")
        try:
            return enum(decode(data["value"]))
        except ValueError:
            raise ProtocolError(f"{enum.__name__} has no value {data['value']!r}") from None
    if set(data) == {"$type", "fields"}:
        cls = DATACLASSES.get(data["$type"]) if isinstance(data["$type"], str) else None
        if cls is None:
            raise ProtocolError(f"unknown type {data['$type']!r}")
        fields = data["fields"]
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(fields, dict) or not set(fields) <= names:
            raise ProtocolError(f"unreadable {cls.__name__}")
        try:
            return cls(**{name: decode(item) for name, item in fields.items()})
        except TypeError:
            raise ProtocolError(f"unreadable {cls.__name__}") from None
    raise ProtocolError(f"unknown tag in {sorted(data)!r}")


def _list(data: Any) -> list[Any]:
    if not isinstance(data, list):
        raise ProtocolError("a tagged sequence holds a list")
    return data


# -- lines ---------------------------------------------------------------------------------------


def dump_line(message: dict[str, Any]) -> bytes:
    """One message as one line. ASCII only: a lone surrogate (from an argument that was not
    UTF-8) travels escaped and comes back as it was."""
    return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


def load_line(line: bytes) -> dict[str, Any]:
    if not line.endswith(b"\n"):
        raise ProtocolError("the message was cut short (no end of line)")
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"the message is not JSON ({exc})") from None
    if not isinstance(message, dict):
        raise ProtocolError("the message is not a JSON object")
    return message


def request(capability: str, op: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "version": VERSION,
        "capability": capability,
        "op": op,
        "args": {name: encode(value) for name, value in args.items()},
    }


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    capability: str
    op: str
    args: dict[str, Any]  # decoded


def parse_request(message: dict[str, Any]) -> Request:
    if message.get("version") != VERSION:
        raise ProtocolError(
            f"relay protocol version {message.get('version')!r} is not {VERSION}: "
            "the session's Legion and the daemon's differ; restart the session"
        )
    capability, op, args = message.get("capability"), message.get("op"), message.get("args")
    if not isinstance(capability, str) or not isinstance(op, str) or not isinstance(args, dict):
        raise ProtocolError("a request has a capability, an op and args")
    return Request(capability, op, {name: decode(value) for name, value in args.items()})


# -- answers -------------------------------------------------------------------------------------


def result_answer(value: Any) -> dict[str, Any]:
    return {"result": encode(value)}


def error_answer(exc: BaseException) -> dict[str, Any]:
    """The answer that makes the client raise an error like `exc`. Only its type and message
    travel (a traceback stays in the server)."""
    error: dict[str, Any] = {
        "type": type(exc).__name__,
        "module": type(exc).__module__,
        "message": exc.message if isinstance(exc, LegionError) else str(exc),
        "kind": None,
    }
    if isinstance(exc, LegionError):
        # Its classes up to LegionError: the client takes the first it knows.
        error["classes"] = [
            [cls.__module__, cls.__name__]
            for cls in type(exc).__mro__
            if isinstance(cls, type) and issubclass(cls, LegionError)
        ]
    if isinstance(exc, BackendError):
        error |= {
            "kind": exc.kind.value,
            "backend": exc.backend,
            "operation": exc.operation,
            "retry_after": exc.retry_after,
        }
    return {"error": error}


def answer_value(message: dict[str, Any]) -> Any:
    """The result an answer carries, or its error raised."""
    if set(message) == {"result"}:
        return decode(message["result"])
    error = message.get("error")
    if set(message) != {"error"} or not isinstance(error, dict):
        raise ProtocolError("an answer has a result or an error")
    raise rebuild_error(error)


def rebuild_error(error: dict[str, Any]) -> Exception:
    name, message = error.get("type"), error.get("message")
    if not isinstance(name, str) or not isinstance(message, str):
        raise ProtocolError("an error has a type and a message")
    classes = error.get("classes")
    if not isinstance(classes, list):
        builtin = getattr(builtins, name, None)
        if isinstance(builtin, type) and issubclass(builtin, Exception):
            try:
                return builtin(message)
            except TypeError:
                pass
        return RuntimeError(f"{name}: {message}")
    legion_class = _known_class(classes)
    # Built without its constructor: the message is complete already (a BackendError's
    # constructor would add its backend and hint a second time).
    exc = legion_class.__new__(legion_class)
    LegionError.__init__(exc, message)
    if isinstance(exc, BackendError):
        try:
            exc.kind = BackendErrorKind(error.get("kind"))
        except ValueError:
            exc.kind = BackendErrorKind.TRANSIENT
        exc.backend = str(error.get("backend") or "")
        operation, retry_after = error.get("operation"), error.get("retry_after")
        exc.operation = operation if isinstance(operation, str) else None
        exc.retry_after = (
            float(retry_after)
            if isinstance(retry_after, int | float) and not isinstance(retry_after, bool)
            else None
        )
    return exc


def _known_class(classes: list[Any]) -> type[LegionError]:
    """The first of `classes` ([module, name], most derived first) this process has loaded.
    Nothing is imported for it: a module name in an answer never runs code here. The errors a
    caller tells apart (`legion.errors`) are always loaded; the rest differ only by name."""
    for entry in classes:
        if not (isinstance(entry, list) and len(entry) == 2):
            continue
        module_name, name = entry
        if not isinstance(module_name, str) or not isinstance(name, str):
            continue
        module = sys.modules.get(module_name)
        found = getattr(module, name, None) if module_name.startswith("legion") else None
        if isinstance(found, type) and issubclass(found, LegionError):
            return found
    return LegionError
