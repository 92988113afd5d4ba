"""What the sidebar's keys do to the highlighted agent, as the CLI's commands do: `o` attaches
its live session (`legion attach`), `a` archives it (`legion archive`), `k`/`K` kill it
(`legion kill`, `K` even in the middle of a turn). Archive and kill ask first (`Confirm`).
Archive is `legion.bus.actions.archive`; kill and attach are the CLI's own
(`legion.tui.commands`), so their refusals are the CLI's words."""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Callable

from textual.app import App, SuspendNotSupported

from legion.bus import Bus, actions
from legion.bus.model import Agent
from legion.errors import LegionError
from legion.runtime.tmux import Attach
from legion.tui.commands import Commands
from legion.tui.modals import Confirm
from legion.tui.present import one_line

NO_AGENT = "highlight an agent in the sidebar first"


class AgentActions:
    """`bus` is the app's own connection (archive and attach run on the app's thread); a kill
    runs in a worker thread with a connection of its own (`open_bus`), since closing a window
    waits for its process. `changed` is called after the bus was written (the watcher reads it)."""

    def __init__(
        self,
        app: App[int],
        bus: Bus,
        human: Agent,
        open_bus: Callable[[], Bus],
        commands: Commands,
        changed: Callable[[], None],
    ) -> None:
        self.app = app
        self.bus = bus
        self.human = human
        self.open_bus = open_bus
        self.commands = commands
        self.changed = changed

    def archive(self, target: Agent | None) -> None:
        if target is None:
            self.app.notify(NO_AGENT, severity="warning")
            return

        def archive(yes: bool | None) -> None:
            if not yes:
                return
            try:
                done = actions.archive(self.bus, self.human, target)
            except LegionError as exc:
                self.app.notify(str(exc), severity="error", markup=False)
                return
            self.app.notify(f"archived @{done.address}")
            self.changed()

        self.app.push_screen(Confirm(f"Archive @{target.address}? y/n"), archive)

    def kill(self, target: Agent | None, force: bool) -> None:
        if target is None:
            self.app.notify(NO_AGENT, severity="warning")
            return
        question = (
            f"Force-kill @{target.address}, even in the middle of a turn (SIGKILL)? y/n"
            if force
            else f"Kill @{target.address}? y/n"
        )

        def kill(yes: bool | None) -> None:
            if yes:
                self.app.run_worker(
                    functools.partial(self._kill, target, force), thread=True, group="kill"
                )

        self.app.push_screen(Confirm(question), kill)

    def _kill(self, target: Agent, force: bool) -> None:
        bus = self.open_bus()
        try:
            killed = self.commands.kill(bus, target, force=force)
        except LegionError as exc:
            hint = " (K kills it anyway)" if "busy" in str(exc) and not force else ""
            self.app.call_from_thread(self.app.notify, f"{exc}{hint}", severity="error")
            return
        finally:
            bus.close()
        self.app.call_from_thread(self.app.notify, killed.said)  # as `legion kill` says it

    def attach(self, target: Agent | None) -> None:
        """The agent's live session in this terminal, read-write. Outside Legion's tmux
        server the TUI steps aside until the human detaches (C-b d); inside it, the tmux
        client switches to the agent's window and the TUI runs on in its own."""
        if target is None:
            self.app.notify(NO_AGENT, severity="warning")
            return
        try:
            found = self.commands.attach(self.bus, target, os.environ)
        except LegionError as exc:
            self.app.notify(one_line(str(exc)), severity="error")
            return
        try:
            if found.switched:
                self._run_tmux(found)
            else:
                with self.app.suspend():
                    self._run_tmux(found)
        except SuspendNotSupported:
            self.app.notify(
                f"this terminal cannot hand over: run `legion attach {target.address}`",
                severity="error",
            )
            return
        self.app.refresh()

    def _run_tmux(self, attach: Attach) -> None:
        done = subprocess.run(attach.argv, env=attach.env, check=False)
        if done.returncode != 0:
            self.app.notify(f"tmux could not attach (exit {done.returncode})", severity="error")
