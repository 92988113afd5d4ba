"""The relay's wire format: every value a tracker or forge returns comes back equal (and of the
same types) after a trip through JSON, and every error comes back as the same LegionError."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legion.core.model import Status
from legion.errors import (
    BackendError,
    BackendErrorKind,
    ConflictError,
    GitError,
    InputError,
    LegionError,
    NotFoundError,
    NotPermittedError,
    ProtocolError,
)
from legion.forges.base import PrState, PullRequest, Review
from legion.relay.protocol import (
    answer_value,
    decode,
    dump_line,
    encode,
    error_answer,
    load_line,
    parse_request,
    request,
    result_answer,
)
from legion.trackers.base import Comment, Issue

text = st.text(max_size=30)
identifiers = st.from_regex(r"[A-Z]{1,4}-[1-9][0-9]{0,3}", fullmatch=True)

issues = st.builds(
    Issue,
    identifier=identifiers,
    title=text,
    body=text,
    status=st.sampled_from(Status),
    labels=st.frozensets(text, max_size=4),
    parent=st.none() | identifiers,
    children=st.lists(identifiers, max_size=3).map(tuple),
    created_at=text,
    updated_at=text,
    id=text,
    url=text,
    backend_status=text,
    links=st.lists(text, max_size=3).map(tuple),
)
comments = st.builds(
    Comment,
    id=st.integers() | text,
    issue=identifiers,
    author=text,
    body=text,
    created_at=text,
    by_legion=st.booleans(),
)
reviews = st.builds(
    Review,
    outcome=st.sampled_from(["approved", "changes_requested", "commented"]),
    author=text,
    body=text,
    created_at=text,
)
prs = st.builds(
    PullRequest,
    number=st.integers(min_value=1),
    issue=identifiers,
    title=text,
    body=text,
    branch=text,
    base=text,
    state=st.sampled_from(PrState),
    is_draft=st.booleans(),
    reviews=st.lists(reviews, max_size=3).map(tuple),
    merge_commit=st.none() | text,
    created_at=text,
    updated_at=text,
    url=text,
)
scalars = st.none() | st.booleans() | st.integers() | text
values = st.recursive(
    scalars | issues | comments | prs | reviews | st.sampled_from(Status),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(text, inner, max_size=3)
        | st.frozensets(text, max_size=3)
    ),
    max_leaves=12,
)


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (True == 1 would hide a lost bool)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def through_the_wire(value: Any) -> Any:
    return decode(json.loads(json.dumps(encode(value))))


@given(values)
def test_every_value_makes_an_exact_round_trip(value: Any) -> None:
    assert same(through_the_wire(value), value)


def test_an_issues_links_travel_as_a_tuple_and_default_to_empty() -> None:
    linked = Issue(
        "ENG-1", "t", "", Status.NEEDS_REVIEW, frozenset(), links=("https://x/o/r/pull/2",)
    )
    back = through_the_wire(linked)
    assert back == linked and type(back.links) is tuple
    fields = encode(linked)["fields"]
    del fields["links"]  # from a daemon that does not send them
    assert decode({"$type": "Issue", "fields": fields}).links == ()


@given(st.text())
def test_any_text_survives_a_line_even_a_lone_surrogate(value: str) -> None:
    line = dump_line(result_answer(value))
    assert line.isascii() and line.count(b"\n") == 1
    assert answer_value(load_line(line)) == value


def test_a_lone_surrogate_from_a_non_utf8_argument_travels() -> None:
    value = "caf\udce9"
    assert answer_value(load_line(dump_line(result_answer(value)))) == value


def test_a_request_carries_typed_arguments() -> None:
    message = request("tok", "tracker.set_status", {"identifier": "ENG-1", "status": Status.DONE})
    parsed = parse_request(load_line(dump_line(message)))
    assert (parsed.capability, parsed.op) == ("tok", "tracker.set_status")
    assert parsed.args == {"identifier": "ENG-1", "status": Status.DONE}


@pytest.mark.parametrize(
    "data",
    [
        {"$type": "Popen", "fields": {}},  # only the listed types are ever built
        {"$enum": "Status", "value": "Nope"},
        {"$type": "Issue", "fields": {"identifier": "A-1", "shell": "x"}},
        {"$type": "Issue", "fields": {"identifier": "A-1"}},  # missing fields
        {"plain": "object"},
        {},
    ],
)
def test_unknown_or_malformed_tags_are_refused(data: Any) -> None:
    with pytest.raises(ProtocolError):
        decode(data)


def test_a_line_that_is_not_a_request_is_refused() -> None:
    with pytest.raises(ProtocolError, match="cut short"):
        load_line(b'{"op": "x"}')
    with pytest.raises(ProtocolError, match="not JSON"):
        load_line(b"nope\n")
    with pytest.raises(ProtocolError, match="version"):
        parse_request({"version": 99, "capability": "t", "op": "x", "args": {}})


def raised(exc: BaseException) -> BaseException:
    wire = load_line(dump_line(error_answer(exc)))
    with pytest.raises(Exception) as info:
        answer_value(wire)
    return info.value


@pytest.mark.parametrize(
    "exc",
    [
        InputError("invalid issue identifier 'x'"),
        NotFoundError("no issue ENG-9"),
        ConflictError("PR #3 is merged"),
        NotPermittedError("this worker may act only on ENG-12 (asked: ENG-13)"),
        LegionError("plain"),
        GitError("git merge failed: conflict"),
    ],
)
def test_a_legion_error_comes_back_as_the_same_class_with_the_same_line(
    exc: LegionError,
) -> None:
    back = raised(exc)
    assert type(back) is type(exc)
    assert isinstance(back, LegionError)
    assert str(back) == str(exc) and back.exit_code == exc.exit_code


def test_a_backend_error_keeps_its_kind_operation_and_retry_time() -> None:
    exc = BackendError(
        "linear", BackendErrorKind.RATE_LIMITED, "slow down", operation="IssueGet", retry_after=12.5
    )
    back = raised(exc)
    assert isinstance(back, BackendError)
    assert str(back) == str(exc)  # not "linear IssueGet: linear IssueGet: ..."
    assert (back.kind, back.backend, back.operation, back.retry_after) == (
        BackendErrorKind.RATE_LIMITED,
        "linear",
        "IssueGet",
        12.5,
    )
    assert back.retryable
    auth = raised(BackendError("github", BackendErrorKind.AUTH, "bad credentials"))
    assert isinstance(auth, BackendError) and auth.kind is BackendErrorKind.AUTH
    assert str(auth).count("legion doctor") == 1


def test_other_errors_come_back_as_internal_errors_without_a_traceback() -> None:
    back = raised(KeyError("missing"))
    assert type(back) is KeyError
    other = raised(type("HTTPStatusError", (Exception,), {})("boom"))
    assert type(other) is RuntimeError and str(other) == "HTTPStatusError: boom"


def test_an_error_class_from_a_module_not_loaded_is_never_imported() -> None:
    wire = {
        "error": {
            "type": "Evil",
            "message": "m",
            "kind": None,
            "classes": [["legion.__main__", "Evil"], ["legion.errors", "ConflictError"]],
        }
    }
    import sys

    loaded = "legion.__main__" in sys.modules
    with pytest.raises(ConflictError):
        answer_value(wire)
    assert ("legion.__main__" in sys.modules) == loaded
