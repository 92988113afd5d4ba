"""`legion.runtime.tmux` against a real private tmux server (`-S <tmp>/sock -f /dev/null`), and
against a `tmux` on PATH that fails, hangs or dies: a definite "nothing there" is an empty
answer, anything else is `TmuxUnavailable` (unknown), never "no windows"."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from legion.config import load_project
from legion.errors import StoreError, TmuxUnavailable
from legion.runtime import tmux as tmux_module
from legion.runtime.tmux import Tmux
from legion.sessions.screen_watch import ScreenWatch
from legion.sessions.windows import SessionWindows


@pytest.fixture
def server() -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (apt-get install tmux)", pytrace=False)
    folder = Path(tempfile.mkdtemp(prefix="lgt-"))  # unix socket paths must stay short
    tmux = Tmux(socket=folder / "sock", config=Path("/dev/null"))
    try:
        yield tmux
    finally:
        tmux.run("kill-server", check=False)
        shutil.rmtree(folder, ignore_errors=True)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def wait_for(check: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def broken_tmux(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """Put a `tmux` first on PATH whose every call runs `body` (Python)."""
    folder = tmp_path / "broken-bin"
    folder.mkdir()
    shim = folder / "tmux"
    shim.write_text(f"#!{sys.executable}\nimport os, signal, sys, time\n{body}\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


def test_no_server_and_no_session_are_definite_answers(server: Tmux) -> None:
    assert server.list_windows("legion-x") == []
    assert server.has_session("legion-x") is False
    assert server.find_window("legion-x", "main") is None
    server.kill_window("@99")  # nothing to close: fine
    server.new_session("other", "w", python("import time; time.sleep(30)"), Path.cwd())
    assert server.list_windows("legion-x") == []
    assert server.has_session("legion-x") is False
    assert server.has_session("other") is True
    server.kill_window("@99")
    server.kill_window("=legion-x:main")


@pytest.mark.parametrize(
    "body",
    [
        'sys.stderr.write("lost server\\n"); sys.exit(1)',
        'sys.stderr.write("server exited unexpectedly\\n"); sys.exit(1)',
        "os.kill(os.getpid(), signal.SIGKILL)",
        "sys.exit(1)",  # failed, saying nothing
    ],
    ids=["lost-server", "exited-unexpectedly", "killed", "silent"],
)
def test_a_tmux_that_fails_is_unknown_never_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str
) -> None:
    broken_tmux(tmp_path, monkeypatch, body)
    tmux = Tmux(socket=tmp_path / "sock")
    with pytest.raises(TmuxUnavailable):
        tmux.list_windows("legion-x")
    with pytest.raises(TmuxUnavailable):
        tmux.find_window("legion-x", "main")
    with pytest.raises(TmuxUnavailable):
        tmux.has_session("legion-x")
    with pytest.raises(TmuxUnavailable):
        tmux.kill_window("@1")


def test_a_tmux_that_hangs_is_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken_tmux(tmp_path, monkeypatch, "time.sleep(30)")
    monkeypatch.setattr(tmux_module, "TIMEOUT_S", 0.5)
    started = time.monotonic()
    with pytest.raises(TmuxUnavailable, match="did not answer"):
        Tmux(socket=tmp_path / "sock").list_windows("legion-x")
    assert time.monotonic() - started < 5


def test_a_window_whose_process_exits_at_once_keeps_its_pane_and_its_tag(server: Tmux) -> None:
    server.new_session("s", "anchor", python("import time; time.sleep(30)"), Path.cwd())
    code = "print('cannot start'); raise SystemExit(3)"
    started = server.start_window("s", "w1", python(code), Path.cwd(), tag="session-1")
    window_id = started.id
    assert started.pane_pid is not None and started.tag == "session-1"

    def exited() -> bool:
        window = server.find_window("s", "w1")
        return window is not None and window.pane_dead

    wait_for(exited)
    window = server.find_window("s", "w1")
    assert window is not None and window.id == window_id and window.tag == "session-1"
    assert "cannot start" in server.capture(window_id)
    anchor = server.find_window("s", "anchor")
    assert anchor is not None and anchor.tag == "" and not anchor.pane_dead


def test_arguments_and_text_ending_in_a_semicolon_arrive_as_they_are(
    server: Tmux, tmp_path: Path
) -> None:
    out = tmp_path / "argv.txt"
    record = f"import sys, pathlib; pathlib.Path({str(out)!r}).write_text(repr(sys.argv[1:]))"
    server.new_session("s", "anchor", python("import time; time.sleep(30)"), Path.cwd())
    args = ["a;", "b\\;", ";", "kill-server;"]
    server.new_window("s", "argv", [*python(record), *args], Path.cwd(), tag="t;")
    wait_for(out.exists)
    assert out.read_text() == repr(args)
    assert server.has_session("s")  # nothing ran as a tmux command
    window = server.find_window("s", "argv")
    assert window is not None and window.tag == "t;"
    echo = "import sys; print('got', repr(sys.stdin.readline()), flush=True); input()"
    target = server.new_window("s", "echo", python(echo), Path.cwd())
    server.send_text(target, "echo hi;")
    wait_for(lambda: "got" in server.capture(target))
    assert "got 'echo hi;\\n'" in server.capture(target)


def test_typed_text_cannot_submit_early_or_press_keys(server: Tmux, tmp_path: Path) -> None:
    """A body holding a carriage return and ESC sequences, typed as Legion types a message:
    the program reads it as text on its lines, none of it as a key."""
    out = tmp_path / "typed.txt"
    read = (
        "import sys, pathlib; lines = [sys.stdin.readline() for _ in range(2)]; "
        f"pathlib.Path({str(out)!r}).write_text(repr(lines))"
    )
    server.new_session("s", "anchor", python("import time; time.sleep(30)"), Path.cwd())
    target = server.new_window("s", "read", python(read), Path.cwd())
    server.send_text(target, "first\rsecond \x1b[2J\x1b\x03 end")
    wait_for(out.exists)
    assert out.read_text() == repr(["first\n", "second \\x1b[2J\\x1b\\x03 end\n"])


def test_killing_a_window_waits_until_its_process_is_gone(
    server: Tmux, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.new_session("s", "anchor", python("import time; time.sleep(30)"), Path.cwd())
    plain = server.new_window("s", "plain", python("import time; time.sleep(30)"), Path.cwd())
    stubborn_code = (
        "import signal, time; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(30)"
    )
    stubborn = server.new_window("s", "stubborn", python(stubborn_code), Path.cwd())
    wait_for(lambda: "ready" in server.capture(stubborn))
    pids = {w.id: w.pane_pid for w in server.list_windows("s")}
    server.kill_window(plain)
    assert pids[plain] is not None and not tmux_module.process_alive(pids[plain])
    monkeypatch.setattr(tmux_module, "EXIT_GRACE_S", 0.5)
    started = time.monotonic()
    server.kill_window(stubborn)  # ignores SIGHUP: killed after the grace period
    assert time.monotonic() - started < 5
    assert pids[stubborn] is not None and not tmux_module.process_alive(pids[stubborn])
    assert {w.name for w in server.list_windows("s")} == {"anchor"}


def test_a_window_closed_without_waiting_returns_at_once_and_its_process_still_goes(
    server: Tmux, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retired worker's window: nothing replaces its session, so the hand-off does not wait
    for its CLI to exit; a thread of its own does, and kills it after the grace period."""
    server.new_session("s", "anchor", python("import time; time.sleep(30)"), Path.cwd())
    stubborn_code = (
        "import signal, time; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(30)"
    )
    stubborn = server.new_window("s", "stubborn", python(stubborn_code), Path.cwd())
    wait_for(lambda: "ready" in server.capture(stubborn))
    pid = {w.id: w.pane_pid for w in server.list_windows("s")}[stubborn]
    assert pid is not None
    monkeypatch.setattr(tmux_module, "EXIT_GRACE_S", 3.0)
    started = time.monotonic()
    server.kill_window(stubborn, pane_pid=pid, wait=False)
    assert time.monotonic() - started < 1.5  # not the grace period's wait
    assert tmux_module.process_alive(pid)  # still in its grace period
    wait_for(lambda: not tmux_module.process_alive(pid), timeout=30)
    assert time.monotonic() - started >= 3.0


def test_many_screens_are_read_with_one_client_and_a_window_gone_is_left_out(
    server: Tmux, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.new_session("s", "anchor", python("import time; time.sleep(30)"), Path.cwd())
    show = "import sys, time; print(sys.argv[1], flush=True); time.sleep(30)"
    one = server.new_window("s", "one", [*python(show), "first screen"], Path.cwd())
    two = server.new_window("s", "two", [*python(show), "second screen"], Path.cwd())
    wait_for(lambda: "second screen" in server.capture(two) and "first" in server.capture(one))
    gone = server.new_window("s", "gone", python("import time; time.sleep(30)"), Path.cwd())
    server.kill_window(gone)
    calls: list[tuple[str, ...]] = []
    run = Tmux.run

    def counted(self: Tmux, *args: str, check: bool = True) -> object:
        calls.append(args)
        return run(self, *args, check=check)

    monkeypatch.setattr(Tmux, "run", counted)
    screens = server.capture_many([one, two])
    assert len(calls) == 1
    assert "first screen" in screens[one] and "second screen" not in screens[one]
    assert "second screen" in screens[two]
    # A window closed meanwhile stops tmux's sequence: the rest are read on their own.
    calls.clear()
    screens = server.capture_many([one, gone, two])
    assert set(screens) == {one, two} and "second screen" in screens[two]
    assert server.capture_many([]) == {}


def test_a_server_legion_starts_holds_none_of_its_secrets(
    server: Tmux, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """tmux keeps the environment its server started with and hands it to every window."""
    sentinel = "sk-sentinel-0123456789-do-not-leak"
    for name in ("ANTHROPIC_API_KEY", "GITHUB_TOKEN", "LINEAR_API_KEY"):
        monkeypatch.setenv(name, sentinel)
    server.new_session("s", "w", python("import time; time.sleep(30)"), tmp_path)
    server.new_window("s", "x", python("import time; time.sleep(30)"), tmp_path)
    global_env = server.run("show-environment", "-g").stdout
    session_env = server.run("show-environment", "-t", "s").stdout
    assert "PATH=" in global_env
    assert sentinel not in global_env and sentinel not in session_env


def test_within_one_look_the_windows_are_listed_once_until_one_opens_or_closes(
    server: Tmux, project: Path
) -> None:
    """A daemon tick looks at the windows from several steps: one tmux client serves them all,
    and a window Legion opens or closes meanwhile is seen at once."""
    windows = SessionWindows(load_project(project), server)
    windows.ensure_session()
    sleeper = python("import time; time.sleep(30)")
    first = windows.start("first", sleeper, Path.cwd(), tag="sid-1")
    with windows.one_look():
        assert {w.name for w in windows.list()} == {"legion", "first"}
        # Another process opens a window: this look does not see it...
        server.new_window(windows.session, "other", sleeper, Path.cwd())
        assert {w.name for w in windows.list()} == {"legion", "first"}
        live = windows.live_window("sid-1")
        assert live is not None and live.id == first.id
        # ...until Legion itself opens or closes one.
        second = windows.start("second", sleeper, Path.cwd(), tag="sid-2")
        assert {w.name for w in windows.list()} == {"legion", "first", "other", "second"}
        windows.close_retired(second)
        assert {w.name for w in windows.list()} == {"legion", "first", "other"}
        server.new_window(windows.session, "later", sleeper, Path.cwd())
    # Out of the look, every list asks tmux.
    assert {w.name for w in windows.list()} == {"legion", "first", "other", "later"}


def test_a_screen_judged_still_is_looked_at_again_before_it_counts(
    server: Tmux, project: Path
) -> None:
    """`ScreenWatch.confirmed_still`: a spinner whose frames come round again (so two looks far
    apart can show the same frame) is caught moving by a few looks in quick succession, and
    watched as changed now; a screen that truly stands still, or a window gone, is still. A
    blank screen (a CLI still loading) is never still."""
    windows = SessionWindows(load_project(project), server)
    windows.ensure_session()
    spin = (
        "import itertools, sys, time\n"
        "for frame in itertools.cycle('.+*'):\n"
        "    sys.stdout.write('\\r' + frame + ' Thinking'); sys.stdout.flush(); time.sleep(0.1)\n"
    )
    still = "import sys, time; print('Stuck here', flush=True); time.sleep(30)"
    spinner = windows.start("spinner", python(spin), Path.cwd(), tag="sid-1")
    stuck = windows.start("stuck", python(still), Path.cwd(), tag="sid-2")
    wait_for(lambda: "Thinking" in windows.screen(spinner.id))
    wait_for(lambda: "Stuck here" in windows.screen(stuck.id))
    watch = ScreenWatch(windows)
    before = watch.look(spinner.id, windows.screen(spinner.id), 1.0)
    assert not watch.confirmed_still(spinner.id)
    moved = watch.seen(spinner.id)
    assert moved is not None and moved.since > before.since
    watch.look(stuck.id, windows.screen(stuck.id), 1.0)
    assert watch.confirmed_still(stuck.id)
    windows.close_retired(stuck)
    assert watch.confirmed_still(stuck.id)  # gone: nothing moves any more
    assert watch.look("@blank", "   \n", 1.0).digest == ""
    assert watch.look("@blank", "   \n", 9.0).since == 9.0  # blank: changing every look


def test_a_session_ends_even_when_its_capability_cannot_be_revoked(
    server: Tmux, project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every close revokes the session's capability (`SessionWindows.end`); a store that fails
    then is said in one line and keeps no window open (a fleet host that lost its lead must
    stop its sessions on time, whatever its store answers)."""
    ended: list[str] = []

    def revoke(sid: str) -> None:
        ended.append(sid)
        raise StoreError("the store does not answer")

    windows = SessionWindows(load_project(project), server, revoke)
    windows.ensure_session()
    sleeper = python("import time; time.sleep(30)")
    first = windows.start("first", sleeper, Path.cwd(), tag="sid-1")
    windows.start("second", sleeper, Path.cwd(), tag="sid-2")
    windows.close_window(first)
    assert {w.name for w in windows.list()} == {"legion", "second"}
    assert windows.close_all()
    assert not windows.running()
    assert ended == ["sid-1", "sid-2"]
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "session sid-2's capability not revoked: StoreError: the store does not answer" in said
