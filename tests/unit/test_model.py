from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from legion.core.ids import controller_session_id, session_id, short_id
from legion.core.model import Label, Mode, Status, normalize_identifier, parse_identifier
from legion.errors import ConfigError, InputError

PROJECT = "7b4f0862-b775-4cb0-9a67-85400c6f44a8"


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("todo", Status.TODO),
        ("TODO", Status.TODO),
        ("in progress", Status.IN_PROGRESS),
        ("In_Progress", Status.IN_PROGRESS),
        ("in-progress", Status.IN_PROGRESS),
        ("In Review", Status.NEEDS_REVIEW),
        ("needs review", Status.NEEDS_REVIEW),
        (" Done ", Status.DONE),
        ("icebox", Status.ICEBOX),
        ("Triage", Status.TRIAGE),
        ("backlog", Status.BACKLOG),
        ("retro", Status.RETRO),
    ],
)
def test_status_parse(text: str, status: Status) -> None:
    assert Status.parse(text) is status


def test_unknown_status_names_the_known_ones() -> None:
    with pytest.raises(InputError, match=r"unknown status 'Doing it'.*Needs Review"):
        Status.parse("Doing it")


def test_labels() -> None:
    assert Label.from_name("Worker-Done") is Label.WORKER_DONE
    assert Label.from_name("bug") is None


def test_modes() -> None:
    assert [m.value for m in Mode] == [
        "architect",
        "plan",
        "implement",
        "review",
        "retro",
        "finish",
    ]
    with pytest.raises(InputError, match="unknown worker mode"):
        Mode.parse("test")


def test_identifiers() -> None:
    assert parse_identifier("leg-12") == ("LEG", 12)
    assert normalize_identifier(" eng-7 ") == "ENG-7"
    for bad in ("LEG", "LEG-0", "LEG-01", "12", "LEG-1; rm", "-1", "LEG--1"):
        with pytest.raises(InputError):
            parse_identifier(bad)


def test_session_id_is_uuid5_of_project_and_issue_mode() -> None:
    expected = uuid.uuid5(uuid.UUID(PROJECT), "ENG-21:implement")
    assert session_id(PROJECT, "eng-21", Mode.IMPLEMENT) == str(expected)
    assert controller_session_id(PROJECT) == str(uuid.uuid5(uuid.UUID(PROJECT), "controller"))
    assert session_id(PROJECT, "ENG-21", Mode.REVIEW) != session_id(
        PROJECT, "ENG-21", Mode.IMPLEMENT
    )
    assert session_id(PROJECT, "ENG-22", Mode.IMPLEMENT) != session_id(
        PROJECT, "ENG-21", Mode.IMPLEMENT
    )


def test_short_id() -> None:
    assert short_id(PROJECT) == "7b4f0862"
    with pytest.raises(ConfigError):
        short_id("not-a-uuid")


@given(st.uuids(), st.integers(1, 10**6), st.sampled_from(Mode))
def test_session_ids_are_deterministic(project: uuid.UUID, number: int, mode: Mode) -> None:
    one = session_id(str(project), f"leg-{number}", mode)
    assert one == session_id(str(project), f"LEG-{number}", mode)
    assert uuid.UUID(one).version == 5
