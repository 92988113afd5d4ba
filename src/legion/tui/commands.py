"""What the human's keys do outside the app, through the same service functions as the CLI's
commands, so one place decides each (who may, which words a refusal has):

- kill (`k`/`K`): `legion kill`'s `agent_control.kill`, the agent's status looked at first;
- attach (`o`): `legion attach`'s `agent_control.attach_command`;
- a post's hand-over (a message sent, a question answered): `legion say`'s
  `messaging.hand_over` (the project's daemon told, or with none the message delivered now);
- a tracker question answered (the inbox): `legion feedback`'s `answer_from_person`;
- a worker started (`d` on the board): `legion dispatch`'s `dispatch_worker`.

A refusal is a `LegionError`, its words the CLI's. Kill, hand-over, feedback and dispatch may
wait on tmux, a session or a tracker, so the app calls them in worker threads, each with the
bus connection of its own thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from legion.tui.projects import ProjectFinder

if TYPE_CHECKING:
    from legion.bus import Bus
    from legion.bus.model import Agent, Posted
    from legion.core.model import Mode
    from legion.runtime.tmux import Attach
    from legion.services.agent_control import Killed


class Commands(Protocol):
    """The human's deeds outside the bus, as the CLI does them."""

    def kill(self, bus: Bus, target: Agent, *, force: bool) -> Killed:
        """The human ends `target`'s session (`force`: even mid-turn, SIGKILL at once); what
        was done (`Killed.said` says it as `legion kill` does)."""
        ...

    def attach(self, bus: Bus, target: Agent, environ: Mapping[str, str]) -> Attach:
        """The tmux command that opens the agent's live window in the terminal whose
        environment is `environ`."""
        ...

    def hand_over(self, bus: Bus, posted: Posted) -> Mapping[str, str]:
        """After the human posted: the message handed over now, as after `legion say`; what
        became of it, by address of each addressee with a session (`HandOver` values)."""
        ...

    def give_feedback(
        self, project: str, issue: str, text: str, *, author: str | None = None
    ) -> str:
        """Answer `issue` of project `project` (its name on the bus), as `legion feedback`
        does, from `author` (default: whoever runs this); the issue's identifier."""
        ...

    def dispatch(self, project: str, issue: str, mode: Mode) -> str:
        """Start `mode`'s worker for `issue` of project `project` (as the board named it), as
        `legion dispatch` does; what was started, in a line."""
        ...


class ServiceCommands:
    """`Commands` on the projects of this machine, through Legion's service layer."""

    def __init__(
        self,
        env: Mapping[str, str],
        cwd: Path,
        known_projects: Callable[[], Mapping[str, Path]],
    ) -> None:
        self.env = env
        self.projects = ProjectFinder(env, cwd, known_projects)

    def kill(self, bus: Bus, target: Agent, *, force: bool) -> Killed:
        from legion.services.agent_control import kill

        return kill(bus, bus.human(), target, force=force, env=self.env)

    def attach(self, bus: Bus, target: Agent, environ: Mapping[str, str]) -> Attach:
        from legion.services.agent_control import attach_command

        return attach_command(bus, target, environ)

    def hand_over(self, bus: Bus, posted: Posted) -> Mapping[str, str]:
        from legion.services.messaging import hand_over

        # The project whose daemon is told is the channel's: the human speaks there.
        channel = posted.message.channel
        return hand_over(bus, posted, self.env, lambda: self.projects.named(channel.project))

    def give_feedback(
        self, project: str, issue: str, text: str, *, author: str | None = None
    ) -> str:
        # `legion feedback`'s own function: the same check, author and wake-up. `author`: the
        # person the web view knows (by their token); else whoever runs this.
        from legion.reconcile.humans import answer_from_person
        from legion.store.actionlog import ActionLog, OutcomeKind

        found = self.projects.named(project)
        with self.projects.backends(found) as backends:
            updated, _ = answer_from_person(found, backends.tracker, issue, text, author=author)
            if author is not None:
                ActionLog(backends.db).append(
                    updated.identifier, "feedback", OutcomeKind.DONE, "answered", author=author
                )
        return updated.identifier

    def dispatch(self, project: str, issue: str, mode: Mode) -> str:
        # `legion dispatch`'s own function: the same refusals (a worker's session, a live
        # worker, an issue blocked by one not Done).
        from legion.services.dispatch import dispatch_worker

        found = self.projects.named(project)
        with self.projects.backends(found) as backends:
            view = dispatch_worker(found, backends, issue, mode, env=self.env)
        record = view.record
        return (
            f"{record.issue}: {mode.value} worker started in window {record.window} "
            f"(session {record.session_id})"
        )
