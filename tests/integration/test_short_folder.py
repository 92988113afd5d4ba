"""The short private folder in /tmp (`/tmp/legion-<uid>`: the tmux claims, the relay's fallback
sockets), which anyone on the machine may make first: as a link to a folder of yours (or, run as
root, to any folder), or as a folder of their own holding a lock they hold or a fifo. The real
daemon in this process on a private tmux server, the real `legion start` check; the folder's
place moved beside the test (the real one serves the other runs on this machine)."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from legion import daemon_link
from legion.config import load_project
from legion.daemon import Daemon, DaemonConfig
from legion.daemon_link import start_refusal, tmux_claim
from legion.errors import ConfigError
from tests.support.tmux import start_environment

NOBODY = 65534


@pytest.fixture
def env(project: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    with start_environment(tmp_path) as values:
        yield values


def test_a_short_folder_planted_as_a_link_is_neither_made_private_nor_written(
    project: Path, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user makes `/tmp/legion-<uid>` a link to a folder of yours (`~/public_html`; as
    root, `/etc`): the daemon neither makes that folder 0700 nor leaves its claim in it."""
    yours = tmp_path / "public_html"
    yours.mkdir()
    yours.chmod(0o755)
    short = tmp_path / "legion-short"
    short.symlink_to(yours)
    monkeypatch.setattr(daemon_link, "short_folder", lambda: short)
    loaded = load_project(project, env=env)
    try:
        Daemon(loaded, DaemonConfig(mode="manual", tick=0.2, run_for=0.5), env).run()
    except ConfigError as exc:
        # A state folder whose path is too long for a socket puts the relay's there too: the
        # daemon then refuses to start, in one line, having written nothing.
        assert "is not a folder of this user" in str(exc)
    assert stat.S_IMODE(yours.stat().st_mode) == 0o755
    assert list(yours.iterdir()) == []


@pytest.mark.skipif(os.getuid() != 0, reason="another user's folder: made by chown, as root")
def test_another_users_short_folder_neither_hangs_nor_refuses_a_start(
    project: Path, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user makes `/tmp/legion-<uid>` first, with a fifo at this project's tmux claim
    (the project's id is in its committed config): `legion start`'s check reads no claim
    there, so it neither hangs on the fifo nor refuses the start in the other user's words."""
    short = tmp_path / "legion-short"
    short.mkdir()
    monkeypatch.setattr(daemon_link, "short_folder", lambda: short)
    loaded = load_project(project, env=env)
    os.mkfifo(tmux_claim(loaded))
    os.chown(short, NOBODY, NOBODY)
    said: list[str | None] = []
    checking = threading.Thread(target=lambda: said.append(start_refusal(loaded)), daemon=True)
    checking.start()
    checking.join(5)
    if checking.is_alive():  # the fifo has no writer: open it, so the thread ends
        with open(tmux_claim(loaded), "w"):
            pass
        checking.join(5)
        pytest.fail("`legion start`'s check hung on a fifo in another user's folder")
    assert said == [None]
