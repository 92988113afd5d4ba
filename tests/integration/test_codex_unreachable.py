"""A Codex session that cannot reach the model (its key refused, or none) says so, as a Claude
Code session does (`TranscriptSummary.unreachable`), so that the daemon stops it, marks it
failed and pauses dispatch at once. Read from rollouts the real Codex CLI wrote against the
scripted server answering 401 (`codex_rollouts/`, how they were recorded in its README), put
in a session's own home as Codex puts them, through Legion's link as the daemon reads them."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from legion.runtime.codex.runtime import (
    CodexRuntime,
    codex_session_id,
    session_link,
)
from legion.runtime.codex.session import Session
from legion.runtime.headless import turn_state_file
from legion.runtime.transcript import Turn

RECORDED = Path(__file__).parent / "codex_rollouts"
REFUSED = "unexpected status 401 Unauthorized"


def _rollout_name(recorded: Path) -> str:
    """The name Codex gave the rollout: its start and its session id (from `session_meta`)."""
    import json

    meta = json.loads(recorded.read_text().splitlines()[0])
    codex_id = meta["payload"]["id"]
    start = meta["timestamp"][:19].replace(":", "-")
    return f"rollout-{start}-{codex_id}.jsonl"


def put_rollout(home: Path, recorded: Path) -> Path:
    """`recorded` where Codex writes it in CODEX_HOME `home`: sessions/YYYY/MM/DD/."""
    name = _rollout_name(recorded)
    day = home / "sessions" / name[8:12] / name[13:15] / name[16:18]
    day.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(recorded, day / name)
    return day / name


def linked(tmp_path: Path, recorded: str) -> Path:
    """A session's home holding the recorded rollout, linked as the turn loop links it."""
    home = tmp_path / "codex-home"
    rollout = put_rollout(home, RECORDED / recorded)
    link = session_link({"CODEX_HOME": str(home)}, "sid")
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(rollout)
    return link


def test_a_key_refused_at_a_later_turn_is_the_sessions_last_word(tmp_path: Path) -> None:
    link = linked(tmp_path, "key-refused-at-a-later-turn.jsonl")
    runtime = CodexRuntime()
    summary = runtime.summarize(link)
    assert summary is not None and summary.turn is Turn.ENDED
    assert summary.unreachable == REFUSED  # Codex's words, not the server's
    # The turn loop says the session waits (its turn's process ended): still unreachable.
    turn_state_file(link).write_text("idle\n")
    summary = runtime.summarize(link)
    assert summary is not None and summary.unreachable == REFUSED
    # A turn runs again (a person fixed the key and typed): no longer said.
    turn_state_file(link).write_text("running\n")
    summary = runtime.summarize(link)
    assert summary is not None and summary.turn is Turn.OPEN and summary.unreachable is None


def test_a_key_refused_at_the_first_turn_or_none_at_all_is_read_as_well(tmp_path: Path) -> None:
    refused = CodexRuntime().summarize(
        linked(tmp_path / "a", "key-refused-at-the-first-turn.jsonl")
    )
    assert refused is not None and refused.unreachable == REFUSED
    none = CodexRuntime().summarize(linked(tmp_path / "b", "no-key.jsonl"))
    assert none is not None
    assert none.unreachable == "Missing environment variable: `LEGION_FAKE_OPENAI_KEY`."


def replaying(tmp_path: Path, recorded: str) -> tuple[Session, dict[str, str]]:
    """The turn loop, its `codex` a stand-in that does what the real one did in `recorded`
    (writes the rollout, prints its events, exits 1)."""
    rollout = RECORDED / f"{recorded}.jsonl"
    name = _rollout_name(rollout)
    codex = tmp_path / "codex"
    codex.write_text(
        "#!/bin/sh\n"
        f'day="$CODEX_HOME/sessions/{name[8:12]}/{name[13:15]}/{name[16:18]}"\n'
        f'mkdir -p "$day" && cp {rollout} "$day/{name}"\n'
        f"cat {RECORDED / f'{recorded}.exec.jsonl'}\n"
        "exit 1\n"
    )
    codex.chmod(codex.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ) | {"CODEX_HOME": str(tmp_path / "codex-home")}
    session = Session(
        codex=str(codex), session_id="sid", inbox=None, context=None,
        extra_args=[], env=env, out=open(os.devnull, "w"),  # noqa: SIM115
    )  # fmt: skip
    return session, env


def test_a_session_whose_first_turn_is_refused_waits_where_legion_reads_why(
    tmp_path: Path,
) -> None:
    """The session is linked and waits for a prompt, as Claude Code waits at its login screen,
    instead of ending as a start that left nothing (whose reason, naming the server's request,
    would differ at every start and never pause dispatch)."""
    session, env = replaying(tmp_path, "key-refused-at-the-first-turn")
    assert session.run("$legion-worker plan mode for LEG-1", resumed=False, terminal=None) == 0
    link = session_link(env, "sid")
    assert codex_session_id(link) == "01a22710-a567-7ce1-888b-ac000d09ac1d"
    assert turn_state_file(link).read_text().strip() == "idle"
    summary = CodexRuntime().summarize(link)
    assert summary is not None and summary.unreachable == REFUSED


def test_a_first_turn_that_made_no_request_leaves_no_session(tmp_path: Path) -> None:
    """No key (or a provider Codex does not know): no request was made, nothing to resume; the
    start fails with Codex's reason, the same at every start (`legion.sessions.pause`)."""
    session, env = replaying(tmp_path, "no-key")
    assert session.run("go", resumed=False, terminal=None) == 1
    assert codex_session_id(session_link(env, "sid")) is None
