"""The session supervisor: starts (or resumes) any session, the controller's or a worker's, in
its tmux window, and stops it. The windows themselves are `legion.sessions.windows`'s; waiting
for a worker's start is `legion.sessions.start_watch`'s.

Starting is one code for every session: whatever still runs that session, or holds its
window's name, is closed first and its process waited for (one session never runs in two
processes, even for a moment); its environment is the dispatcher's without what must not reach
a session; it gets its own relay capability and its agent on the bus; it is launched through a
private named pipe (`legion.runtime.launch`), so its environment is never on a command line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from legion import proxy
from legion.bus.model import Agent, AgentStatus
from legion.config import Project
from legion.core.admission import Reason, StartFacts, refusal
from legion.daemon_link import daemon_ready, running_pid, wake_fifo
from legion.diagnostics.tracing import span
from legion.errors import NoDaemonError
from legion.files.private import write_private
from legion.fleet.hosts import host_name
from legion.git import main_git_dir, worktree_place
from legion.relay import socket_path
from legion.relay.capabilities import Capabilities
from legion.runtime import launch
from legion.runtime.base import AgentRuntime
from legion.runtime.tmux import process_args, session_processes, wait_for_exit
from legion.sessions.confinement import SessionConfinement
from legion.sessions.session_spec import (
    SessionSpec,
    base_environment,
    with_model_access,
    with_relay,
)
from legion.sessions.start_watch import StartWatch
from legion.sessions.windows import SessionWindows
from legion.workspaces import issue_repo
from legion.workspaces.setup import (
    Plan,
)

logger = logging.getLogger(__name__)

# How long a start waits for a daemon that runs but does not serve sessions yet (it starts
# its relay and model proxy first: a fleet's daemon joins its fleet before).
DAEMON_READY_WAIT = 30.0


class SessionSupervisor:
    def __init__(
        self,
        project: Project,
        windows: SessionWindows,
        starts: StartWatch,
        env: Mapping[str, str],
        capabilities: Capabilities | None = None,
        *,
        relay: bool = False,
    ) -> None:
        """`starts`: where a new window's launch is noted, for the wait for starts.
        `capabilities`: where each session's capability is minted (None: sessions get none,
        and reach the model directly); `relay`: whether the project's sessions reach the
        tracker and forge through the daemon (their capability and its socket are then in
        their environment)."""
        self.project = project
        self.windows = windows
        self.starts = starts
        self.env = env
        self.capabilities = capabilities
        self.relay = relay and capabilities is not None
        # The fleet host this is: each session says so (`HOST_ENV`), and only this host's
        # leftovers of a session are stopped before it starts again.
        self.host = host_name(project.settings)

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
        trace = issue or "-"
        mode = extra_env.get("LEGION_MODE", "")
        self.require_daemon()
        with span("start: prepare the runtime", trace):
            runtime.command(sid, prompt, resume=False)  # the CLI is there: fail before closing
            # Its sandbox: one that is required and cannot be had fails here too.
            sandbox = self.confinement.sandbox()
        env = base_environment(
            self.env,
            runtime.environment(self.env),
            repo=self.project.root,
            wake=wake_fifo(self.project),
            host=self.host,
            python_dir=Path(sys.executable).parent,
            extra=extra_env,
        )
        with span("start: close leftovers", trace):
            self.windows.ensure_session()
            for window in self.windows.list():
                if window.name == name or window.tag == sid:
                    self.windows.close_and_wait(window)
            self.stop_stray(sid)
            self.windows.ensure_session()  # closing the last window ends the session
        # Minted once the leftovers are closed: closing one revokes its session's capability.
        access = self._model_access(runtime.name)
        # The tracker and forge through the daemon, the embedded ones too, so that merges and
        # tracker writes are made there, outside any sandbox.
        relay = self.relay or self.capabilities is not None
        token: str | None = None
        if self.capabilities is not None and (relay or access is not None):
            with span("start: capability", trace):
                # Minted for this start: the session's earlier capability is revoked with it.
                token = self.capabilities.mint(issue, mode=mode, session_id=sid)
            if relay:
                env = with_relay(env, token, socket_path(self.project.state_dir))
        proxied = access is not None and access.holds(runtime.name) and token is not None
        env = with_model_access(runtime.name, env, access, token, proxied=proxied)
        # Its own home, made now that no process of it runs (`legion.runtime.homes`); your
        # login is shown in it only when the daemon holds no key for its CLI. From its own
        # variables: a key the daemon holds is approved nowhere a session reads.
        confined = sandbox is not None and sandbox.confined
        with span("start: its home", trace):
            env |= runtime.prepare(env, cwd, sid, own_login=not proxied, confined=confined)
        # Decided only now: a leftover that was starting may have written the transcript.
        transcript = runtime.transcript(cwd, sid)
        with span("start: register on the bus", trace):
            agent = self._register_on_bus(sid, mode, cwd, runtime.name)
        if agent is not None:
            # What the session's `legion ask`/`complete` carry: a replaced session's are stale.
            env["LEGION_SPAWN_INSTANCE"] = str(agent.spawn_instance)
        argv = runtime.command(
            sid,
            prompt,
            resume=_resumable(runtime, transcript),
            inbox=self.inbox_file(sid),
            context=self.context_file(sid),
        )
        if confined:
            confinement = self.confinement.for_session(
                sid,
                cwd,
                runtime,
                env,
                proxied=proxied,
                relayed=token is not None and relay,
                worker=issue is not None,
            )
            # A session on its own login (the daemon holds no key) keeps the network: its CLI
            # renews that login with its provider directly.
            # With its way to what `sandbox_egress` allows, for one with a network of its own
            # (the machine's reaches everything anyway) and a capability.
            argv = self.confinement.wrap(
                sandbox,
                argv,
                confinement,
                access if proxied else None,
                egress=self.confinement.egress(env, access) if proxied and relay else None,
            )
        spec = SessionSpec(name, sid, cwd, tuple(argv), env, issue, mode, confined)
        with span("start: open the window", trace):
            return self.launch(spec)

    def launch(self, spec: SessionSpec) -> str:
        """Open `spec`'s window, its command handed its argv and environment through a private
        named pipe (never on a command line); returns the window's id."""
        handover = launch.Handover(
            self.project.state_dir / "launch", list(spec.argv), spec.cwd, dict(spec.env)
        )
        handover.start()
        try:
            command = launch.command(handover.path)
            window = self.windows.start(spec.window, command, spec.cwd, tag=spec.session_id)
        except BaseException:
            handover.cancel()
            raise
        self.starts.launched(window.id, handover)
        if window.pane_pid is not None:
            with contextlib.suppress(OSError):  # only ever a help to the next start
                write_private(self._pid_file(spec.session_id), f"{window.pane_pid}\n")
        return window.id

    @property
    def confinement(self) -> SessionConfinement:
        """How this project's sessions are confined, as its settings are now."""
        return SessionConfinement(self.project, self.env, self.capabilities, self.session_folder)

    def setup_plan(self, issue: str, workspace: Path) -> Plan:
        """How `issue`'s workspace setup runs (`SessionConfinement.setup_plan`)."""
        return self.confinement.setup_plan(issue, workspace)

    def require_daemon(self) -> None:
        """Refuse a session's start while no daemon runs for the project: only under it does a
        session reach the model, the tracker and the bus without holding a key or seeing
        Legion's state (docs/security.md, "Sessions run in a sandbox"). A daemon that runs but
        does not serve sessions yet (`Reason.DAEMON_STARTING`) is waited for, a while."""
        root = str(self.project.root)
        deadline = time.monotonic() + DAEMON_READY_WAIT
        waited = False
        while True:
            hosted = running_pid(self.project) is not None
            serving = daemon_ready(self.project) if hosted else None
            refused = refusal(StartFacts(hosted=hosted, serving=serving, daemon_for=root))
            if refused is None:
                return
            if refused.reason is not Reason.DAEMON_STARTING:
                if waited:
                    raise NoDaemonError(f"the daemon for {root} stopped as it started")
                raise NoDaemonError(refused.detail)
            if time.monotonic() > deadline:
                raise NoDaemonError(
                    f"the daemon for {root} has not started serving sessions in "
                    f"{DAEMON_READY_WAIT:.0f} s (what it says, where `legion start` runs); try "
                    "again once it has"
                )
            waited = True
            time.sleep(0.05)

    def stop_session(self, sid: str, *, force: bool = False) -> bool:
        """Close the window running session `sid` (SIGHUP, as tmux does, then SIGKILL after a
        grace period; `force`: SIGKILL at once) and wait for its process. True if one ran."""
        stopped = False
        self.windows.end(sid)  # its window may be gone while a stray process runs it
        if not self.windows.tmux.has_session(self.windows.session):
            return False
        for window in self.windows.list():
            if window.tag != sid:
                continue
            pid = None if window.pane_dead else window.pane_pid
            if force and pid is not None:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            self.windows.close_window(window, pane_pid=pid)
            stopped = stopped or pid is not None
        self.stop_stray(sid)
        return stopped

    def _model_access(self, runtime: str) -> proxy.ProxyAccess | None:
        """How a session of `runtime` reaches the model through the project's running daemon
        (with none, the session is given the credential, as before the proxy): None when the
        proxy does not serve that runtime, or when no capability can be minted for it."""
        if proxy.model_route(runtime) is None or self.capabilities is None:
            return None
        found = proxy.read_access(self.project.state_dir)
        if found is None or not proxy.serves(runtime, found):
            return None  # served on its own login only when it says so; others with a key
        return found

    def _pid_file(self, sid: str) -> Path:
        return self.project.state_dir / "sessions" / f"{sid}.pid"

    def session_folder(self, sid: str) -> Path:
        """What of Legion's state is session `sid`'s own: its inbox and context files, the one
        folder of the state a confined session may write (`legion.sandbox`)."""
        return self.project.state_dir / "sessions" / sid

    def inbox_file(self, sid: str) -> Path:
        """Messages waiting for session `sid`'s next turn boundary (its hooks hand them over)."""
        return self.session_folder(sid) / "inbox.json"

    def context_file(self, sid: str) -> Path:
        """What a resumed or compacted session `sid` is given back (its SessionStart hook)."""
        return self.session_folder(sid) / "context.md"

    def _register_on_bus(self, sid: str, mode: str, workspace: Path, runtime: str) -> Agent | None:
        """Record the session as an agent on the bus, before its process can post. The bus is
        a help to the session, never a condition of it: a failure is reported and the session
        starts all the same."""
        from legion.bus import open_bus
        from legion.bus.sessions import register_session

        try:
            # Its branch read at the git folders Legion made, never found from the workspace
            # (whose `.git` the worker writes): a tampered one is said, and not registered.
            git_dir = main_git_dir(self.project.root)
            found = None
            if git_dir is not None and workspace != self.project.root:
                found = issue_repo.place_at(git_dir, workspace)  # a worker's
            at = found or worktree_place(self.project.root, workspace)
            bus = open_bus(self.env)
            try:
                return register_session(
                    bus,
                    self.project,
                    mode=mode,
                    session_id=sid,
                    workspace=workspace,
                    runtime=runtime,
                    at=at,
                )
            finally:
                bus.close()
        except Exception as exc:  # whatever it is, the worker still starts
            logger.warning(
                "session %s not registered on the bus: %s: %s",
                sid,
                type(exc).__name__,
                exc,
                extra={"session": sid},
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
            logger.warning(
                "session %s's agent not marked %s: %s: %s",
                sid,
                status.value,
                type(exc).__name__,
                exc,
                extra={"session": sid},
            )

    def bring_back(self, sid: str) -> None:
        """Session `sid`'s agent prompted or attached to again: an archived one is back in the
        lists (`legion.bus.actions.unarchive`). A help, as `mark_on_bus`: a failure is said in
        the log and the prompt or the attach goes on."""
        from legion.bus import actions, open_bus

        try:
            bus = open_bus(self.env)
            try:
                agent = bus.agent_by_session(sid)
                if agent is not None:
                    actions.unarchive(bus, agent)
            finally:
                bus.close()
        except Exception as exc:
            logger.warning(
                "session %s's agent not brought back: %s: %s", sid, type(exc).__name__, exc
            )

    def stop_stray(self, sid: str, *, force: bool = False) -> None:
        """End every process still running session `sid` outside the windows tmux shows, and
        wait for each: one session never runs in two processes, even for a moment. Such a
        process is one whose window is gone while it lives on: its tmux server died (killed,
        crashed) and took the window, not always the process at once; a Legion process was
        killed while it waited for one to exit after closing its window; a process the CLI
        forked for a tool outlived its parent. Found on their command lines (`/proc`), and
        the one last started on the session (its pid file: a launcher not yet the CLI, or
        where there is no /proc). Whose each is is checked on its command line, so a reused pid
        is safe. `force`: SIGKILL at once (a fleet host whose lease lapses: another host may
        start the session any moment; its transcript is resumed there, a torn last line and
        all)."""
        pids = set(session_processes(sid, self.host))
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
                # SIGHUP: what tmux sends when it closes a window
                os.kill(stray, signal.SIGKILL if force else signal.SIGHUP)
        for stray in sorted(pids):
            wait_for_exit(stray, grace=0.0 if force else None)


def _resumable(runtime: AgentRuntime, transcript: Path) -> bool:
    """Whether the session is resumed from `transcript`: it holds a conversation. One with none
    (a CLI that died before it recorded its first prompt, or a checkpoint taken then) cannot be
    resumed, and keeps the session id from being started afresh: it is set aside, beside where
    it was."""
    summary = runtime.summarize(transcript)
    if summary is None:
        return False
    if summary.entries > 0:
        return True
    with contextlib.suppress(OSError):
        transcript.replace(transcript.with_name(f"{transcript.name}.no-conversation"))
    return False
