"""What the web view reads and does, through the TUI's read models and the CLI's service
functions: the boards (`legion state`'s), the questions waiting on the trackers (`legion
feedback`'s) and a person's answer to one. The web layer decides nothing of its own here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from legion.bus.model import Channel
from legion.errors import InputError, LegionError
from legion.services.channels import ChannelView
from legion.services.issue_view import IssuePage, IssueView
from legion.tui.sources import ActionLogView, Board, ProjectSources, TrackerInbox, Unavailable

if TYPE_CHECKING:
    from legion.backends import Backends
    from legion.bus import Bus
    from legion.bus.model import Message
    from legion.config import Project
    from legion.fleet.hosts import Host
    from legion.services.spend import Spend
    from legion.store.changes import StoreSignal

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Channels:
    """The bus's channels, the one selected with its messages, or why none can be read."""

    found: list[ChannelView]
    selected: ChannelView | None
    trouble: str = ""


def _once(*parts: str) -> str:
    """A post's id from what makes it the same post: the same words of the same person in the
    same place (a form sent twice) post once."""
    import hashlib
    import uuid

    seed = hashlib.sha256("\0".join(parts).encode()).hexdigest()
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"legion-web:{seed}"))


@dataclass(frozen=True, slots=True)
class Inbox:
    """Every question waiting for a person."""

    trackers: TrackerInbox
    bus: list[Message] | str  # the bus's questions to the human, oldest first; why not


LOG_LINES = 200  # the last actions and events shown of each project
ISSUES_KEPT = 256  # issues whose tracker part is kept between reads


class WebReads(Protocol):
    def boards(self) -> list[Board | Unavailable]:
        """Each project's board: those the bus knows, and the one `legion web` runs in."""
        ...

    def inbox(self) -> Inbox:
        """Every question waiting for a person: the trackers' and the bus's."""
        ...

    def board_stamp(self) -> object:
        """Cheap: what, unchanged since the last `boards`, means they are the same (as far as
        this machine's files show); None when it cannot tell."""
        ...

    def inbox_stamp(self) -> object:
        """As `board_stamp`, for `inbox`."""
        ...

    def log_stamp(self) -> object:
        """As `board_stamp`, for `logs` (whatever its filter)."""
        ...

    def spend_stamp(self) -> object:
        """As `board_stamp`, for `spend`."""
        ...

    def logs(self, issue: str | None) -> list[ActionLogView | Unavailable]:
        """Each project's last actions and its agents' events (`legion log`'s, `legion
        events`'), newest last; `issue`: those about that issue only."""
        ...

    def spend(self) -> list[tuple[str, Spend | Unavailable]]:
        """Each project's spend (`legion usage`'s ledger), by its name."""
        ...

    def hosts(self) -> list[tuple[str, tuple[list[Host], float] | Unavailable]]:
        """Each project's fleet (`legion hosts`'): its hosts and the store's time now."""
        ...

    def drain(self, project: str, host: str, *, undo: bool, author: str) -> str:
        """`legion host drain`'s, by a person (in the action log with their name); what was
        done, in a line."""
        ...

    def channels(self, selected: Channel | None) -> Channels:
        """The bus's channels and agents, and the messages of `selected`."""
        ...

    def bus_stamp(self) -> object:
        """As `board_stamp`, for the bus (`channels`)."""
        ...

    def has_channel(self, channel: Channel) -> bool:
        """Whether the bus has `channel` (an agent there, or a message)."""
        ...

    def say(self, channel: Channel, text: str, author: str) -> str:
        """A person's post in `channel` (`legion say`'s, handed over at once); what was
        done, in a line."""
        ...

    def agent_action(self, agent_id: int, action: str, author: str) -> str:
        """`archive`, `kill` or `force-kill` of agent `agent_id` by a person (`legion
        archive`'s and `legion kill`'s); what was done, in a line."""
        ...

    def has_project(self, name: str) -> bool:
        """Whether a project of that name (on the bus, or the one here) is shown."""
        ...

    def issue(self, project: str, identifier: str) -> IssuePage | Unavailable:
        """Issue `identifier` of project `project` (its name on the bus), as its page shows
        it; why not, when it cannot be read (no such project or issue)."""
        ...

    def answer(self, project: str, issue: str, text: str, author: str) -> str:
        """A person's answer to the question waiting on `issue` (`legion feedback`'s path);
        what was done, in a line. A refusal is a `LegionError`."""
        ...

    def reply(self, question: str, text: str, author: str) -> str:
        """A person's answer to the bus's question `question` (`legion reply`'s path, then
        handed over as `legion say` hands over); what was done, in a line."""
        ...


class MachineReads:
    """`WebReads` on the projects of this machine (or, on a PostgreSQL store, its fleet's)."""

    def __init__(self, env: Mapping[str, str], cwd: Path) -> None:
        from legion.tui.commands import ServiceCommands

        self.env = env
        self.sources = ProjectSources(env, cwd, self._known)
        self.commands = ServiceCommands(env, cwd, self._known)
        # An issue's tracker and forge part, and when it was read (a service's: `issue`).
        # With the issue's `updated_at` as the daemon's pass last read it, when it had one.
        self._issues: dict[tuple[str, str], tuple[IssueView | Unavailable, float, str | None]] = {}
        # The files the last read of each view depended on (`Board.watched`).
        self._watched: dict[str, tuple[Path | StoreSignal, ...] | None] = {
            "board": None,
            "inbox": None,
            "log": None,
            "spend": None,
            "hosts": None,
        }

    def _known(self) -> dict[str, Path]:
        from legion.bus import open_bus

        bus = open_bus(self.env)
        try:
            return bus.projects()
        finally:
            bus.close()

    def project_names(self) -> list[str | None]:
        """The projects shown: the bus's, and the one here (None) when the bus has it not."""
        try:
            names: list[str | None] = list(sorted(self.sources.projects.known()))
        except LegionError:
            names = []
        here = self.sources.project(None)
        if isinstance(here, Unavailable):
            return names or [None]
        from legion.tui.projects import name_of

        if name_of(here) not in names:
            names.insert(0, None)
        return names

    def _each(
        self, view: str, read: Callable[[Project, Backends], T]
    ) -> list[tuple[str, T | Unavailable]]:
        """`read` of each project shown, by its name; why not, for one that cannot be read.
        The projects' stores are what view `view` depended on."""
        from legion.store.changes import store_watch
        from legion.tui.projects import name_of

        found: list[tuple[str, T | Unavailable]] = []
        files: list[Path | StoreSignal] | None = []
        for name in self.project_names():
            project = self.sources.project(name)
            if isinstance(project, Unavailable):
                found.append((name or "?", project))
                files = None
                continue
            shown = name or name_of(project)
            if files is not None:
                files += store_watch(project)
            try:
                with self.sources.projects.backends(project) as backends:
                    found.append((shown, read(project, backends)))
            except LegionError as exc:
                found.append((shown, Unavailable(f"{shown}: {exc}")))
                files = None
        self._watched[view] = None if files is None else tuple(files)
        return found

    def spend(self) -> list[tuple[str, Spend | Unavailable]]:
        from legion.services.spend import read_spend

        return self._each("spend", read_spend)

    def hosts(self) -> list[tuple[str, tuple[list[Host], float] | Unavailable]]:
        from legion.fleet.hosts import Fleet

        def read(project: Project, backends: Backends) -> tuple[list[Host], float]:
            return Fleet(backends.db).hosts(project.settings.host_timeout)

        return self._each("hosts", read)

    def drain(self, project: str, host: str, *, undo: bool, author: str) -> str:
        from legion.fleet.hosts import Fleet
        from legion.store.actionlog import ActionLog, OutcomeKind

        found = self.sources.projects.named(project)
        with self.sources.projects.backends(found) as backends:
            Fleet(backends.db).drain(host, draining=not undo)
            what = "taken back" if undo else "draining"
            ActionLog(backends.db).append(
                "-", "host_drain", OutcomeKind.DONE, f"{host} {what}", author=author
            )
        return f"{host}: {what}"

    def channels(self, selected: Channel | None) -> Channels:
        from legion.bus import open_bus
        from legion.services.channels import ChannelView, channels, read_channel

        try:
            bus = open_bus(self.env)
            try:
                found = channels(bus)
                shown = None
                for view in found:
                    if view.channel == selected:
                        shown = ChannelView(view.channel, view.agents, read_channel(bus, selected))
            finally:
                bus.close()
        except LegionError as exc:
            return Channels([], None, f"the bus cannot be read: {exc}")
        return Channels(found, shown)

    def has_channel(self, channel: Channel) -> bool:
        from legion.bus import open_bus
        from legion.services.channels import channels

        try:
            bus = open_bus(self.env)
            try:
                return channel in {view.channel for view in channels(bus)}
            finally:
                bus.close()
        except LegionError:
            return False

    def bus_stamp(self) -> object:
        return _stamp(_bus_watch(self.env))

    def _known_channel(self, bus: Bus, channel: Channel) -> None:
        from legion.services.channels import channels

        if channel not in {view.channel for view in channels(bus)}:
            raise InputError(f"no channel {channel} on the bus (the Channels page lists them)")

    def say(self, channel: Channel, text: str, author: str) -> str:
        from legion.bus import actions, open_bus
        from legion.core.text import clean_comment
        from legion.services.messaging import hand_over, wakes_said

        clean_comment(text)
        bus = open_bus(self.env)
        try:
            self._known_channel(bus, channel)
            # A form sent twice (a double click) posts once; the same words said again a
            # minute later are a new message.
            minute = str(int(time.time() // 60))
            message_id = _once("say", str(channel), author, text, minute)
            posted = actions.say(bus, bus.human(), channel, text, message_id=message_id)
            if not posted.created:
                return "posted already"
            hand_over(bus, posted, self.env, lambda: self.sources.projects.named(channel.project))
        finally:
            bus.close()
        self._log(channel.project, "say", f"in {channel}", author)
        return wakes_said(posted)

    def agent_action(self, agent_id: int, action: str, author: str) -> str:
        from legion.bus import actions, open_bus
        from legion.services.agent_control import kill

        bus = open_bus(self.env)
        try:
            target = bus.agent(agent_id)
            human = bus.human()
            if action == "archive":
                actions.archive(bus, human, target)
                said = f"@{target.address} archived"
            elif action in ("kill", "force-kill"):
                killed = kill(bus, human, target, force=action == "force-kill", env=self.env)
                said = killed.said
                if not (killed.stopped or killed.marked):
                    return said  # nothing was done: nothing to log
            else:
                raise InputError(f"no such action {action!r}: archive, kill or force-kill")
        finally:
            bus.close()
        self._log(target.project, action.replace("-", "_"), f"@{target.address}", author)
        return said

    def _log(self, project: str, action: str, detail: str, author: str) -> None:
        """A person's deed in the project's action log (a project gone meanwhile: none)."""
        from legion.store.actionlog import ActionLog, OutcomeKind

        try:
            found = self.sources.projects.named(project)
            with self.sources.projects.backends(found) as backends:
                ActionLog(backends.db).append("-", action, OutcomeKind.DONE, detail, author=author)
        except LegionError:
            pass

    def has_project(self, name: str) -> bool:
        try:
            if name in self.sources.projects.known():
                return True
        except LegionError:
            pass
        here = self.sources.project(None)
        from legion.tui.projects import name_of

        return not isinstance(here, Unavailable) and name_of(here) == name

    def boards(self) -> list[Board | Unavailable]:
        names = self.project_names()
        found = [self.sources.board(name) for name in names]
        boards = [board for board in found if isinstance(board, Board)]
        # Every project's board read, each wholly here, or it cannot tell.
        whole = len(boards) == len(found) and all(board.watched for board in boards)
        watched = tuple(path for board in boards for path in board.watched)
        self._watched["board"] = watched if whole else None
        return found

    def inbox(self) -> Inbox:
        from legion.bus import open_bus
        from legion.bus.actions import human_inbox

        found = self.sources.tracker_questions()
        watched: tuple[Path | StoreSignal, ...] | None = found.watched or None
        if found.troubles:
            watched = None
        try:
            bus = open_bus(self.env)
            try:
                asked: list[Message] | str = human_inbox(bus)
            finally:
                bus.close()
        except LegionError as exc:
            asked, watched = f"the bus's questions cannot be read: {exc}", None
        if watched is not None:
            watched = (*watched, *_bus_watch(self.env))
        self._watched["inbox"] = watched
        return Inbox(found, asked)

    def reply(self, question: str, text: str, author: str) -> str:
        from legion.bus import open_bus
        from legion.bus.actions import reply
        from legion.core.text import clean_comment
        from legion.services.messaging import hand_over

        clean_comment(text)
        reply_id = _once("reply", question, author, text)
        bus = open_bus(self.env)
        try:
            posted = reply(bus, bus.human(), question, text, reply_id=reply_id)
            project = posted.message.project
            hand_over(bus, posted, self.env, lambda: self.sources.projects.named(project))
        finally:
            bus.close()
        asked = ", ".join(f"@{agent.address}" for agent in posted.recipients) or "nobody"
        self._log(project, "reply", f"{asked} answered", author)
        return f"answered {asked}"

    def logs(self, issue: str | None) -> list[ActionLogView | Unavailable]:
        from legion.store.changes import store_watch

        names = self.project_names()
        found = [self.sources.action_log(name, LOG_LINES) for name in names]
        files: list[Path | StoreSignal] = []
        for name in names:
            project = self.sources.project(name)
            if not isinstance(project, Unavailable):
                files += store_watch(project)
        files += _bus_watch(self.env)
        self._watched["log"] = (
            tuple(files) if all(isinstance(f, ActionLogView) for f in found) else None
        )
        if issue is None:
            return found
        return [
            log
            if isinstance(log, Unavailable)
            else ActionLogView(
                log.project, tuple(line for line in log.lines if line.about == issue)
            )
            for log in found
        ]

    def board_stamp(self) -> object:
        return _stamp(self._watched["board"])

    def inbox_stamp(self) -> object:
        return _stamp(self._watched["inbox"])

    def log_stamp(self) -> object:
        return _stamp(self._watched["log"])

    def spend_stamp(self) -> object:
        return _stamp(self._watched["spend"])

    def issue(self, project: str, identifier: str) -> IssuePage | Unavailable:
        """Where the project's tracker or forge is a service (Linear, GitHub), its part of the
        page is asked of it at most every `SLOW_S` (an open page must not spend the rate
        limit the swarm needs), and at once when the daemon's pass saw the issue change (its
        `updated_at` in the pass's reading: `reconcile.last_read`); the rest, on this machine,
        each read."""
        from legion.reconcile.last_read import LastRead
        from legion.services.issue_view import read_issue, read_issue_page
        from legion.tui.sources import announced
        from legion.web.live import SLOW_S

        key = (project, identifier)
        try:
            found = self.sources.projects.named(project)
            with self.sources.projects.backends(found) as backends:
                view = None
                if not announced(found):
                    seen = LastRead(backends.db).fresh()
                    changed = None if seen is None else seen.updated(identifier)
                    cached = self._issues.get(key)
                    if (
                        cached is None
                        or time.monotonic() - cached[1] > SLOW_S
                        or (changed is not None and changed != cached[2])
                    ):
                        try:
                            read = read_issue(found, backends, identifier)
                            cached = (read, time.monotonic(), changed)
                        except LegionError as exc:
                            cached = (Unavailable(str(exc)), time.monotonic(), changed)
                        if len(self._issues) > ISSUES_KEPT:
                            self._issues.clear()  # pages of issues long closed
                        self._issues[key] = cached
                    if isinstance(cached[0], Unavailable):
                        return cached[0]
                    view = cached[0]
                return read_issue_page(found, backends, project, identifier, self.env, view)
        except LegionError as exc:
            return Unavailable(str(exc))

    def answer(self, project: str, issue: str, text: str, author: str) -> str:
        identifier = self.commands.give_feedback(project, issue, text, author=author)
        return f"{identifier}: answered; the worker gets it in its own session"


def _bus_watch(env: Mapping[str, str]) -> tuple[Path | StoreSignal, ...]:
    """What tells that the bus changed: its SQLite files, or, in a fleet's PostgreSQL, its
    schema's change signal (the bus's store NOTIFYs as each write commits)."""
    from legion.bus import bus_path, bus_store
    from legion.bus.postgres_schema import SCHEMA
    from legion.store.changes import StoreSignal

    url = bus_store(env)
    if url is not None:
        return (StoreSignal(url, SCHEMA),)
    path = bus_path(env)
    return (path, path.with_name(path.name + "-wal"))


def _stamp(files: tuple[Path | StoreSignal, ...] | None) -> object:
    """Each file's size and modification time (None for one missing), each PostgreSQL store's
    count of changes; None: cannot tell (nothing watched, or a store not listened to)."""
    from legion.store.changes import StoreSignal, stamp_of

    if not files:
        return None
    stamps: list[tuple[int, int] | None] = []
    for path in files:
        if isinstance(path, StoreSignal):
            counted = stamp_of(path)
            if counted is None:
                return None  # not listening: cannot tell
            stamps.append(counted)
            continue
        try:
            # A transcript is a session's to replace by a link: never followed.
            status = path.lstat()
        except OSError:
            stamps.append(None)
            continue
        stamps.append((status.st_size, status.st_mtime_ns))
    return tuple(stamps)
