"""Mentions and addresses on the bus: examples, then properties over random worlds of agents."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from legion.bus.address import (
    HUMAN,
    AgentKey,
    candidates,
    clean_agent_name,
    parse_channel,
    parse_mentions,
    project_name_for_folder,
    readings,
    resolve,
)
from legion.bus.model import Channel
from legion.errors import InputError

# -- mentions -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("@backend the API spec is ready", ("backend",)),
        ("@backend, @designer: look. Thanks @backend!", ("backend", "designer")),
        ("ping @feature-x/designer.", ("feature-x/designer",)),
        ("ping @other-project/main/otto?", ("other-project/main/otto",)),
        ("@legion/LEG-7/implement (see above)", ("legion/LEG-7/implement",)),
        ("Ask @Backend", ("backend",)),  # names are lower case; the branch keeps its case
        ("@LEG-7/Implement", ("LEG-7/implement",)),
        ("mail a@example.com or x.@y", ()),  # e-mail addresses are not mentions
        ("run `legion say @b hi` to wake b", ()),  # code in backticks is not
        ("```\n@b in a block\n```\nthen @c", ("c",)),
        ("an unclosed ``` block @b", ()),
        ("@ alone, @- and @/x", ()),
        ("(@a) [@b] {@c} '@d' \"@e\"", ("a", "b", "c", "d", "e")),
        ("@legion and @human", ("legion", "human")),
    ],
)
def test_parse_mentions(body: str, expected: tuple[str, ...]) -> None:
    assert parse_mentions(body) == expected


def test_readings_try_every_split() -> None:
    here = Channel("app", "main")
    assert readings("b", here) == [AgentKey("app", "main", "b")]
    assert readings("feature/x/b", here) == [
        AgentKey("app", "feature/x", "b"),  # @branch/agent in the sender's project
        AgentKey("feature", "x", "b"),  # @project/branch/agent
    ]


def test_names_channels_and_projects() -> None:
    assert clean_agent_name("implement") == "implement"
    for bad in ("", "Implement", "-a", "a-", "a/b", "a.b", "x" * 65):
        with pytest.raises(InputError, match="invalid agent name"):
            clean_agent_name(bad)
    assert parse_channel("app/legion/LEG-7") == Channel("app", "legion/LEG-7")
    for bad in ("app", "/main", "app/", "a b/main", "app/ma..in"):
        with pytest.raises(InputError):
            parse_channel(bad)
    assert project_name_for_folder("my app (copy)") == "my-app-copy"
    assert project_name_for_folder("...") == "project"
    assert project_name_for_folder("legion") == "legion"


# -- resolving, by example ------------------------------------------------------------------------

HERE = Channel("app", "legion/LEG-7")
WORLD = {
    AgentKey("app", "main", "legion"),
    AgentKey("app", "legion/LEG-7", "implement"),
    AgentKey("app", "legion/LEG-7", "review"),
    AgentKey("app", "legion/LEG-8", "implement"),
    AgentKey("web", "main", "legion"),
    AgentKey("web", "legion/LEG-7", "implement"),
    HUMAN,
}


def test_resolve_same_branch_same_project_and_anywhere() -> None:
    assert resolve("@implement", HERE, WORLD) == AgentKey("app", "legion/LEG-7", "implement")
    assert resolve("legion/LEG-8/implement", HERE, WORLD) == AgentKey(
        "app", "legion/LEG-8", "implement"
    )
    assert resolve("web/legion/LEG-7/implement", HERE, WORLD) == AgentKey(
        "web", "legion/LEG-7", "implement"
    )
    assert resolve("web/main/legion", HERE, WORLD) == AgentKey("web", "main", "legion")


def test_legion_is_the_projects_orchestrator_on_any_branch() -> None:
    assert resolve("legion", HERE, WORLD) == AgentKey("app", "main", "legion")
    assert resolve("legion", Channel("web", "x"), WORLD) == AgentKey("web", "main", "legion")
    with pytest.raises(InputError, match="project api has no orchestrator"):
        resolve("legion", Channel("api", "main"), WORLD)
    two = {*WORLD, AgentKey("app", "old", "legion")}
    with pytest.raises(InputError, match="ambiguous address @legion"):
        resolve("legion", HERE, two)


def test_the_human_is_reached_through_legion() -> None:
    assert resolve("human", HERE, WORLD) == HUMAN
    with pytest.raises(InputError, match="write @legion instead of @human"):
        resolve("@human", HERE, WORLD, may_reach_human=False)


def test_an_ambiguous_address_names_its_candidates() -> None:
    # Project "web" has branch "legion/LEG-7"; project "app" a branch "web/legion/LEG-7".
    world = {*WORLD, AgentKey("app", "web/legion/LEG-7", "implement")}
    with pytest.raises(InputError) as caught:
        resolve("web/legion/LEG-7/implement", HERE, world)
    line = str(caught.value)
    assert line.startswith("ambiguous address @web/legion/LEG-7/implement: it could be ")
    assert "@app/web/legion/LEG-7/implement" in line and "@web/legion/LEG-7/implement" in line


def test_an_unknown_address_says_where_it_looked_and_who_exists() -> None:
    with pytest.raises(InputError) as caught:
        resolve("reviewer", HERE, WORLD)
    assert str(caught.value) == (
        "unknown address @reviewer: no agent 'reviewer' on app/legion/LEG-7; "
        "on app/legion/LEG-7: @implement, @review"
    )
    with pytest.raises(InputError, match="agents named implement: @app/legion/LEG-7/implement"):
        resolve("LEG-7/implement", HERE, WORLD)
    with pytest.raises(InputError, match="an empty address"):
        resolve("@", HERE, WORLD)


# -- properties -----------------------------------------------------------------------------------

PROJECTS = ["app", "web", "legion", "x"]
SEGMENTS = ["main", "legion", "LEG-1", "feature", "app", "x", "web"]
NAMES = ["legion", "implement", "plan", "a-1", "review"]

branches = st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=3).map("/".join)
keys = st.builds(AgentKey, st.sampled_from(PROJECTS), branches, st.sampled_from(NAMES))
worlds = st.sets(keys, min_size=1, max_size=25)
heres = st.builds(Channel, st.sampled_from(PROJECTS), branches)


def _addresses_for(key: AgentKey) -> list[str]:
    return [key.name, f"{key.branch}/{key.name}", key.full]


def _outcome(address: str, here: Channel, world: set[AgentKey]) -> AgentKey | str:
    try:
        return resolve(address, here, world)
    except InputError as exc:
        return str(exc)


@given(worlds, heres, st.data())
def test_an_address_names_exactly_one_agent_or_is_refused(
    world: set[AgentKey], here: Channel, data: st.DataObject
) -> None:
    key = data.draw(st.sampled_from(sorted(world)))
    address = data.draw(st.sampled_from(_addresses_for(key)))
    found = candidates(address, here, world)
    outcome = _outcome(address, here, world)
    assert set(found) <= world
    if isinstance(outcome, AgentKey):
        assert found == [outcome]  # never two agents
        assert outcome in readings(address, here) or address == "legion"
    elif found:
        assert outcome.startswith(f"ambiguous address @{address}") and len(found) > 1
        assert all(f"@{c.full}" in outcome for c in found)
    else:
        assert outcome.startswith(("unknown address", "@legion: project"))
    assert "\n" not in str(outcome)


@given(worlds, heres, st.data())
def test_every_agent_is_reachable_by_its_full_address(
    world: set[AgentKey], here: Channel, data: st.DataObject
) -> None:
    key = data.draw(st.sampled_from(sorted(world)))
    assert key in candidates(key.full, here, world)
    outcome = _outcome(key.full, here, world)
    # Only another agent whose relative address spells the same text can make it ambiguous,
    # and the error then names this agent too.
    assert outcome == key or f"@{key.full}" in str(outcome)
    project_names = {k.project for k in world} | {here.project}
    if not any(k.branch.split("/")[0] in project_names for k in world):
        assert outcome == key


@given(worlds, heres)
def test_agents_on_the_senders_branch_answer_to_their_name(
    world: set[AgentKey], here: Channel
) -> None:
    local = [k for k in world if (k.project, k.branch) == (here.project, here.branch)]
    for key in local:
        if key.name == "legion":
            continue  # @legion is the project's orchestrator, whichever branch it is on
        assert resolve(key.name, here, world) == key
        assert resolve(f"@{key.name.upper()}", here, world) == key


@given(worlds, heres, st.sampled_from(NAMES), branches)
def test_an_address_of_nobody_is_unknown(
    world: set[AgentKey], here: Channel, name: str, branch: str
) -> None:
    address = f"nobody-project/{branch}/{name}"
    assume(not candidates(address, here, world))
    with pytest.raises(InputError, match=r"^unknown address"):
        resolve(address, here, world)


_WORDS = st.sampled_from(["the", "spec", "is", "ready", "see", "a@b.c", "`@x`", "(ok)"])
_PUNCTUATION = st.sampled_from(["", ".", ",", "!", "?", ":", ";", ")"])


@given(st.lists(st.tuples(st.lists(_WORDS, max_size=3), keys, _PUNCTUATION), max_size=6))
def test_mentions_are_found_whatever_surrounds_them(
    parts: list[tuple[list[str], AgentKey, str]],
) -> None:
    body = " ".join(f"{' '.join(words)} @{key.full}{mark}" for words, key, mark in parts)
    expected = list(dict.fromkeys(key.full for _, key, _ in parts))
    assert list(parse_mentions(body)) == expected
