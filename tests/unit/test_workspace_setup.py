"""The pure decisions of workspace setup (`legion.core.workspace_setup`): when setup or refresh
runs, the back-off after failures, what a change of the commands does."""

from __future__ import annotations

from dataclasses import replace

from legion.core.workspace_setup import (
    CAP_S,
    Action,
    Commands,
    Kind,
    Result,
    Running,
    SetupState,
    backoff,
    code_block,
    commands_hash,
    decide,
    ended,
    failure_comment,
    last_change,
    started_session,
)

SETUP = Commands(setup=("uv sync", "npm ci"), refresh=("uv sync",))


def result(kind: Kind, commands: tuple[str, ...], ok: bool, run_id: str = "r1") -> Result:
    return Result(
        run_id, kind.value, commands_hash(commands), ok, commands[-1], 0 if ok else 3, False,
        ("boom",), 100.0, 110.0,
    )  # fmt: skip


def running(kind: Kind, commands: tuple[str, ...], run_id: str = "r1") -> Running:
    return Running(run_id, kind.value, commands_hash(commands), 1234, "99", 100.0)


def test_backoff_doubles_from_a_minute_to_an_hour() -> None:
    assert [backoff(n) for n in (0, 1, 2, 3)] == [0.0, 60.0, 120.0, 240.0]
    assert backoff(30) == CAP_S == 3600.0


def test_no_commands_start_at_once() -> None:
    assert decide(Commands(), SetupState(), 0.0).action is Action.START


def test_a_new_workspace_runs_setup_then_starts_then_refreshes() -> None:
    first = decide(SETUP, SetupState(), 0.0)
    assert (first.action, first.kind) == (Action.RUN, Kind.SETUP)
    state = SetupState(running=running(Kind.SETUP, SETUP.setup), attempt=1)
    assert decide(SETUP, state, 1.0).action is Action.WAIT
    state = ended(state, result(Kind.SETUP, SETUP.setup, ok=True), alive=False)
    assert state.status() == "ok" and decide(SETUP, state, 2.0).action is Action.START
    state = started_session(state)
    later = decide(SETUP, state, 3.0)
    assert (later.action, later.kind) == (Action.RUN, Kind.REFRESH)
    state = replace(state, running=running(Kind.REFRESH, SETUP.refresh, "r2"))
    state = ended(state, result(Kind.REFRESH, SETUP.refresh, ok=True, run_id="r2"), alive=False)
    assert decide(SETUP, state, 4.0).action is Action.START  # refreshed for this session


def test_without_refresh_commands_a_later_session_starts_at_once() -> None:
    commands = Commands(setup=("make",))
    state = SetupState(setup_hash=commands_hash(("make",)), consumed=True)
    assert decide(commands, state, 0.0).action is Action.START


def test_a_changed_setup_list_runs_setup_again() -> None:
    state = SetupState(setup_hash=commands_hash(("old",)))
    assert decide(SETUP, state, 0.0).kind is Kind.SETUP


def test_a_failure_is_reported_once_then_backs_off() -> None:
    state = SetupState(running=running(Kind.SETUP, SETUP.setup), attempt=1)
    state = ended(state, result(Kind.SETUP, SETUP.setup, ok=False), alive=False)
    assert state.failures == 1 and state.status() == "failed"
    assert decide(SETUP, state, 111.0).action is Action.REPORT
    state = replace(state, reported=True)
    held = decide(SETUP, state, 111.0)
    assert held.action is Action.HOLD and held.until == 110.0 + 60.0
    assert decide(SETUP, state, 171.0).action is Action.RUN
    # a second failure in a row waits twice as long, and is reported again (once)
    state = replace(state, running=running(Kind.SETUP, SETUP.setup, "r2"))
    state = ended(state, result(Kind.SETUP, SETUP.setup, ok=False, run_id="r2"), alive=False)
    assert state.failures == 2 and not state.reported
    state = replace(state, reported=True)
    assert decide(SETUP, state, 110.0 + 119.0).action is Action.HOLD
    assert decide(SETUP, state, 110.0 + 121.0).action is Action.RUN


def test_a_person_or_changed_commands_retry_at_once() -> None:
    failed = result(Kind.SETUP, SETUP.setup, ok=False)
    state = SetupState(last=failed, failures=3, reported=True)
    assert decide(SETUP, state, 111.0).action is Action.HOLD
    assert decide(SETUP, replace(state, retry_now=True), 111.0).action is Action.RUN
    other = Commands(setup=("uv sync --frozen",))
    assert decide(other, state, 111.0).action is Action.RUN


def test_success_forgets_the_failures() -> None:
    state = SetupState(
        last=result(Kind.SETUP, SETUP.setup, ok=False), failures=4, reported=True,
        running=running(Kind.SETUP, SETUP.setup, "r9"),
    )  # fmt: skip
    state = ended(state, result(Kind.SETUP, SETUP.setup, ok=True, run_id="r9"), alive=False)
    assert state.failures == 0 and state.next_at is None


def test_a_runner_dead_without_a_result_runs_again_uncounted() -> None:
    state = SetupState(running=running(Kind.SETUP, SETUP.setup), attempt=1)
    assert ended(state, None, alive=True) == state  # still running: wait
    gone = ended(state, None, alive=False)
    assert gone.running is None and gone.failures == 0
    assert decide(SETUP, gone, 0.0).action is Action.RUN
    stale = result(Kind.SETUP, SETUP.setup, ok=True, run_id="older")
    assert ended(state, stale, alive=True).running is not None  # another run's result


def test_the_record_round_trips_through_json() -> None:
    state = SetupState(
        setup_hash="abc", consumed=True, failures=2, attempt=3,
        last=result(Kind.SETUP, SETUP.setup, ok=False), running=running(Kind.REFRESH, ("x",)),
    )  # fmt: skip
    assert SetupState.from_json(state.to_json()) == state


def test_the_comment_fences_the_output_it_quotes() -> None:
    hostile = Result("r", "setup", "h", False, "npm ci", 1, False,
                     ("````", "@everyone ```"), 0.0, 5.0)  # fmt: skip
    text = failure_comment("LEG-3", hostile, 1, 60.0)
    assert "`npm ci` exited with 1" in text and "legion dispatch LEG-3" in text
    assert "`````text\n````\n@everyone ```\n`````" in text
    assert code_block("plain") == "```text\nplain\n```"


def test_the_commands_are_a_repository_configs_only_once_trusted() -> None:
    from legion.config.resolve import widening_keys
    from legion.config.settings import SPEC_BY_NAME

    table = {"workspace_setup": ["npm ci"], "workspace_refresh": "uv sync", "wip_limit": 1}
    assert widening_keys(table) == ["workspace_setup", "workspace_refresh"]
    assert widening_keys({"workspace_setup": []}) == []  # none: widens nothing
    spec = SPEC_BY_NAME["workspace_setup"]
    assert spec.parse("uv sync --frozen") == ("uv sync --frozen",)  # one string, one command
    assert spec.parse(["a && b", "c"]) == ("a && b", "c")
    assert spec.parse_env is not None and spec.parse_env("uv sync\n\nnpm ci\n") == (
        "uv sync",
        "npm ci",
    )
    for bad in ([1], [""], {"a": "b"}):
        try:
            spec.parse(bad)
        except ValueError as exc:
            assert "list of shell commands" in str(exc)
        else:
            raise AssertionError(f"{bad!r} parsed")


def test_the_setups_last_change_is_its_outputs_or_its_runs_latest() -> None:
    assert last_change(SetupState(), None) is None
    under_way = SetupState(running=running(Kind.SETUP, SETUP.setup))  # started at 100
    assert last_change(under_way, None) == 100.0
    assert last_change(under_way, 105.0) == 105.0  # its output changed since
    failed = SetupState(last=result(Kind.SETUP, SETUP.setup, ok=False), failures=1)
    assert last_change(failed, 105.0) == 110.0  # it ended after its last output
