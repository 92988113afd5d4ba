"""An issue's repository carries some of the project's config, written by Legion as a file:
git reads back exactly what was written, whatever the values hold."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from legion.workspaces.issue_repo import config_text

_VALUE = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=30
)
_SUBSECTION = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\0\n"),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(user=_VALUE, remote=_SUBSECTION, url=_VALUE)
def test_git_reads_back_what_config_text_wrote(
    tmp_path: Path, user: str, remote: str, url: str
) -> None:
    settings_written = [("user.name", user), (f"remote.{remote}.url", url)]
    config = tmp_path / "config"
    config.write_text(config_text(settings_written), encoding="utf-8")
    listing = subprocess.run(
        ["git", "config", "--file", str(config), "-z", "--list"],
        capture_output=True, check=True,
    ).stdout.decode("utf-8")  # fmt: skip
    read = [tuple(entry.split("\n", 1)) for entry in listing.split("\0") if entry]
    assert read == [("user.name", user), (f"remote.{remote}.url", url)]
