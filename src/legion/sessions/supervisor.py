"""The session supervisor: starts (or resumes) any session, the controller's or a worker's, in
its tmux window, stops it, and waits for starts; what every caller needs of the sessions'
windows goes through it, so none reaches for tmux.

Starting is one code for every session: whatever still runs that session, or holds its
window's name, is closed first and its process waited for (one session never runs in two
processes, even for a moment); its environment is the dispatcher's without what must not reach
a session; it gets its own relay capability and its agent on the bus; it is launched through a
private named pipe (`legion.runtime.launch`), so its environment is never on a command line.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from legion.bus.model import Agent, AgentStatus
from legion.config import Project
from legion.core.ids import short_id
from legion.core.liveness import transcript_grew
from legion.errors import TmuxError, TmuxUnavailable
from legion.plugins import backend_secret_variables
from legion.relay import CAPABILITY_ENV, SOCKET_ENV, socket_path
from legion.relay.capabilities import Capabilities
from legion.runtime import launch
from legion.runtime.base import AgentRuntime
from legion.runtime.tmux import (
    Attach,
    Tmux,
    Window,
    process_args,
    session_processes,
    wait_for_exit,
)
from legion.sessions import prompting
from legion.sessions.observer import CONTROLLER_WINDOW
from legion.sessions.prompting import transcript_size
from legion.statefiles import write_private

# Variables of the dispatcher that must not reach a worker: tmux's would make the CLI think it
# runs in the dispatcher's pane; those a Claude Code session sets for its tools' processes
# would make a worker started by the controller (from its Bash tool) take itself for the
# controller's child: another session id, another transcript.
# Legion's own tracker and forge credentials stay out too: a worker runs model-written
# commands, so Legion, not the worker, holds them (its `legion` asks the daemon: see
# `legion.relay`). So does the capability of whoever starts the session (the controller's
# covers the whole project): each session is given its own.
_DROP_FROM_ENV = (
    "TMUX",
    "TMUX_PANE",
    "CLAUDECODE",
    "CLAUDE_PID",
    "CLAUDE_EFFORT",
    *backend_secret_variables(),
    CAPABILITY_ENV,
    SOCKET_ENV,
)
_DROP_PREFIXES = (
    "CLAUDE_CODE_CHILD_",
    "CLAUDE_CODE_SESSION_",
    "CLAUDE_CODE_MESSAGING_",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_EXECPATH",
)


def inheritable(name: str) -> bool:
    return name not in _DROP_FROM_ENV and not name.startswith(_DROP_PREFIXES)


START_TIMEOUT_S = 30.0
ANCHOR_WINDOW = "legion"


@dataclass(eq=False)
class _Starting:
    """A worker window whose session has not yet recorded its first prompt."""

    issue: str
    window_id: str
    transcript: Path
    size_before: int
    runtime: AgentRuntime
    answered_at: float = 0.0  # when keys last went to a first-run dialog


_PANE_DEAD = re.compile(r"^Pane is dead \((status|signal) (\d+)")


def start_failure(screen: str) -> str:
    """Pure: why a worker whose process ended at once did, from its last screen: its own last
    line of output, and the exit status (or signal) tmux noted under it."""
    lines = [line.strip() for line in screen.splitlines() if line.strip()]
    how = ""
    if lines and (dead := _PANE_DEAD.match(lines[-1])):
        how = f" ({'exit status' if dead[1] == 'status' else 'signal'} {dead[2]})"
        lines.pop()
    said = lines[-1] if lines else "(no output)"
    return f"the worker exited as it started{how}: {said}"


class SessionSupervisor:
    def __init__(
        self,
        project: Project,
        tmux: Tmux,
        env: Mapping[str, str],
        capabilities: Capabilities | None = None,
    ) -> None:
        """`capabilities`: where each session's relay capability is minted, when the project's
        sessions reach the tracker and forge through the daemon (None: they need none)."""
        self.project = project
        self.tmux = tmux
        self.env = env
        self.capabilities = capabilities
        self._starting: list[_Starting] = []
        # The daemon's "stop now": a wait for starts ends as soon as it says so.
        self.should_stop: Callable[[], bool] = lambda: False
        self._handovers: dict[str, launch.Handover] = {}  # window id: its spec, on its way

    @property
    def session(self) -> str:
        """The project's tmux session."""
        return f"legion-{short_id(self.project.settings.project_id)}"

    def start_session_window(
        self,
        name: str,
        sid: str,
        prompt: str,
        cwd: Path,
        extra_env: Mapping[str, str],
        *,
        issue: str | None,
        runtime: AgentRuntime,
    ) -> str:
        """Start (or resume, when its transcript exists) session `sid` of `runtime` in window
        `name`; returns the new window's id. `issue`: the
        issue a worker works on, which its relay capability is scoped to; None for the
        controller (the whole project).

        Whatever still runs that session, or holds the name, is closed first, and its process
        waited for: one session never runs in two processes, even for a moment (a window left
        by a crash, a stuck controller, a dead pane kept for `peek`)."""
        runtime.command(sid, prompt, resume=False)  # the CLI is there: fail before closing
        runtime.prepare(self.env, cwd)
        env = {key: value for key, value in self.env.items() if inheritable(key)}
        env |= runtime.environment(self.env)
        env |= {
            "LEGION_REPO": str(self.project.root),
            # The session's `legion` is this one, whatever the PATH it inherited holds.
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), self.env.get("PATH", "")]),
            **extra_env,
        }
        if self.capabilities is not None:
            # Minted for this start: the session's earlier capability is revoked with it.
            env[CAPABILITY_ENV] = self.capabilities.mint(
                issue, mode=extra_env.get("LEGION_MODE", ""), session_id=sid
            )
            env[SOCKET_ENV] = str(socket_path(self.project.state_dir))
        self._ensure_session()
        for window in self.tmux.list_windows(self.session):
            if window.name == name or window.tag == sid:
                pid = None if window.pane_dead else window.pane_pid
                self.tmux.kill_window(window.id, pane_pid=pid)
        self._stop_stray(sid)
        self._ensure_session()  # closing the last window ends the session
        # Decided only now: a leftover that was starting may have written the transcript.
        transcript = runtime.transcript(self.env, cwd, sid)
        agent = self._register_on_bus(sid, extra_env.get("LEGION_MODE", ""), cwd, runtime.name)
        if agent is not None:
            # What the session's `legion ask`/`complete` carry: a replaced session's are stale.
            env["LEGION_SPAWN_INSTANCE"] = str(agent.spawn_instance)
        argv = runtime.command(
            sid,
            prompt,
            resume=transcript.exists(),
            inbox=self.inbox_file(sid),
            context=self.context_file(sid),
        )
        handover = launch.Handover(self.project.state_dir / "launch", argv, cwd, env)
        handover.start()
        try:
            window = self.tmux.start_window(
                self.session, name, launch.command(handover.path), cwd, tag=sid
            )
        except BaseException:
            handover.cancel()
            raise
        self._handovers[window.id] = handover
        if window.pane_pid is not None:
            with contextlib.suppress(OSError):  # only ever a help to the next start
                write_private(self._pid_file(sid), f"{window.pane_pid}\n")
        return window.id

    def stop_session(self, sid: str, *, force: bool = False) -> bool:
        """Close the window running session `sid` (SIGHUP, as tmux does, then SIGKILL after a
        grace period; `force`: SIGKILL at once) and wait for its process. True if one ran."""
        stopped = False
        if not self.tmux.has_session(self.session):
            return False
        for window in self.tmux.list_windows(self.session):
            if window.tag != sid:
                continue
            pid = None if window.pane_dead else window.pane_pid
            if force and pid is not None:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            self.tmux.kill_window(window.id, pane_pid=pid)
            stopped = stopped or pid is not None
        self._stop_stray(sid)
        return stopped

    def _pid_file(self, sid: str) -> Path:
        return self.project.state_dir / "sessions" / f"{sid}.pid"

    def inbox_file(self, sid: str) -> Path:
        """Messages waiting for session `sid`'s next turn boundary (its hooks hand them over)."""
        return self.project.state_dir / "sessions" / f"{sid}.inbox.json"

    def context_file(self, sid: str) -> Path:
        """What a resumed or compacted session `sid` is given back (its SessionStart hook)."""
        return self.project.state_dir / "sessions" / f"{sid}.context.md"

    def _register_on_bus(self, sid: str, mode: str, workspace: Path, runtime: str) -> Agent | None:
        """Record the session as an agent on the bus, before its process can post. The bus is
        a help to the session, never a condition of it: a failure is reported and the session
        starts all the same."""
        from legion.bus import open_bus
        from legion.bus.sessions import register_session

        try:
            bus = open_bus(self.env)
            try:
                return register_session(
                    bus,
                    self.project,
                    mode=mode,
                    session_id=sid,
                    workspace=workspace,
                    runtime=runtime,
                )
            finally:
                bus.close()
        except Exception as exc:  # whatever it is, the worker still starts
            print(
                f"legion: session {sid} not registered on the bus: {type(exc).__name__}: {exc}",
                file=sys.stderr,
                flush=True,
            )
            return None

    def mark_on_bus(self, sid: str, status: AgentStatus, detail: str) -> None:
        """Set the status of session `sid`'s agent (archived stands). Like the registration, a
        help, never a condition: a failure is reported and the caller carries on."""
        from legion.bus import open_bus

        try:
            bus = open_bus(self.env)
            try:
                agent = bus.agent_by_session(sid)
                if agent is not None and agent.status not in (status, AgentStatus.ARCHIVED):
                    bus.update_agent(agent.id, status=status, detail=detail)
            finally:
                bus.close()
        except Exception as exc:  # whatever it is, the worker is retired all the same
            print(
                f"legion: session {sid}'s agent not marked {status.value}: "
                f"{type(exc).__name__}: {exc}",
                file=sys.stderr,
                flush=True,
            )

    def _stop_stray(self, sid: str) -> None:
        """End every process still running session `sid` outside the windows tmux shows, and
        wait for each: one session never runs in two processes, even for a moment. Such a
        process is one whose window is gone while it lives on: its tmux server died (killed,
        crashed) and took the window, not always the process at once; a Legion process was
        killed while it waited for one to exit after closing its window; a process the CLI
        forked for a tool outlived its parent. Found on their command lines (`/proc`), and
        the one last started on the session (its pid file: a launcher not yet the CLI, or
        where there is no /proc). Whose each is is checked on its command line, so a reused pid
        is safe."""
        pids = set(session_processes(sid))
        try:
            pid = int(self._pid_file(sid).read_text().strip())
        except (OSError, ValueError):
            pid = None
        if pid is not None:
            args = process_args(pid)
            if args is not None and (sid in args or "legion.runtime.launch" in args):
                pids.add(pid)
        for stray in pids:
            with contextlib.suppress(OSError):
                os.kill(stray, signal.SIGHUP)  # what tmux sends when it closes a window
        for stray in sorted(pids):
            wait_for_exit(stray)

    def await_starts(self) -> list[tuple[str, str]]:
        """Wait until every worker started without waiting has recorded its first prompt,
        getting each CLI past any first-run dialog on the way. Returns (issue, why) for those
        whose process died first; a slow start is not a failure, and neither is a moment in
        which tmux cannot be asked."""
        deadline = time.monotonic() + START_TIMEOUT_S
        failures: list[tuple[str, str]] = []
        try:
            while self._starting and time.monotonic() < deadline and not self.should_stop():
                try:
                    windows = {w.id: w for w in self.tmux.list_windows(self.session)}
                except TmuxUnavailable:
                    time.sleep(0.25)
                    continue
                for item in list(self._starting):
                    if transcript_grew(item.size_before, transcript_size(item.transcript)):
                        self._starting.remove(item)
                        continue
                    window = windows.get(item.window_id)
                    try:
                        screen = self.tmux.capture(item.window_id, lines=60) if window else ""
                    except TmuxError:
                        continue  # closed meanwhile, or tmux did not answer: look again
                    if window is None or window.pane_dead:
                        failures.append((item.issue, start_failure(screen)))
                        self._starting.remove(item)
                        if handover := self._handovers.pop(item.window_id, None):
                            handover.cancel()  # its reader is gone: do not wait for it
                        continue
                    dialog = item.runtime.first_run_dialog(screen)
                    # One answer per dialog: give the screen time to move on before looking again.
                    if dialog is not None and time.monotonic() - item.answered_at > 0.7:
                        for key in dialog[1]:
                            self.tmux.send_keys(item.window_id, key)
                        item.answered_at = time.monotonic()
                time.sleep(0.1)
        finally:
            self._starting.clear()
            self._handovers = {k: h for k, h in self._handovers.items() if h.pending()}
        return failures

    def _ensure_session(self) -> None:
        if self.tmux.has_session(self.session):
            return
        anchor = [sys.executable, "-m", "legion.runtime.anchor"]
        try:
            self.tmux.new_session(self.session, ANCHOR_WINDOW, anchor, self.project.root)
        except TmuxError:
            if not self.tmux.has_session(self.session):  # else another process made it first
                raise

    def windows(self) -> list[Window]:
        """The project's windows. Raises `TmuxUnavailable` when tmux cannot say which run: that
        is unknown, never "none"."""
        return self.tmux.list_windows(self.session)

    def expect_start(
        self, issue: str, window_id: str, transcript: Path, size_before: int, runtime: AgentRuntime
    ) -> None:
        """Note a worker's start, for `await_starts` to see through its first-run dialogs."""
        self._starting.append(_Starting(issue, window_id, transcript, size_before, runtime))

    def close_retired(self, window: Window) -> None:
        """Close a retired worker's window, waiting for its process."""
        pid = None if window.pane_dead else window.pane_pid
        self.tmux.kill_window(window.id, pane_pid=pid)

    def revoke(self, sid: str) -> None:
        """Revoke session `sid`'s relay capability (it is retired)."""
        if self.capabilities is not None:
            self.capabilities.revoke_session(sid)

    # -- what callers need of the sessions' windows (none reaches for tmux) -------------------

    def controller_window(self) -> Window | None:
        """The controller's window (dead or alive), or None when there is none."""
        return self.tmux.find_window(self.session, CONTROLLER_WINDOW)

    def live_window(self, sid: str) -> Window | None:
        """The live window running session `sid`, or None."""
        return self.tmux.live_tagged(self.session, sid)

    def screen(self, window_id: str, lines: int = 60) -> str:
        """What the window shows (its last `lines`), as text: what the terminal has already
        acted on."""
        return self.tmux.capture(window_id, lines=lines)

    def close_window(self, window_id: str) -> None:
        """Close a window (a stuck worker's: the reconciler restarts its session)."""
        self.tmux.kill_window(window_id)

    def attach_command(self, window_id: str, environ: Mapping[str, str]) -> Attach:
        """How this terminal opens the window read-write (`legion attach`, the TUI)."""
        return self.tmux.attach_command(self.session, window_id, environ)

    def type_prompt(self, window_id: str, text: str, transcript: Path, mark: int) -> bool:
        """Type a prompt into an idle session, confirmed (`legion.sessions.prompting`)."""
        return prompting.type_prompt(self.tmux, window_id, text, transcript, mark)

    def check_tmux(self) -> None:
        """Raise when tmux cannot be run."""
        self.tmux.run("-V")

    def close_all(self) -> bool:
        """Close the project's tmux session, every window in it; False when there was none."""
        if not self.tmux.has_session(self.session):
            return False
        self.tmux.kill_session(self.session)
        return True
