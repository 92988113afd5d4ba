"""One GraphQL-over-HTTP client for every real backend (Linear, GitHub), over httpx.

It turns every failure into a `BackendError` of the kind the reconciler acts on, waits out a
short rate limit the server announced, retries transient failures a few times with backoff,
and never lets a secret into a message: errors name the backend and the operation, never the
variables or the headers.

Documents are registered by name (`document()`), so the contract tests can validate every
document the project can send against the published schema, and a request names its
operation in the server's logs and in ours.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from legion.errors import BackendError, BackendErrorKind

if TYPE_CHECKING:
    import httpx

# backend: operation name: document. Filled at import by each integration's documents module.
DOCUMENTS: dict[str, dict[str, str]] = {}

DEFAULT_TIMEOUT_S = 20.0  # for each wait on the server (a connection, the next bytes)
# An answer is read whole within this long and up to this size, however the server sends it: a
# server that trickles bytes, or sends without end, holds no step of the daemon.
ANSWER_DEADLINE_S = 60.0
MAX_ANSWER_BYTES = 32 * 1024 * 1024
MAX_WAIT_S = 30.0  # a rate limit that resets sooner is waited out; a later one is reported
TRANSIENT_RETRIES = 2
MAX_REDIRECTS = 3  # a download's, each followed without the credential
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True)
class Document:
    backend: str
    name: str  # the operation's name, as written in the text
    text: str

    @property
    def is_mutation(self) -> bool:
        return self.text.lstrip().startswith("mutation")


def document(backend: str, text: str) -> Document:
    """Register a document (one named operation) for `backend`."""
    from re import search

    match = search(r"\b(?:query|mutation)\s+([A-Za-z_][A-Za-z0-9_]*)", text)
    if match is None:
        raise ValueError("a Legion GraphQL document must name its operation")
    name = match.group(1)
    DOCUMENTS.setdefault(backend, {})[name] = text
    return Document(backend, name, text)


@dataclass
class GraphQLClient:
    """Requests to one endpoint with one credential. `classify` maps a GraphQL error (its
    `extensions` and message) to a kind, per backend; `headers` hold the credential and are
    never logged or shown."""

    backend: str
    url: str
    headers: Mapping[str, str]
    classify: Callable[[Mapping[str, Any]], BackendErrorKind | None] = lambda error: None
    timeout: float = DEFAULT_TIMEOUT_S
    answer_deadline: float = ANSWER_DEADLINE_S
    max_answer_bytes: int = MAX_ANSWER_BYTES
    max_wait: float = MAX_WAIT_S
    transport: httpx.BaseTransport | None = None
    sleep: Callable[[float], None] = time.sleep
    requests_made: int = 0
    _client: httpx.Client | None = field(default=None, repr=False)

    def execute(
        self,
        doc: Document,
        variables: Mapping[str, Any] | None = None,
        *,
        idempotent: bool | None = None,
    ) -> dict[str, Any]:
        """The `data` of the answer; a BackendError for anything else.

        A query is retried after a transient failure; a mutation only when the request never
        reached the server, unless the caller knows that doing it twice does no harm
        (`idempotent`): a lost answer must not become a second comment or a second issue."""
        payload = {"query": doc.text, "operationName": doc.name, "variables": dict(variables or {})}
        safe = not doc.is_mutation if idempotent is None else idempotent
        data: dict[str, Any] = self._retrying(
            lambda: self._once("POST", self.url, doc.name, payload, True), idempotent=safe
        )
        return data

    def execute_partial(
        self, doc: Document, variables: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], list[Mapping[str, Any]]]:
        """The `data` of an answer that may lack some parts, and the errors that say which.
        Only NOT_FOUND errors beside data are tolerated (one item of a batch vanished, the
        others are answered); any other error raises as in `execute`."""
        payload = {"query": doc.text, "operationName": doc.name, "variables": dict(variables or {})}
        answer: tuple[dict[str, Any], list[Mapping[str, Any]]] = self._retrying(
            lambda: self._once("POST", self.url, doc.name, payload, True, partial=True)
        )
        return answer

    def request_json(
        self,
        method: str,
        url: str,
        operation: str,
        payload: Mapping[str, Any] | None = None,
        *,
        graphql: bool = False,
    ) -> Any:
        """One REST call, retried as its failure and its method allow (a POST that may have
        reached the server is not sent again)."""
        safe = method.upper() in ("GET", "HEAD", "PUT", "DELETE")
        return self._retrying(
            lambda: self._once(method, url, operation, payload, graphql), idempotent=safe
        )

    def download_tail(self, url: str, operation: str, *, keep: int) -> tuple[bytes, bool]:
        """The last `keep` bytes of what a GET of `url` answers, and whether more came before
        them. The credential goes to `url` alone: a redirect (GitHub answers a log's URL with
        one to a signed URL on a storage host) is followed with no credential header, to
        https only (or to the scheme of `url`, a local server's http), at most
        `MAX_REDIRECTS` times; the storage host is asked for the end only (a `Range`), and
        an answer of the whole is read within the answer's deadline, its end kept."""
        answer: tuple[bytes, bool] = self._retrying(lambda: self._tail_once(url, operation, keep))
        return answer

    def _unreachable(self, exc: httpx.HTTPError, host: str, operation: str) -> BackendError:
        """The transient failure a request that got no answer from `host` is."""
        import httpx

        if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
            return self._error(
                BackendErrorKind.TRANSIENT, f"no answer within {self.timeout:g} s", operation
            )
        error = self._error(
            BackendErrorKind.TRANSIENT, f"cannot reach {host}: {type(exc).__name__}", operation
        )
        if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
            error.delivered = False  # never sent: safe to send again, whatever it does
        return error

    def _tail_once(self, url: str, operation: str, keep: int) -> tuple[bytes, bool]:
        from urllib.parse import urljoin, urlsplit

        import httpx

        started = time.monotonic()
        target, credential = url, True
        allowed = {"https", urlsplit(url).scheme}
        for _hop in range(MAX_REDIRECTS + 1):
            self.requests_made += 1
            bare = None if credential else self._bare_http()
            headers = {} if credential else {"Range": f"bytes=-{keep}"}
            try:
                with (bare or self._http()).stream("GET", target, headers=headers) as response:
                    location = response.headers.get("location")
                    if response.status_code in _REDIRECTS and location:
                        target = urljoin(target, location)
                        if urlsplit(target).scheme not in allowed:
                            raise self._error(
                                BackendErrorKind.INVALID,
                                f"redirected to a {urlsplit(target).scheme or 'relative'} URL",
                                operation,
                            )
                        credential = False  # never past the first host
                        continue
                    failure = self._download_failure(response, operation, credential)
                    if failure is not None:
                        raise failure
                    return self._kept_end(response, operation, started, keep)
            except httpx.HTTPError as exc:
                raise self._unreachable(exc, str(urlsplit(target).hostname), operation) from None
            finally:
                if bare is not None:
                    bare.close()
        raise self._error(
            BackendErrorKind.INVALID, f"more than {MAX_REDIRECTS} redirects", operation
        )

    def _download_failure(
        self, response: httpx.Response, operation: str, credential: bool
    ) -> BackendError | None:
        status = response.status_code
        if status in (200, 206):
            return None
        if credential and (status == 429 or (status == 403 and _rate_limit_exhausted(response))):
            return self._error(
                BackendErrorKind.RATE_LIMITED,
                "rate limited",
                operation,
                retry_after=reset_after(response.headers),
            )
        if credential and status in (401, 403):
            return self._error(
                BackendErrorKind.AUTH, f"the credential was refused (HTTP {status})", operation
            )
        if status in (404, 410):
            return self._error(BackendErrorKind.NOT_FOUND, f"not found (HTTP {status})", operation)
        if status >= 500 or not credential:
            # The storage host's refusal (an expired signed URL): asking again gets a new one.
            return self._error(
                BackendErrorKind.TRANSIENT, f"could not be read (HTTP {status})", operation
            )
        return self._error(BackendErrorKind.INVALID, f"refused (HTTP {status})", operation)

    def _kept_end(
        self, response: httpx.Response, operation: str, started: float, keep: int
    ) -> tuple[bytes, bool]:
        """The last `keep` bytes of the answer, read until `answer_deadline`; and whether
        there was more before them (a partial answer, 206, is the end of more)."""
        kept = bytearray()
        more = response.status_code == 206 and not response.headers.get(
            "content-range", ""
        ).startswith("bytes 0-")
        for chunk in response.iter_bytes():
            if time.monotonic() - started > self.answer_deadline:
                raise self._unbounded(
                    f"no whole answer within {self.answer_deadline:g} s", operation
                )
            kept += chunk
            if len(kept) > keep:
                del kept[: len(kept) - keep]
                more = True
        return bytes(kept), more

    def _bare_http(self) -> httpx.Client:
        """A client with no credential header, for wherever a redirect leads."""
        import httpx

        return httpx.Client(
            timeout=self.timeout,
            transport=self.transport,
            headers={"User-Agent": "legion"},
            trust_env=False,
        )

    def _retrying(self, call: Callable[[], Any], *, idempotent: bool = True) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                return call()
            except _Unbounded:
                raise  # asking again would hold the caller as long again
            except BackendError as exc:
                wait = self._wait_before_retry(exc, attempt)
                if wait is None or (not idempotent and exc.delivered and not _refused(exc)):
                    raise
                self.sleep(wait)

    def _wait_before_retry(self, exc: BackendError, attempt: int) -> float | None:
        if exc.kind is BackendErrorKind.RATE_LIMITED:
            reset = exc.retry_after if exc.retry_after is not None else 1.0
            return reset if attempt == 1 and reset <= self.max_wait else None
        if exc.kind is BackendErrorKind.TRANSIENT and attempt <= TRANSIENT_RETRIES:
            backoff: float = min(8.0, 0.5 * 2.0 ** (attempt - 1))
            return backoff * (0.5 + random.random() / 2)
        return None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _http(self) -> httpx.Client:
        if self._client is None:
            import httpx

            self._client = httpx.Client(
                timeout=self.timeout,
                transport=self.transport,
                headers={"User-Agent": "legion", **self.headers},
                trust_env=False,  # a proxy variable must not reroute credentials
            )
        return self._client

    def _error(
        self, kind: BackendErrorKind, message: str, operation: str, retry_after: float | None = None
    ) -> BackendError:
        return BackendError(
            self.backend, kind, message, operation=operation, retry_after=retry_after
        )

    def _once(
        self,
        method: str,
        url: str,
        operation: str,
        payload: Mapping[str, Any] | None,
        graphql: bool,
        *,
        partial: bool = False,
    ) -> Any:
        import httpx

        self.requests_made += 1
        started = time.monotonic()
        try:
            with self._http().stream(
                method, url, json=None if payload is None else dict(payload)
            ) as response:
                content = self._bounded(response, operation, started)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc, self._host(), operation) from None
        status = response.status_code
        if status == 429 or (status == 403 and _rate_limit_exhausted(response)):
            raise self._error(
                BackendErrorKind.RATE_LIMITED,
                "rate limited",
                operation,
                retry_after=reset_after(response.headers),
            )
        if status in (401, 403):
            kind = BackendErrorKind.AUTH
            raise self._error(kind, f"the credential was refused (HTTP {status})", operation)
        if status == 404 and not graphql:
            raise self._error(BackendErrorKind.NOT_FOUND, "not found (HTTP 404)", operation)
        if status >= 500:
            raise self._error(
                BackendErrorKind.TRANSIENT, f"server error (HTTP {status})", operation
            )
        try:
            body = json.loads(content) if content else None
        except (ValueError, json.JSONDecodeError):
            raise self._error(
                BackendErrorKind.TRANSIENT, f"malformed answer (HTTP {status}, not JSON)", operation
            ) from None
        if not graphql:
            if status >= 400:
                raise self._error(
                    BackendErrorKind.INVALID,
                    f"refused (HTTP {status}): {_message(body)}",
                    operation,
                )
            return body
        data, missing = self._graphql_data(body, status, operation, response.headers, partial)
        return (data, missing) if partial else data

    def _bounded(self, response: httpx.Response, operation: str, started: float) -> bytes:
        """The answer's body, read up to `max_answer_bytes` and until `answer_deadline` from
        the request's start; past either, an `_Unbounded` error, and the rest is not read."""
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_answer_bytes:
            raise self._unbounded(f"an answer of {declared} bytes", operation)
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self.max_answer_bytes:
                raise self._unbounded(f"an answer over {self.max_answer_bytes} bytes", operation)
            if time.monotonic() - started > self.answer_deadline:
                raise self._unbounded(
                    f"no whole answer within {self.answer_deadline:g} s", operation
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _unbounded(self, what: str, operation: str) -> _Unbounded:
        return _Unbounded(
            self.backend, BackendErrorKind.TRANSIENT, f"{what}: not read", operation=operation
        )

    def _graphql_data(
        self,
        body: Any,
        status: int,
        operation: str,
        headers: Mapping[str, str],
        partial: bool = False,
    ) -> tuple[dict[str, Any], list[Mapping[str, Any]]]:
        if not isinstance(body, dict):
            raise self._error(BackendErrorKind.TRANSIENT, "malformed answer (no object)", operation)
        errors = body.get("errors") or []
        if errors:
            listed = [e if isinstance(e, Mapping) else {"message": str(e)} for e in errors]
            if (
                partial
                and status < 400
                and isinstance(body.get("data"), dict)
                and all(self.classify(e) is BackendErrorKind.NOT_FOUND for e in listed)
            ):
                return body["data"], listed
            first = listed[0]
            kind = self.classify(first) or (
                BackendErrorKind.INVALID if status < 500 else BackendErrorKind.TRANSIENT
            )
            retry_after = reset_after(headers) if kind is BackendErrorKind.RATE_LIMITED else None
            raise self._error(kind, _message(first), operation, retry_after=retry_after)
        data = body.get("data")
        if status >= 400 or not isinstance(data, dict):
            raise self._error(
                BackendErrorKind.INVALID, f"refused (HTTP {status}): {_message(body)}", operation
            )
        return data, []

    def _host(self) -> str:
        from urllib.parse import urlsplit

        return urlsplit(self.url).netloc or self.url


class _Unbounded(BackendError):
    """An answer past the client's bounds (`GraphQLClient._bounded`): not asked again."""


def next_cursor(connection: Mapping[str, Any]) -> str | None:
    """The cursor of a connection's next page (`pageInfo { hasNextPage endCursor }`), or None
    on its last page."""
    info = connection.get("pageInfo") or {}
    cursor = info.get("endCursor")
    return str(cursor) if info.get("hasNextPage") and cursor else None


def _refused(exc: BackendError) -> bool:
    """The server turned the request away before doing anything (a rate limit)."""
    return exc.kind is BackendErrorKind.RATE_LIMITED


def _rate_limit_exhausted(response: httpx.Response) -> bool:
    # GitHub answers a spent primary limit with 403 and x-ratelimit-remaining: 0.
    return response.headers.get("x-ratelimit-remaining") == "0" or "retry-after" in response.headers


def reset_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds until the rate limit resets, from whichever header the server sent:
    `Retry-After` (seconds or an HTTP date), GitHub's `x-ratelimit-reset` (epoch seconds),
    Linear's `X-RateLimit-Requests-Reset` (epoch milliseconds)."""
    now = time.time() if now is None else now
    lower = {key.lower(): value for key, value in headers.items()}
    retry = lower.get("retry-after")
    if retry:
        if retry.strip().isdigit():
            return float(retry)
        try:
            return max(0.0, email.utils.parsedate_to_datetime(retry).timestamp() - now)
        except (TypeError, ValueError):
            pass
    for name, scale in (
        ("x-ratelimit-requests-reset", 1000.0),
        ("x-ratelimit-complexity-reset", 1000.0),
        ("x-ratelimit-reset", 1.0),
    ):
        value = lower.get(name)
        if value and value.strip().isdigit():
            epoch = float(value) / scale
            if scale == 1.0 and epoch > 1e11:  # milliseconds after all
                epoch /= 1000.0
            return max(0.0, epoch - now)
    return None


def _message(body: Any) -> str:
    """A server's own words, shortened to one line (never a request's variables)."""
    text = body.get("message") if isinstance(body, Mapping) else None
    if not isinstance(text, str):
        text = "no message"
    return " ".join(text.split())[:200]
