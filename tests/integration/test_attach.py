"""`legion attach AGENT`: the agent's live tmux window opened in the human's terminal, read-write.

The human's terminal is a pane of a second private tmux server; Legion's sessions run on the
project's own private server. What is attached is read from Legion's server (`list-clients`),
and what is typed in the human's terminal must reach the agent's process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from legion.backends import open_backends, open_workers
from legion.bus import bus_path
from legion.bus.sessions import register_session
from legion.bus.stored import SqliteBus
from legion.config import load_project
from legion.runtime.tmux import TAG_OPTION
from tests.support.cli import (
    LEGION_BIN,
    LegionRunner,
    Result,
    git,
    run_legion,
    write_trusted_config,
)

# What the agent's window runs: it writes the first line typed into it to a file, then waits.
AGENT = "import sys, time; open(sys.argv[1], 'w').write(sys.stdin.readline()); time.sleep(600)"


def wait_for(what: str, check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def status_of(session_id: str) -> str:
    """The bus's status of session `session_id`'s agent."""
    bus = SqliteBus(bus_path(os.environ))
    try:
        agent = bus.agent_by_session(session_id)
        assert agent is not None
        return agent.status.value
    finally:
        bus.close()


def one_line_error(result: Result, fragment: str, code: int) -> None:
    assert result.returncode == code, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("legion: error: "), result.stderr
    assert fragment in lines[0], lines[0]


class Server:
    """A private tmux server, driven by argv."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket

    def __call__(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run(
            ["tmux", "-S", str(self.socket), "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=15,
        )
        assert proc.returncode == 0 or not check, proc.stderr
        return proc.stdout

    def clients(self) -> list[list[str]]:
        out = self("list-clients", "-F", "#{session_name}\t#{window_id}\t#{client_readonly}",
                   check=False)  # fmt: skip
        return [line.split("\t") for line in out.splitlines()]

    def kill(self) -> None:
        self("kill-server", check=False)


@pytest.fixture
def setup(project: Path, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The project on a private tmux server, its @legion and an implementer registered on the
    bus, the implementer's session live in its tagged window, the reviewer's not running."""
    socket = tmp_path / "legion.sock"
    config = project / ".legion" / "config.toml"
    write_trusted_config(
        project, config.read_text() + f'tmux_socket = "{socket}"\ntmux_config = "/dev/null"\n'
    )
    worktree = tmp_path / "wt-leg-1"
    git(project, "worktree", "add", "-q", "-b", "legion/LEG-1", str(worktree))
    loaded = load_project(project)
    bus = SqliteBus(bus_path(os.environ))
    for mode, where in (("controller", project), ("implement", worktree), ("review", worktree)):
        register_session(
            bus, loaded, mode=mode, session_id=f"sid-{mode}", workspace=where, runtime="t"
        )
    bus.close()
    workers = open_workers(loaded, open_backends(loaded), dict(os.environ))
    typed = tmp_path / "typed.txt"
    workers.windows.tmux.new_session(workers.windows.session, "main", ["sleep", "600"], project)
    window = workers.windows.tmux.start_window(
        workers.windows.session,
        "leg-1-implement",
        [sys.executable, "-c", AGENT, str(typed)],
        worktree,
        tag="sid-implement",
    )
    legion_server, user = Server(socket), Server(tmp_path / "user.sock")
    # @legion's window, tagged with its session as Legion tags every window it starts.
    legion_server(
        "set-option",
        "-w",
        "-t",
        f"={workers.windows.session}:main",
        TAG_OPTION,
        "sid-controller",
    )
    try:
        yield {
            "legion": legion_server,
            "user": user,
            "session": workers.windows.session,
            "window": window.id,
            "typed": typed,
            "project": project,
        }
    finally:
        user.kill()
        legion_server.kill()


def test_attach_opens_the_agents_window_read_write_in_the_terminal(
    setup: dict[str, Any],
) -> None:
    legion_server, user = setup["legion"], setup["user"]
    assert legion_server.clients() == []
    archived = run_legion("archive", "legion/LEG-1/implement", cwd=setup["project"])
    assert archived.returncode == 0 and status_of("sid-implement") == "archived"
    # The human, in a terminal of their own tmux (so $TMUX names another server), attaches.
    user(
        "new-session", "-d", "-s", "human", "-x", "120", "-y", "40", "-c", str(setup["project"]),
        "--", str(LEGION_BIN), "attach", "legion/LEG-1/implement",
    )  # fmt: skip
    clients = wait_for("a client on Legion's server", legion_server.clients)
    assert clients == [[setup["session"], setup["window"], "0"]]  # its window, not read-only
    # What the human types goes to the agent.
    user("send-keys", "-t", "human", "-l", "carry on with the parser")
    user("send-keys", "-t", "human", "Enter")
    typed = setup["typed"]
    wait_for("the agent got the line", lambda: typed.exists() and typed.read_text())
    assert typed.read_text() == "carry on with the parser\n"
    assert status_of("sid-implement") == "idle"  # attached to again: back in the lists


def test_attach_inside_legions_own_tmux_switches_the_client(setup: dict[str, Any]) -> None:
    legion_server, user = setup["legion"], setup["user"]
    user(
        "new-session", "-d", "-s", "human", "-x", "120", "-y", "40", "-c", str(setup["project"]),
        "--", str(LEGION_BIN), "attach", "legion",
    )  # fmt: skip
    main = legion_server("display-message", "-p", "-t", f"={setup['session']}:main",
                         "#{window_id}").strip()  # fmt: skip
    wait_for("attached to @legion", lambda: legion_server.clients() == [
        [setup["session"], main, "0"]
    ])  # fmt: skip
    # From a shell window of Legion's own session (where $TMUX is Legion's server), the same
    # client is switched to the implementer: no nested tmux.
    # (Legion's server hands its windows no state home: the shell has the human's own.)
    homes = [f"{name}={os.environ[name]}" for name in ("XDG_STATE_HOME", "XDG_CONFIG_HOME")]
    legion_server(
        "new-window", "-d", "-t", f"={setup['session']}:", "-c", str(setup["project"]),
        "-e", homes[0], "-e", homes[1], "--", str(LEGION_BIN), "attach", "legion/LEG-1/implement",
    )  # fmt: skip
    wait_for("switched to the implementer", lambda: legion_server.clients() == [
        [setup["session"], setup["window"], "0"]
    ])  # fmt: skip


@pytest.mark.parametrize("name", ["LEG-1", "leg-1", "leg-1-implement"])
def test_attach_takes_an_issue_or_a_window_as_legion_workers_shows_it(
    setup: dict[str, Any], name: str
) -> None:
    from legion.core.model import Mode

    loaded = load_project(setup["project"])
    workers = open_workers(loaded, open_backends(loaded), dict(os.environ))
    workers.roster.registry.start(
        "LEG-1", Mode.IMPLEMENT, "sid-implement", "leg-1-implement", setup["project"]
    )
    archived = run_legion("archive", "legion/LEG-1/implement", cwd=setup["project"])
    assert archived.returncode == 0
    legion_server, user = setup["legion"], setup["user"]
    user(
        "new-session", "-d", "-s", "human", "-x", "120", "-y", "40", "-c", str(setup["project"]),
        "--", str(LEGION_BIN), "attach", name,
    )  # fmt: skip
    clients = wait_for("a client on Legion's server", legion_server.clients)
    assert clients == [[setup["session"], setup["window"], "0"]]
    assert status_of("sid-implement") == "idle"  # by issue or window too
    # A name that names nothing says which workers run.
    unknown = run_legion(
        "attach", "LEG-9", cwd=setup["project"], env={"TMUX": f"{user.socket},1,0"}
    )
    one_line_error(unknown, "live workers: LEG-1 implement (window leg-1-implement)", 2)


def test_attach_to_an_unknown_or_stopped_agent_is_a_clear_error(
    legion: LegionRunner, setup: dict[str, Any]
) -> None:
    # As from a terminal of another tmux server (`legion attach` needs a terminal).
    on_a_terminal = {"TMUX": f"{setup['user'].socket},1,0"}
    one_line_error(
        legion("attach", "nobody", env=on_a_terminal),
        "unknown address @nobody",
        2,
    )
    one_line_error(
        legion("attach", "legion/LEG-1/review", env=on_a_terminal),
        "@repo/legion/LEG-1/review is not running",
        1,
    )
    one_line_error(legion("attach", "human", env=on_a_terminal), "no session to attach to", 2)
    one_line_error(legion("attach", "nobody"), "needs a terminal", 2)
    assert setup["legion"].clients() == []


def test_the_tuis_attach_opens_the_highlighted_agents_live_window(setup: dict[str, Any]) -> None:
    """What the TUI's `o` runs (`ServiceCommands.attach`): the same tmux command as
    `legion attach`, for a live agent; why not, in a line, for one that is not running."""
    from legion.bus import bus_path
    from legion.bus.stored import SqliteBus
    from legion.errors import LegionError
    from legion.runtime.tmux import Attach
    from legion.tui.commands import ServiceCommands

    project = setup["project"]
    bus = SqliteBus(bus_path(os.environ))
    agents = {a.name: a for a in bus.agents() if a.session_id}
    here = ServiceCommands(dict(os.environ), project, lambda: {})
    outside = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    found = here.attach(bus, agents["implement"], outside)
    assert isinstance(found, Attach) and not found.switched
    assert found.argv[-3:] == ["attach-session", "-t", f"={setup['session']}:{setup['window']}"]
    with pytest.raises(LegionError, match="not running") as refused:
        here.attach(bus, agents["review"], outside)
    assert "\n" not in str(refused.value)
    bus.close()
    # Run as the TUI runs it, in a terminal of the human's own tmux: a read-write client of
    # Legion's server on the agent's window.
    user = setup["user"]
    user(
        "new-session", "-d", "-s", "human", "-x", "120", "-y", "40", "--",
        *found.argv,
    )  # fmt: skip
    clients = wait_for("a client on Legion's server", setup["legion"].clients)
    assert clients == [[setup["session"], setup["window"], "0"]]
