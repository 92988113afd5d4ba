"""What a session Legion started does as itself through the daemon's relay: talk on the bus
(`legion say`, `ask`, `reply`, `complete`, `messages`), be given its wake-up context (its
hooks), and read Legion's own records of its issue (`legion issue show`'s tokens).

Who the session is comes from its capability, the scope the daemon minted for it when it
started it (`legion.relay.capabilities`): its session id, its mode, its issue. Never from its
environment: a worker that unsets `LEGION_SESSION_ID`, or sets it to the controller's, is still
the worker its capability says. So a confined session (`legion.sandbox`) sees neither the bus
nor the project's database, and needs neither.

Server side, `session_ops` are the operations the daemon adds to its relay's (the tracker's
and the forge's, `legion.relay.server`). Client side, the functions below are what the CLI
calls on a session's relay client (`legion.relay.client.session_client`); the hooks fetch the
wake-up context with `legion.relay.wake_up_fetcher`.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from legion.bus.model import Agent, Channel, Message, MessageKind, Posted
from legion.config import Project
from legion.core import roles
from legion.core.ids import issue_for_branch
from legion.core.model import CONTROLLER_MODE
from legion.core.usage import Usage
from legion.errors import InputError, LegionError, NotFoundError, NotPermittedError, ProtocolError
from legion.fleet.hosts import LEASE_ENV
from legion.relay import CAPABILITY_ENV, RUN_BY_DAEMON_ENV, SOCKET_ENV, socket_path
from legion.relay.capabilities import Capabilities

if TYPE_CHECKING:
    from legion.bus import Bus
    from legion.relay.client import RelayClient
    from legion.relay.operations import Call, Deferred, Operation
    from legion.sessions.workers import WorkerManager


# -- the daemon's side -------------------------------------------------------------------------


def session_ops(
    project: Project,
    env: Mapping[str, str],
    *,
    lease: Callable[[], tuple[str, int] | None] = lambda: None,
) -> dict[str, Operation]:
    """The relay operations of a session acting as itself, for the daemon of `project` (its
    environment `env` says where the bus is). `lease`: the daemon's lease while it leads (host,
    epoch), which a command it runs for a session writes under."""
    return _SessionOps(project, env, lease).ops()


class _SessionOps:
    def __init__(
        self,
        project: Project,
        env: Mapping[str, str],
        lease: Callable[[], tuple[str, int] | None],
    ) -> None:
        self.project = project
        self.env = dict(env)
        self.lease = lease

    def ops(self) -> dict[str, Operation]:
        return {
            "bus.say": self.say,
            "bus.ask": self.ask,
            "bus.reply": self.reply,
            "bus.complete": self.complete,
            "bus.read": self.read,
            "session.context": self.context,
            "records.usage": self.usage,
            "legion.run": self.run_command,
        }

    @contextlib.contextmanager
    def _bus(self) -> Iterator[Bus]:
        from legion.bus import open_bus

        bus = open_bus(self.env)
        try:
            yield bus
        finally:
            bus.close()

    def _workspace(self, call: Call) -> Path:
        """Where the session works, as Legion recorded it when it started it."""
        from legion.sessions.registry import Registry

        record = Registry(call.backends.db).by_session(call.scope.session_id)
        return record.workspace if record is not None else self.project.root

    def _speaker(self, call: Call, bus: Bus) -> Agent:
        """The session's agent on the bus: the capability's session, registered now if its
        start could not."""
        from legion.sessions.identity import identify

        scope = call.scope
        if not scope.session_id:
            raise NotPermittedError(
                "this capability names no session: only a session Legion started speaks as one"
            )
        variables = {"LEGION_SESSION_ID": scope.session_id, "LEGION_MODE": scope.mode}
        found = identify(bus, variables, self._workspace(call), lambda: self.project)
        return found.agent

    def _posted(self, bus: Bus, posted: Posted) -> dict[str, Any]:
        from legion.services.messaging import hand_over

        delivery = hand_over(bus, posted, self.env, lambda: self.project)
        return {
            "posted": posted,
            "delivery": {address: how.value for address, how in delivery.items()},
        }

    @staticmethod
    def _body(call: Call) -> str:
        """The message's text, held to the bus's rules here too: the socket is reachable
        without the CLI that checks them."""
        from legion.bus.validate import clean_message_body

        return clean_message_body(call.text("body"))

    @staticmethod
    def _id(call: Call, name: str) -> str | None:
        from legion.bus.validate import clean_message_id

        given = call.optional_text(name)
        return None if given is None else clean_message_id(given)

    def _channel(self, call: Call, bus: Bus) -> Channel | None:
        from legion.bus.address import parse_channel
        from legion.services.messaging import known_channel

        named = call.optional_text("channel")
        wanted = None if named is None else parse_channel(named)
        return known_channel(bus, wanted, lambda: self.project)

    def say(self, call: Call) -> Any:
        from legion.bus import actions

        with self._bus() as bus:
            channel = self._channel(call, bus)
            speaker = self._speaker(call, bus)
            posted = actions.say(
                bus,
                speaker,
                channel or speaker.channel,
                self._body(call),
                message_id=self._id(call, "message_id"),
            )
            return self._posted(bus, posted)

    def ask(self, call: Call) -> Any:
        from legion.bus import actions

        with self._bus() as bus:
            # No spawn instance to check: a replaced session's capability is revoked.
            posted = actions.ask(
                bus,
                self._speaker(call, bus),
                self._body(call),
                about=self._id(call, "about"),
                message_id=self._id(call, "message_id"),
            )
            return self._posted(bus, posted)

    def reply(self, call: Call) -> Any:
        from legion.bus import actions
        from legion.bus.validate import clean_message_id

        original = clean_message_id(call.text("original"))
        with self._bus() as bus:
            self._no_answer_a_person_owns(call, bus, original)
            posted = actions.reply(
                bus,
                self._speaker(call, bus),
                original,
                self._body(call),
                reply_id=self._id(call, "message_id"),
            )
            return self._posted(bus, posted)

    def _no_answer_a_person_owns(self, call: Call, bus: Bus, original: str) -> None:
        """The controller's reply to a worker's question is an answer, as `legion answer` is:
        refused once that question went to a person (`legion.core.roles.answer_refusal`). The
        worker's issue is its session's, from Legion's records (its channel's branch else)."""
        if call.who() != roles.CONTROLLER:
            return
        try:
            asked = bus.message(original)
            asker = bus.resolve_agent(asked.sender, asked.channel)
        except NotFoundError:
            return  # the reply itself says there is no such message
        if asked.kind is not MessageKind.ASK:
            return
        record = self._workers(call).roster.record_of(asker.session_id or "")
        issue = record.issue if record is not None else issue_for_branch(asked.branch)
        if issue is None:
            return
        refusal = roles.answer_refusal(
            roles.CONTROLLER, frozenset(call.tracker.get_issue(issue).labels)
        )
        if refusal is not None:
            raise NotPermittedError(refusal)

    def complete(self, call: Call) -> Any:
        from legion.services.mode_completion import complete
        from legion.sessions.identity import SessionVariables

        scope = call.scope
        session = SessionVariables(session_id=scope.session_id, mode=scope.mode, issue=scope.issue)
        with self._bus() as bus:
            done = complete(
                bus,
                self._speaker(call, bus),
                session,
                call.optional_text("summary"),
                lambda: call.tracker,
            )
        return {
            "posted": done.posted,
            "issue": done.issue,
            "added": done.added,
            "removed": done.removed,
        }

    def read(self, call: Call) -> Any:
        """Messages as `legion messages` shows them (what it returns counts as read)."""
        from legion.services.messaging import Reading

        with self._bus() as bus:
            channel = self._channel(call, bus)
            speaker = self._speaker(call, bus)
            # A worker reads its own project's channels only (issue 35).
            foreign = channel is not None and channel.project != speaker.channel.project
            if call.scope.issue is not None and foreign:
                raise NotPermittedError(
                    f"a worker reads only its own project's channels (asked: {channel})"
                )
            unread = call.flag("unread")
            where = channel if unread else channel or speaker.channel
            feed = Reading(bus, speaker.id, where, unread)
            since = call.optional_int("since") or 0
            shown = feed.messages(since=since, last=call.optional_int("last"))
            feed.shown(shown)
            return {"channel": None if where is None else str(where), "messages": shown}

    def context(self, call: Call) -> Any:
        """The session's wake-up context (its SessionStart and PreCompact hooks): assembled
        here, from the bus, its workspace and its CLI's task list, as the hook would."""
        from legion.bus.session_hooks import HookedSession, current_context

        scope = call.scope
        if not scope.session_id:
            return None
        sid = scope.session_id
        env = self.env | {"LEGION_MODE": scope.mode, "LEGION_ISSUE_ID": scope.issue or ""}
        session = HookedSession(
            session_id=sid,
            inbox=None,
            context=None,
            env=env,
            workspace=self._workspace(call),
            # Read by the session's own runtime, as the roster reads any worker's list.
            task_list=lambda agent: self._workers(call).runtimes.of_session(sid).task_list(sid),
        )
        return current_context(
            session, why=call.text("why"), compaction=call.optional_text("compaction")
        )

    def usage(self, call: Call) -> Any:
        """An issue's tokens by phase, where the session may read the issue."""
        identifier = call.text("identifier")
        call.readable(identifier)
        return self._workers(call).roster.usage(identifier).get(identifier, {})

    def _workers(self, call: Call) -> WorkerManager:
        """The project's workers, on the relay's own backends (their registry, their CLIs)."""
        from legion.backends import open_workers

        return open_workers(self.project, call.backends, self.env)  # type: ignore[arg-type]

    def run_command(self, call: Call) -> Deferred:
        """A `legion` command the controller (or its Oracle) runs, run here for it: what needs
        the tmux server, the bus or the project's database, none of which a confined session
        sees. Only a project-wide capability may; the command runs in this project, as the
        capability's session, and its output and exit code go back."""
        from legion.core.file_options import named_files, refusal
        from legion.plugins import backend_secret_variables
        from legion.proxy import model_key_variables
        from legion.relay.operations import Deferred

        argv = call.texts("argv")
        stdin = call.optional_text("stdin")
        at = command_index(argv)
        command = argv[at] if at is not None else ""
        scope = call.scope
        if scope.issue is not None:
            raise NotPermittedError(
                f"only the controller runs `legion {command}` (through the daemon); this "
                f"session works on {scope.issue}"
            )
        if at is None or command not in DAEMON_COMMANDS:
            raise InputError(f"the Legion daemon does not run `legion {command}` for a session")
        if at != 0:
            raise NotPermittedError(
                "a session's commands run in its own project: no options before the command "
                f"(asked: {' '.join(argv[: at + 1])})"
            )
        if follows(argv, at):
            raise InputError(FOLLOW_REFUSAL)
        # A file named here would be read outside the session's sandbox: its own `legion`
        # sends the text instead (`cli._in_daemon`); a request that still names one is refused.
        named = named_files(argv)
        if named:
            raise NotPermittedError(refusal(named[0]))
        # It runs as the session, with no credential: not the model's key (it makes no model
        # call), not the tracker's or forge's (its calls to them go through this relay, with the
        # session's own capability). It sees tmux, the bus and the database, as the daemon does.
        kept_back = {*model_key_variables(self.env), *backend_secret_variables()}
        env = {name: value for name, value in self.env.items() if name not in kept_back}
        capability = call.capability
        if command in LEGIONS_PASSES:
            # Legion's own moves, the decision table's (`legion.core.roles.LEGION`): asked for
            # by the controller, steered by nothing it wrote. Their capability is in this
            # process's environment alone, never the session's, and the next one replaces it.
            own_pass = f"{roles.LEGION}:{command}:{scope.session_id}"
            capability = Capabilities(call.backends.db).mint(
                None, mode=roles.LEGION, session_id=own_pass
            )
        env |= {
            "LEGION_SESSION_ID": scope.session_id,
            "LEGION_MODE": scope.mode or CONTROLLER_MODE,
            "LEGION_REPO": str(self.project.root),
            CAPABILITY_ENV: capability,
            SOCKET_ENV: str(socket_path(self.project.state_dir)),
            RUN_BY_DAEMON_ENV: "1",
        }
        env.pop(LEASE_ENV, None)
        lease = self.lease()
        if lease is not None:  # its writes are fenced as the daemon's own are
            env[LEASE_ENV] = f"{lease[0]} {lease[1]}"
        root = self.project.root

        def work() -> dict[str, Any]:
            try:
                done = subprocess.run(
                    [sys.executable, "-m", "legion", *argv],
                    cwd=root,
                    env=env,
                    input=stdin if stdin is not None else "",
                    capture_output=True,
                    text=True,
                    errors="replace",
                    timeout=COMMAND_TIMEOUT_S,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                raise LegionError(
                    f"`legion {command}` ran longer than {COMMAND_TIMEOUT_S:g} s in the daemon "
                    "and was stopped"
                ) from None
            return {"exit": done.returncode, "stdout": done.stdout, "stderr": done.stderr}

        return Deferred(work)


# What the controller's `legion` runs in the daemon (`legion.run`): the commands that need the
# tmux server, the bus or the database. Its `issue` and `pr` go through the relay's tracker and
# forge operations, its `say`, `ask`, `reply`, `complete` and `messages` through the bus's.
DAEMON_COMMANDS = frozenset(
    {
        "status",
        "reconcile",
        "log",
        "why",
        "usage",
        "feedback",
        "dispatch",
        "resume",
        "answer",
        "workers",
        "peek",
        "agents",
        "events",
        "kill",
        "archive",
        "escalate",
        "state",
        "workspace",
        "task",
    }
)
# Of those, Legion's own passes: the decision table's moves (transitions, starts), run with
# Legion's authority (`legion.core.roles.LEGION`), not the controller's.
LEGIONS_PASSES = frozenset({"reconcile", "dispatch", "resume"})
FOLLOW_REFUSAL = "a session cannot follow the bus's events or the action log through the daemon"


def follows(argv: Sequence[str], at: int) -> bool:
    """Whether `argv` (its command at `at`) asks `legion events` or `legion log` to follow
    without end, which would hold a connection of the daemon's for the command's whole
    timeout: `--follow`, or `-f` alone or among other short flags."""
    if argv[at] not in ("events", "log"):
        return False
    for arg in argv[at + 1 :]:
        if arg == "--":
            return False
        if arg == "--follow" or arg.startswith("--follow="):
            return True
        if arg.startswith("-") and not arg.startswith("--") and "f" in arg[1:]:
            return True
    return False


# A command the daemon runs for a session has this long; the client waits a little longer.
COMMAND_TIMEOUT_S = 300.0


def command_index(argv: Sequence[str]) -> int | None:
    """Where the command's name is in `legion`'s arguments: after the root's options (`-C
    PATH`, `--repo PATH`, `--repo=PATH`); None when there is none."""
    at = 0
    while at < len(argv):
        word = argv[at]
        if word in ("-C", "--repo"):
            at += 2
        elif word.startswith("-"):
            at += 1
        else:
            return at
    return None


# -- the session's side (on `legion.relay.client.session_client`) -------------------------------


@dataclass(frozen=True)
class Relayed:
    """What a post through the relay did: the message, and what became of it for each
    addressee with a session (`legion.services.messaging.HandOver`'s values)."""

    posted: Posted
    delivery: dict[str, str]


def _relayed(answer: Any) -> Relayed:
    if not isinstance(answer, dict) or not isinstance(answer.get("posted"), Posted):
        raise ProtocolError("the daemon's answer to a post is not one")
    return Relayed(answer["posted"], dict(answer.get("delivery") or {}))


def say(
    client: RelayClient, body: str, *, channel: Channel | None, message_id: str | None
) -> Relayed:
    channel_text = None if channel is None else str(channel)
    return _relayed(client.call("bus.say", body=body, channel=channel_text, message_id=message_id))


def ask(client: RelayClient, body: str, *, about: str | None, message_id: str | None) -> Relayed:
    return _relayed(client.call("bus.ask", body=body, about=about, message_id=message_id))


def reply(client: RelayClient, original: str, body: str, *, message_id: str | None) -> Relayed:
    return _relayed(client.call("bus.reply", original=original, body=body, message_id=message_id))


@dataclass(frozen=True)
class Completed:
    posted: Posted
    issue: str | None
    added: list[str]
    removed: list[str]


def complete(client: RelayClient, summary: str | None) -> Completed:
    answer = client.call("bus.complete", summary=summary)
    if not isinstance(answer, dict) or not isinstance(answer.get("posted"), Posted):
        raise ProtocolError("the daemon's answer to a completion is not one")
    return Completed(
        answer["posted"], answer.get("issue"), list(answer["added"]), list(answer["removed"])
    )


@dataclass
class RelayedReading:
    """`legion messages` for a session, read as `legion.services.messaging.Reading` is: the daemon
    reads the bus for it, as the session its capability says, and counts what it returns as
    read (so `shown` has nothing left to do). `channel`: the one read, once read."""

    client: RelayClient
    channel_named: Channel | None
    unread: bool
    channel: str | None = None

    def messages(self, *, since: int = 0, last: int | None = None) -> list[Message]:
        named = None if self.channel_named is None else str(self.channel_named)
        answer = self.client.call(
            "bus.read", channel=named, unread=self.unread, since=since, last=last
        )
        if not isinstance(answer, dict) or not isinstance(answer.get("messages"), list):
            raise ProtocolError("the daemon's answer to a reading is not one")
        self.channel = answer.get("channel")
        return list(answer["messages"])

    def shown(self, messages: Iterable[Message]) -> None:
        """Counted as read by the daemon already."""


def usage(client: RelayClient, identifier: str) -> dict[str, Usage]:
    answer = client.call("records.usage", identifier=identifier)
    if not isinstance(answer, dict):
        raise ProtocolError("the daemon's answer to a usage is not one")
    return {str(phase): used for phase, used in answer.items() if isinstance(used, Usage)}


@dataclass(frozen=True)
class Ran:
    """A command the daemon ran for the session: its exit code and what it printed."""

    exit: int
    stdout: str
    stderr: str


def run_in_daemon(client: RelayClient, argv: Sequence[str], stdin: str | None) -> Ran:
    """`legion ARGV`, run by the daemon for this session (`legion.run`)."""
    from legion.relay.client import RelayClient

    patient = RelayClient(
        client.path, client.capability, wait=client.wait, timeout=COMMAND_TIMEOUT_S + 30
    )
    answer = patient.call("legion.run", argv=list(argv), stdin=stdin)
    if not isinstance(answer, dict) or not isinstance(answer.get("exit"), int):
        raise ProtocolError("the daemon's answer to a command is not one")
    return Ran(answer["exit"], str(answer.get("stdout", "")), str(answer.get("stderr", "")))
