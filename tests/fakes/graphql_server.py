"""A fake GraphQL API on 127.0.0.1 that *executes* each request against a published schema.

Every document is parsed and validated against the schema exactly as the real service would
(a field that does not exist, a wrong argument type, a missing variable: the same errors), then
executed with graphql-core over fixture data. Resolvers are attached once per schema and find
their fake through `info.context`, so many fakes can share one loaded schema.

Faults are queued per request: an HTTP status with headers and body (429 with a reset, a 500,
malformed JSON), a GraphQL error body (Linear's `RATELIMITED`), or a delay (a timeout). Every
request is recorded with its operation name, variables and the status it got.

REST routes (GitHub has a few calls GraphQL lacks) are plain handlers on (method, path).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from graphql import (
    GraphQLError,
    GraphQLObjectType,
    GraphQLSchema,
    execute,
    parse,
    validate,
)

from tests.fakes.serving import threaded_server

Resolver = Callable[..., Any]
RestHandler = Callable[["GraphQLFake", dict[str, Any], re.Match[str]], tuple[int, Any]]


@dataclass
class Fault:
    """What the next matching request gets instead of an answer."""

    status: int = 200
    body: bytes | None = None  # raw body; None with status 200 means "answer normally"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (past the client's timeout)
    trickle: float = 0.0  # seconds between the body's bytes (a server that never finishes)
    operation: str | None = None  # only requests of this operation name
    errors: list[dict[str, Any]] | None = None  # a GraphQL error response, status 200 or given

    def matches(self, operation: str | None) -> bool:
        return self.operation is None or self.operation == operation


@dataclass
class Recorded:
    operation: str | None
    query: str
    variables: dict[str, Any]
    status: int
    path: str
    method: str = "POST"
    errors: list[str] = field(default_factory=list)


def attach(schema: GraphQLSchema, type_name: str, field_name: str, resolver: Resolver) -> None:
    """Resolve `type_name.field_name` with `resolver(parent, info, **args)`."""
    graphql_type = schema.type_map[type_name]
    assert isinstance(graphql_type, GraphQLObjectType), type_name
    graphql_type.fields[field_name].resolve = resolver


def validation_errors(schema: GraphQLSchema, document: str) -> list[str]:
    """Why `document` is not a valid request to `schema` ([] when it is)."""
    try:
        parsed = parse(document)
    except GraphQLError as exc:
        return [exc.message]
    return [error.message for error in validate(schema, parsed)]


class GraphQLFake:
    """One fake service. Subclasses hold the fixture data and attach the resolvers."""

    name = "fake"
    graphql_path = "/graphql"

    def __init__(self, schema: GraphQLSchema, *, token: str) -> None:
        self.schema = schema
        self.token = token
        self.requests: list[Recorded] = []
        self.faults: deque[Fault] = deque()
        self.rest: list[tuple[str, re.Pattern[str], RestHandler]] = []
        self.lock = threading.RLock()  # resolvers mutate the fixture data under it
        self._server: ThreadingHTTPServer | None = None

    # -- what tests use ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._server is not None, "the fake is not running"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def fail_next(self, *faults: Fault) -> None:
        with self.lock:
            self.faults.extend(faults)

    def operations(self) -> list[str | None]:
        return [r.operation for r in self.requests]

    def route(self, method: str, pattern: str, handler: RestHandler) -> None:
        self.rest.append((method, re.compile(pattern), handler))

    @contextmanager
    def running(self) -> Iterator[GraphQLFake]:
        with threaded_server(_handler_for(self)) as server:
            self._server = server
            try:
                yield self
            finally:
                self._server = None

    # -- what subclasses override --------------------------------------------------------------

    def authorized(self, header: str | None) -> bool:
        return header in (self.token, f"Bearer {self.token}", f"bearer {self.token}")

    def unauthorized(self) -> tuple[int, dict[str, Any]]:
        return 401, {"message": "Bad credentials"}

    def graphql_error_status(self) -> int:
        """The HTTP status of a response with GraphQL errors (Linear: 400; GitHub: 200)."""
        return 200

    # -- serving -------------------------------------------------------------------------------

    def take_fault(self, operation: str | None) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.matches(operation):
                    self.faults.remove(fault)
                    return fault
        return None

    def answer_graphql(self, payload: Any) -> tuple[int, Any, list[str]]:
        if not isinstance(payload, dict) or not isinstance(payload.get("query"), str):
            return 400, {"errors": [{"message": "Must provide query string."}]}, ["no query"]
        variables = payload.get("variables") or {}
        try:
            document = parse(payload["query"])
        except GraphQLError as exc:
            return self.graphql_error_status(), {"errors": [exc.formatted]}, [exc.message]
        problems = validate(self.schema, document)
        if problems:
            body = {"errors": [p.formatted for p in problems]}
            return self.graphql_error_status(), body, [p.message for p in problems]
        with self.lock:
            result = execute(
                self.schema,
                document,
                variable_values=variables,
                operation_name=payload.get("operationName"),
                context_value=self,
            )
        body: dict[str, Any] = {"data": result.data}
        if result.errors:
            body["errors"] = [self.format_error(e) for e in result.errors]
            status = 200 if result.data else self.graphql_error_status()
            return status, body, [e.message for e in result.errors]
        return 200, body, []

    def format_error(self, error: GraphQLError) -> dict[str, Any]:
        formatted = dict(error.formatted)
        original = error.original_error
        if isinstance(original, FakeError):
            if original.extensions:
                formatted["extensions"] = original.extensions
            formatted.update(original.top_level)
        return formatted


@dataclass
class RawAnswer:
    """What a REST handler answers that is not JSON: bytes as they are, with headers (a
    redirect's `Location`, a log's `text/plain`)."""

    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class FakeError(Exception):
    """Raised by a resolver: becomes a GraphQL error with these extensions (Linear's `code`,
    GitHub's `type`: NOT_FOUND ...)."""

    def __init__(
        self,
        message: str,
        extensions: dict[str, Any] | None = None,
        top_level: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.extensions = extensions or {}
        self.top_level = top_level or {}


def _handler_for(fake: GraphQLFake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else each small answer waits ~40 ms for an ACK

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _send(
            self,
            status: int,
            body: bytes,
            headers: dict[str, str] | None = None,
            trickle: float = 0.0,
        ) -> None:
            self.send_response(status)
            merged = {"Content-Type": "application/json"} | (headers or {})
            for key, value in merged.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                if not trickle:
                    self.wfile.write(body)  # unless the client gave up (a timeout test)
                    return
                for at in range(len(body)):
                    self.wfile.write(body[at : at + 1])
                    self.wfile.flush()
                    time.sleep(trickle)

        def _read(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def do_POST(self) -> None:
            self._serve("POST")

        def do_GET(self) -> None:
            self._serve("GET")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def _serve(self, method: str) -> None:
            raw = self._read()
            try:
                payload = json.loads(raw) if raw else {}
            except ValueError:
                payload = None
            path = self.path.split("?", 1)[0]
            is_graphql = method == "POST" and path.rstrip("/").endswith(
                fake.graphql_path.rstrip("/")
            )
            operation = payload.get("operationName") if isinstance(payload, dict) else None
            query = payload.get("query", "") if isinstance(payload, dict) else ""
            variables = payload.get("variables") or {} if isinstance(payload, dict) else {}
            record = Recorded(operation, query, variables, 0, path, method)
            with fake.lock:
                fake.requests.append(record)
            fault = fake.take_fault(operation if is_graphql else f"{method} {path}")
            if fault is not None:
                if fault.delay:
                    time.sleep(fault.delay)
                if fault.body is not None or fault.errors is not None or fault.status != 200:
                    body = fault.body
                    if body is None:
                        body = json.dumps({"data": None, "errors": fault.errors or []}).encode()
                    record.status = fault.status
                    self._send(fault.status, body, fault.headers, fault.trickle)
                    return
            if not fake.authorized(self.headers.get("Authorization")):
                status, answer = fake.unauthorized()
                record.status = status
                self._send(status, json.dumps(answer).encode())
                return
            if is_graphql:
                status, answer, errors = fake.answer_graphql(payload)
                record.errors = errors
            else:
                status, answer = self._rest(method, path, payload)
            record.status = status
            if isinstance(answer, RawAnswer):
                self._send(status, answer.body, answer.headers)
                return
            self._send(status, b"" if answer is None else json.dumps(answer).encode())

        def _rest(self, method: str, path: str, payload: Any) -> tuple[int, Any]:
            for route_method, pattern, handler in fake.rest:
                match = pattern.fullmatch(path)
                if route_method == method and match:
                    with fake.lock:
                        return handler(fake, payload if isinstance(payload, dict) else {}, match)
            return 404, {"message": "Not Found"}

    return Handler
