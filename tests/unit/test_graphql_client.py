"""The shared GraphQL client's pure parts: rate-limit resets and document registration."""

from __future__ import annotations

import pytest

from legion.errors import BackendError, BackendErrorKind
from legion.graphql_client import DOCUMENTS, document, reset_after

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after": "Fri, 15 Jan 2027 08:00:10 GMT"}, 10.0),  # an HTTP date
        ({"x-ratelimit-reset": str(int(NOW) + 30)}, 30.0),  # GitHub: epoch seconds
        ({"X-RateLimit-Requests-Reset": str(int(NOW * 1000) + 4500)}, 4.5),  # Linear: ms
        ({"x-ratelimit-reset": str(int(NOW) - 10)}, 0.0),  # already reset
        ({}, None),
    ],
)
def test_reset_after_reads_each_servers_header(
    headers: dict[str, str], seconds: float | None
) -> None:
    got = reset_after(headers, now=NOW)
    if seconds is None:
        assert got is None
    else:
        assert got == pytest.approx(seconds)


def test_documents_are_registered_by_operation_name() -> None:
    doc = document("test-backend", "query LegionProbe { viewer { id } }")
    assert doc.name == "LegionProbe"
    assert DOCUMENTS["test-backend"]["LegionProbe"] == doc.text
    with pytest.raises(ValueError, match="name its operation"):
        document("test-backend", "{ viewer { id } }")
    del DOCUMENTS["test-backend"]


def test_a_backend_error_is_one_line_and_names_the_operation_only() -> None:
    error = BackendError(
        "linear", BackendErrorKind.AUTH, "the credential was refused", operation="Issues"
    )
    assert str(error).startswith("linear Issues: the credential was refused")
    assert "legion doctor" in str(error)
    assert not error.retryable
    assert BackendError("github", BackendErrorKind.TRANSIENT, "x").retryable
