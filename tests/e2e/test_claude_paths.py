"""Legion computes the CLI's transcript path the way the real CLI does, long paths included."""

from __future__ import annotations

from pathlib import Path

import pytest

from legion.runtime.claude.paths import transcript_path
from tests.fakes.model_server import FakeModelServer, Scenario, text
from tests.support.claude_env import make_claude_env, new_session_id

pytestmark = [pytest.mark.e2e]


@pytest.mark.parametrize("depth", [1, 12])
def test_transcript_path_matches_the_cli(tmp_path: Path, depth: int) -> None:
    # depth 12 makes the encoded folder name longer than 200 characters (the hashed form).
    workspace = tmp_path.joinpath(*[f"folder with spaces {n:02d}" for n in range(depth)])
    workspace.mkdir(parents=True)
    with FakeModelServer([Scenario("hello", [[text("hi")]])]) as server:
        cenv = make_claude_env(tmp_path / "claude", server.base_url, workspace=workspace)
        session = new_session_id()
        result = cenv.run("-p", "hello", "--session-id", session, timeout=60)
        assert result.returncode == 0, result.stderr
    expected = transcript_path(cenv.config_dir, workspace, session)
    assert (len(expected.parent.name) > 200) == (depth == 12)
    found = sorted((cenv.config_dir / "projects").glob(f"*/{session}.jsonl"))
    assert found == [expected]
