"""What the scripted model servers share (`legion.demo.model_server` for the Claude Code CLI,
`legion.demo.responses_server` for the Codex CLI, `legion.demo.gemini_server` for Gemini's).

Each server describes what the "model" answers as a `Script` of `Scenario`s
(`legion.demo.script`, generic in the tool-call block `T`; a server's `Script` subclass supplies
its codec). Here: `RecordedRequest`, what is known of a request; `ScriptedServer`, which answers
from its script, records requests, waits for them and runs the HTTP server on 127.0.0.1 (its
handler's plumbing is `legion.demo.scripted_http`'s); and `main`, the standalone process.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar, cast

from legion.demo.script import (
    JSON,
    PauseBlock,
    S,
    Script,
    T,
    TextBlock,
    estimate_tokens,
    example_for_schema,
)
from legion.demo.scripted_http import ScriptedHandler, ScriptedHTTPServer

K = TypeVar("K", bound=str)  # a server's request kinds (a Literal of strings)
R = TypeVar("R", bound="RecordedRequest[Any]")  # a server's RecordedRequest class

# --------------------------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------------------------


@dataclass
class RecordedRequest(Generic[K]):
    seq: int
    time: float
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    kind: K
    scenario: str | None = None
    turn: int | None = None
    prompt: str | None = None
    side_reason: str | None = None
    response: Any = None

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    def to_json(self) -> JSON:
        return {
            "seq": self.seq,
            "time": self.time,
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "headers": self.headers,
            "body": self.body,
            "kind": self.kind,
            "scenario": self.scenario,
            "turn": self.turn,
            "prompt": self.prompt,
            "side_reason": self.side_reason,
            "response": self.response,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Self:
        fields: dict[str, Any] = {k: raw.get(k) for k in cls.__dataclass_fields__}
        return cls(**fields)

    @classmethod
    def read_log(cls, path: str | Path) -> list[Self]:
        """Requests recorded by a (standalone) server in its JSONL log."""
        file = Path(path)
        if not file.exists():
            return []
        return [
            cls.from_json(json.loads(line))
            for line in file.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]


# --------------------------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------------------------


class ScriptedServer(Generic[T, S, R]):
    """The scripted server; a context manager that starts it on 127.0.0.1 and stops it.

    A subclass names its handler, its thread, its default model and its `Script` and
    `RecordedRequest` classes; it tells side requests (`_default_side_request`, unless the
    caller passes `side_request`), builds its answers (`_build`), finds the prompt and turn of
    a request (`_prompt_and_turn`) and the JSON schema of a structured-output request
    (`_output_schema`), and says which paths ask for a model turn (`_is_model_path`).
    """

    handler: ClassVar[type[ScriptedHandler]] = ScriptedHandler
    thread_name: ClassVar[str] = "fake-model-server"
    default_model: ClassVar[str] = ""
    script_type: ClassVar[type[Script[Any, Any]]] = Script
    request_type: ClassVar[type[RecordedRequest[Any]]] = RecordedRequest

    def __init__(
        self,
        script: Script[T, S] | Iterable[S] | None = None,
        *,
        port: int = 0,
        log_path: str | Path | None = None,
        model: str | None = None,
        side_request: Callable[[Mapping[str, Any]], str | None] | None = None,
    ) -> None:
        script_type = self.script_type
        self.script: Script[T, S]
        if script is None:
            self.script = script_type()
        elif isinstance(script, script_type):
            self.script = script
        else:
            self.script = script_type(list(cast("Iterable[S]", script)))
        self.port = port
        self.log_path = Path(log_path) if log_path else None
        self.model = model
        self.side_request = side_request or self._default_side_request
        self.requests: list[R] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._seq = itertools.count(1)
        self._httpd: ScriptedHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._refusals: list[tuple[int, dict[str, str]]] = []

    # ---- what a subclass supplies ---------------------------------------------------------

    def _default_side_request(self, body: Mapping[str, Any]) -> str | None:
        """Why a request is a side request of the CLI (`side_request`'s default), or None."""
        return None

    def _build(
        self, model: str, blocks: Sequence[TextBlock | T | PauseBlock], input_tokens: int
    ) -> JSON:
        """The complete answer for a turn (pauses under the private key `_pauses`)."""
        raise NotImplementedError

    def _prompt_and_turn(self, body: Mapping[str, Any]) -> tuple[str, int] | None:
        """The latest human prompt of a request and the number of its turn to answer with."""
        raise NotImplementedError

    def _output_schema(self, body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The JSON schema the answer must follow (structured output), or None."""
        return None

    def _is_model_path(self, path: str) -> bool:
        raise NotImplementedError

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> Self:
        self._httpd = ScriptedHTTPServer(("127.0.0.1", self.port), self, self.handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=self.thread_name,
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---- scripting ------------------------------------------------------------------------

    def add_scenario(
        self,
        match: str,
        turns: Sequence[Sequence[TextBlock | T | PauseBlock]],
        *,
        name: str = "",
        regex: bool = False,
    ) -> S:
        scenario: S = self.script.scenario_type(match=match, turns=turns, name=name, regex=regex)
        with self._lock:
            self.script.scenarios.append(scenario)
        return scenario

    def refuse_next(
        self, status: int, count: int = 1, headers: Mapping[str, str] | None = None
    ) -> None:
        """Answer the next `count` model requests with `status` (401: the key refused, 429:
        rate limited, 529: overloaded) and `headers` (`retry-after`, a provider's reset)
        instead of a turn."""
        with self._lock:
            self._refusals += [(status, dict(headers or {}))] * count

    def take_refusal(self) -> tuple[int, dict[str, str]] | None:
        with self._lock:
            return self._refusals.pop(0) if self._refusals else None

    def answer(self, body: Mapping[str, Any]) -> tuple[JSON, dict[str, Any]]:
        """The answer to a request for a model turn, and what to record about it."""
        model = self.model or str(body.get("model") or self.default_model)
        tokens = estimate_tokens(body)
        side = self.side_request(body)
        if side is not None:
            return (
                self._build(model, [TextBlock(self._side_text(body))], tokens),
                {"kind": "side", "side_reason": side},
            )
        found = self._prompt_and_turn(body)
        if found is None:
            return self._build(model, [TextBlock(self.script.fallback_text)], tokens), {
                "kind": "fallback"
            }
        prompt, turn = found
        with self._lock:
            scenario = self.script.find(prompt)
        if scenario is None or turn >= len(scenario.turns):
            return self._build(model, [TextBlock(self.script.fallback_text)], tokens), {
                "kind": "fallback",
                "scenario": scenario.name if scenario else None,
                "turn": turn,
                "prompt": prompt,
            }
        return self._build(model, scenario.turns[turn], tokens), {
            "kind": "scripted",
            "scenario": scenario.name,
            "turn": turn,
            "prompt": prompt,
        }

    def _side_text(self, body: Mapping[str, Any]) -> str:
        schema = self._output_schema(body)
        if schema is not None:  # e.g. session titles: {"title": ...}
            return json.dumps(example_for_schema(schema, self.script.side_text))
        return self.script.side_text

    # ---- recording ------------------------------------------------------------------------

    def record(self, **fields: Any) -> R:
        with self._cond:
            request = cast(R, self.request_type(seq=next(self._seq), time=time.time(), **fields))
            self.requests.append(request)
            self._cond.notify_all()
        self.log_to_file(request)
        return request

    def log_to_file(self, request: R) -> None:
        if self.log_path is None:
            return
        line = json.dumps(request.to_json(), ensure_ascii=False)
        with self._lock, self.log_path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")

    def snapshot(self) -> list[R]:
        with self._lock:
            return list(self.requests)

    def message_requests(self, kind: str | None = None) -> list[R]:
        """Requests for a model turn (of `kind`, if given)."""
        return [
            r
            for r in self.snapshot()
            if self._is_model_path(r.path) and (kind is None or r.kind == kind)
        ]

    def requests_for_scenario(self, name: str) -> list[R]:
        return [r for r in self.snapshot() if r.scenario == name]

    def last_request(self, scenario: str | None = None) -> R | None:
        for request in self.snapshot()[::-1]:
            if not self._is_model_path(request.path):
                continue
            if scenario is None and request.kind in ("scripted", "fallback"):
                return request
            if scenario is not None and request.scenario == scenario:
                return request
        return None

    def outbound_attempts(self) -> list[R]:
        """Requests that reached the server as a proxy (the CLI tried to reach another host)."""
        return [r for r in self.snapshot() if r.kind == "outbound"]

    def unknown_requests(self) -> list[R]:
        """Requests to paths the server does not serve."""
        return [r for r in self.snapshot() if r.kind == "not_found"]

    def wait_for(self, predicate: Callable[[R], bool], timeout: float = 30.0) -> R:
        """Block until a recorded request satisfies `predicate`; return it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for request in self.requests:
                    if predicate(request):
                        return request
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    seen = [(r.path, r.kind, r.scenario, r.turn) for r in self.requests]
                    raise TimeoutError(f"no matching request within {timeout}s; saw {seen}")
                self._cond.wait(remaining)

    def wait_for_turn(self, scenario: str, turn: int, timeout: float = 60.0) -> R:
        """Wait until the request that asks for turn `turn` of `scenario` arrived."""
        return self.wait_for(lambda r: r.scenario == scenario and r.turn == turn, timeout)


# --------------------------------------------------------------------------------------------
# Standalone process
# --------------------------------------------------------------------------------------------


def main(
    argv: Sequence[str] | None,
    doc: str | None,
    script_type: type[Script[Any, Any]],
    server: Callable[..., ScriptedServer[Any, Any, Any]],
) -> int:
    """Serve `script_type.load(--script)` with `server(script, port=, log_path=)` until a
    SIGTERM or SIGINT; `doc` is the module's docstring (its first line describes it)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--script", type=Path, help="JSON script (see Script.from_json)")
    parser.add_argument("--log", type=Path, help="append every request as JSONL here")
    parser.add_argument("--port-file", type=Path, help="write the bound port here once listening")
    args = parser.parse_args(argv)

    script = script_type.load(args.script) if args.script else script_type()
    running = server(script, port=args.port, log_path=args.log).start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.port_file:
        tmp = args.port_file.with_suffix(".tmp")
        tmp.write_text(str(running.port), encoding="utf-8")
        tmp.replace(args.port_file)
    print(f"listening on {running.base_url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    running.stop()
    return 0
