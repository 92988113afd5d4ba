"""The shared GraphQL client's retry policy, against a fake server: a query is retried after a
transient failure, a mutation only when it never reached the server (or was turned away by a
rate limit), so a lost answer never becomes a second comment."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from legion.errors import BackendError, BackendErrorKind
from legion.trackers.linear import documents as docs
from legion.trackers.linear.client import linear_client
from tests.fakes.graphql_server import Fault
from tests.fakes.linear_server import TOKEN, FakeLinear


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLinear]:
    fake = FakeLinear()
    with fake.running():
        yield fake


@pytest.fixture
def fake(server: FakeLinear) -> FakeLinear:
    server.reset()
    return server


def client_for(url: str, sleeps: list[float]):  # type: ignore[no-untyped-def]
    return linear_client(
        {"LINEAR_API_URL": url, "LINEAR_API_KEY": TOKEN}, timeout=0.5, sleep=sleeps.append
    )


def comment_variables(fake: FakeLinear) -> dict[str, object]:
    issue = fake.add_issue("Q")
    return {"input": {"issueId": fake.issue(issue)["id"], "body": "once"}}


def test_a_query_is_retried_after_a_server_error(fake: FakeLinear) -> None:
    sleeps: list[float] = []
    fake.fail_next(Fault(status=500, body=b"oops"))
    data = client_for(fake.api_url, sleeps).execute(docs.VIEWER)
    assert data["viewer"]["id"]
    assert len(sleeps) == 1 and fake.operations().count("LinearViewer") == 2


def test_a_mutation_that_may_have_happened_is_not_sent_again(fake: FakeLinear) -> None:
    sleeps: list[float] = []
    variables = comment_variables(fake)
    fake.fail_next(Fault(status=502, body=b"bad gateway", operation="LinearCommentCreate"))
    with pytest.raises(BackendError) as info:
        client_for(fake.api_url, sleeps).execute(docs.COMMENT_CREATE, variables)
    assert info.value.kind is BackendErrorKind.TRANSIENT and info.value.delivered
    assert sleeps == [] and fake.operations().count("LinearCommentCreate") == 1


def test_a_mutation_turned_away_by_a_rate_limit_is_sent_again(fake: FakeLinear) -> None:
    sleeps: list[float] = []
    variables = comment_variables(fake)
    fake.fail_next(Fault(status=429, headers={"Retry-After": "1"}, operation="LinearCommentCreate"))
    data = client_for(fake.api_url, sleeps).execute(docs.COMMENT_CREATE, variables)
    assert data["commentCreate"]["success"]
    assert sleeps == [1.0] and fake.operations().count("LinearCommentCreate") == 2


def test_a_mutation_that_never_left_is_sent_again() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleeps: list[float] = []
    with pytest.raises(BackendError) as info:
        client_for(f"http://127.0.0.1:{port}/graphql", sleeps).execute(
            docs.COMMENT_CREATE, {"input": {"issueId": "x", "body": "b"}}
        )
    assert not info.value.delivered and "cannot reach" in str(info.value)
    assert len(sleeps) == 2  # retried twice, then reported


def test_an_answer_past_its_size_or_its_deadline_is_not_read_nor_asked_again(
    fake: FakeLinear,
) -> None:
    """Issue 36: a server (or a man in the middle) that sends a huge answer, or trickles it
    a byte at a time within each read timeout, holds no step of the daemon: the client stops
    at its bounds, says which, and does not ask again."""
    sleeps: list[float] = []
    client = client_for(fake.api_url, sleeps)
    client.max_answer_bytes = 4096
    fake.fail_next(Fault(body=b'{"data": {"x": "' + b"a" * 10_000 + b'"}}'))
    with pytest.raises(BackendError, match="an answer of 10019 bytes: not read"):
        client.execute(docs.VIEWER)
    client.max_answer_bytes = 1 << 20
    client.answer_deadline = 0.5
    fake.fail_next(Fault(body=b'{"data": {"viewer": {"id": "u"}}}' + b" " * 200, trickle=0.02))
    with pytest.raises(BackendError, match=r"no whole answer within 0\.5 s: not read"):
        client.execute(docs.VIEWER)  # the whole answer would take the server 4.6 s
    assert sleeps == [] and fake.operations().count("LinearViewer") == 2
    assert client.execute(docs.VIEWER)["viewer"]["id"]  # a plain answer still reads
