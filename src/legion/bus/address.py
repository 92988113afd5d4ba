"""Mentions and addresses. Pure: no I/O.

An address names an agent relative to where it is written (the channel, which is the sender's
own project and branch): `@agent` on the same branch, `@branch/agent` in the same project,
`@project/branch/agent` anywhere. Branch names may contain `/`, so an address with slashes can
be read several ways; every reading is tried against the agents the bus knows, and an address
that matches none, or more than one, is refused with the candidates named. `@legion` is the
orchestrator of the channel's project (whichever branch it is on), `@human` the human.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from legion.bus.model import HUMAN_NAME, ORCHESTRATOR_NAME, Agent, AgentRole, Channel
from legion.core.text import clean_branch
from legion.errors import InputError

# Agent names are lower case and end in a letter or digit, so a mention followed by
# punctuation ("@backend, the spec is ready.") ends where the name does.
_AGENT_NAME = re.compile(r"[a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?")
# Project names never contain "/": the first segment of a full address is always the project.
_PROJECT_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")
_NOT_IN_PROJECT_NAME = re.compile(r"[^A-Za-z0-9._-]+")

# Text in backticks is code, not a mention: `legion say "@b hi"` quoted in a message wakes nobody.
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)
# "@" after a word character is an e-mail address or a decorator's owner, not a mention.
_MENTION = re.compile(r"(?<![A-Za-z0-9_.+@/-])@([A-Za-z0-9][A-Za-z0-9._/-]*)")
_TRAILING = "._/-"
_MAX_LISTED = 5
# The roles that may address the human directly; everyone else goes through @legion.
_REACH_HUMAN = frozenset({AgentRole.CONTROLLER, AgentRole.HUMAN})


@dataclass(frozen=True, slots=True, order=True)
class AgentKey:
    """What identifies an agent on the bus: its project, branch and name."""

    project: str
    branch: str
    name: str

    @property
    def full(self) -> str:
        if (self.project, self.branch) == ("", ""):
            return self.name  # the human
        return f"{self.project}/{self.branch}/{self.name}"


HUMAN = AgentKey("", "", HUMAN_NAME)


def clean_agent_name(name: str) -> str:
    text = name.strip()
    if not _AGENT_NAME.fullmatch(text):
        raise InputError(
            f"invalid agent name {name!r}: lower-case letters, digits, '-' and '_', "
            "starting and ending with a letter or digit"
        )
    return text


def clean_project_name(name: str) -> str:
    text = name.strip()
    if not _PROJECT_NAME.fullmatch(text):
        raise InputError(
            f"invalid project name {name!r}: letters, digits, '.', '-' and '_' (no '/')"
        )
    return text


def project_name_for_folder(folder_name: str) -> str:
    """A project's name on the bus, from its repository folder's name: characters an address
    cannot hold become "-" (`my app` -> `my-app`)."""
    text = _NOT_IN_PROJECT_NAME.sub("-", folder_name).strip("._-")[:100].rstrip("._-")
    return text or "project"


def parse_channel(text: str) -> Channel:
    """`PROJECT/BRANCH` (the branch may hold further slashes)."""
    project, sep, branch = text.strip().partition("/")
    if not sep or not project or not branch:
        raise InputError(f"invalid channel {text!r}: write it as PROJECT/BRANCH (e.g. app/main)")
    return Channel(clean_project_name(project), clean_branch(branch))


def _without_code(body: str) -> str:
    return _CODE.sub(" ", body)


def normalize_address(text: str) -> str:
    """An address as written, without its "@" and with the agent's name in lower case."""
    address = text.strip().removeprefix("@")
    head, sep, name = address.rpartition("/")
    return f"{head}{sep}{name.lower()}"


def parse_mentions(body: str) -> tuple[str, ...]:
    """The addresses mentioned in `body` (without their "@"), first mention first, each once.
    Sentence punctuation after a mention is not part of it; code in backticks has none."""
    found: list[str] = []
    for match in _MENTION.finditer(_without_code(body)):
        address = normalize_address(match.group(1).rstrip(_TRAILING))
        if address and address not in found:
            found.append(address)
    return tuple(found)


def readings(address: str, here: Channel) -> list[AgentKey]:
    """Every agent `address` could name, written in channel `here`: one per way of splitting
    it into project, branch and name."""
    parts = address.split("/")
    name = parts[-1]
    if len(parts) == 1:
        return [AgentKey(here.project, here.branch, name)]
    found = [AgentKey(here.project, "/".join(parts[:-1]), name)]  # @branch/agent
    for cut in range(1, len(parts) - 1):  # @project/branch/agent, for every split
        found.append(AgentKey("/".join(parts[:cut]), "/".join(parts[cut:-1]), name))
    return found


def candidates(address: str, here: Channel, known: Collection[AgentKey]) -> list[AgentKey]:
    """The known agents `address` may name (none, one, or several: ambiguous), sorted."""
    address = normalize_address(address)
    if address == HUMAN_NAME:
        return [HUMAN]
    if address == ORCHESTRATOR_NAME:
        return sorted(
            key for key in known if key.project == here.project and key.name == ORCHESTRATOR_NAME
        )
    known_set = known if isinstance(known, set | frozenset) else set(known)
    return sorted({key for key in readings(address, here) if key in known_set})


def resolve(
    address: str, here: Channel, known: Collection[AgentKey], *, may_reach_human: bool = True
) -> AgentKey:
    """The one agent `address` names, written in channel `here`; otherwise an InputError that
    says why and names the candidates. Agents other than the orchestrator reach the human
    through `@legion` (`may_reach_human=False`), which decides whether to escalate."""
    address = normalize_address(address)
    if not address:
        raise InputError("an empty address: write @agent, @branch/agent or @project/branch/agent")
    if address == HUMAN_NAME and not may_reach_human:
        raise InputError(
            "agents reach the human through @legion, which decides whether to ask them: "
            "write @legion instead of @human"
        )
    found = candidates(address, here, known)
    if len(found) == 1:
        return found[0]
    if found:
        listed = ", ".join(f"@{key.full}" for key in found)
        raise InputError(
            f"ambiguous address @{address}: it could be {listed}; write the one you mean in full"
        )
    raise InputError(_unknown(address, here, known))


def _unknown(address: str, here: Channel, known: Collection[AgentKey]) -> str:
    name = address.rpartition("/")[2]
    if address == ORCHESTRATOR_NAME:
        return (
            f"@{ORCHESTRATOR_NAME}: project {here.project} has no orchestrator on the bus "
            "(is `legion start` running?)"
        )
    tried = readings(address, here)
    line = f"unknown address @{address}: no agent {name!r} "
    line += f"on {here}" if "/" not in address else "at " + " or ".join(k.full for k in tried)
    same_name = sorted(key for key in known if key.name == name and key != HUMAN)
    if same_name:
        return line + f"; agents named {name}: {_listed(key.full for key in same_name)}"
    for key in tried:
        there = sorted(k.name for k in known if (k.project, k.branch) == (key.project, key.branch))
        if there:
            return line + f"; on {key.project}/{key.branch}: {_listed(there)}"
    return line


def _listed(addresses: Iterable[str]) -> str:
    items = [f"@{item}" for item in addresses]
    more = len(items) - _MAX_LISTED
    shown = ", ".join(items[:_MAX_LISTED])
    return f"{shown} and {more} more" if more > 0 else shown


# -- who a message is addressed to -----------------------------------------------------------------


def may_reach_human(role: AgentRole) -> bool:
    """Whether an agent in `role` may address the human (`@human`) itself."""
    return role in _REACH_HUMAN


def within_project(role: AgentRole) -> bool:
    """Whether an agent in `role` posts only in its own project's channels, to its own
    project's agents: a worker, whose words may be a stranger's (issue 35: its capability
    reaches only its own project's bus). The orchestrator and the human reach any project."""
    return role not in _REACH_HUMAN


def outside_project(project: str, channel: Channel, recipients: Iterable[Agent]) -> str | None:
    """What a post in `channel` to `recipients` reaches outside `project` (one line), if
    anything."""
    if channel.project != project:
        return f"a worker posts only in its own project's channels (asked: {channel})"
    others = sorted({agent.address for agent in recipients if agent.project != project})
    if others:
        return f"a worker reaches only its own project's agents (asked: {', '.join(others)})"
    return None


@dataclass(frozen=True, slots=True)
class Lookup:
    """The agents a message's mentions could name, which is all resolving them needs: these
    keys, and the orchestrator of project `orchestrator_of` on whichever branch."""

    keys: frozenset[AgentKey]
    orchestrator_of: str | None


def lookup_for(mentioned: Sequence[str], here: Channel) -> Lookup:
    """What to read to resolve `mentioned` (addresses as `parse_mentions` gives them) written
    in `here`: one agent per reading of each, so a post costs the same with 5 agents or 500."""
    keys: set[AgentKey] = set()
    for address in mentioned:
        if address == HUMAN_NAME:
            keys.add(HUMAN)
        elif address != ORCHESTRATOR_NAME:
            keys.update(readings(address, here))
    orchestrator = here.project if ORCHESTRATOR_NAME in mentioned else None
    return Lookup(frozenset(keys), orchestrator)


def agents_by_key(agents: Iterable[Agent]) -> dict[AgentKey, Agent]:
    """Agents by (project, branch, name); the human's row is ("", "", "human"), `HUMAN`."""
    return {AgentKey(agent.project, agent.branch, agent.name): agent for agent in agents}


def addressees(
    mentioned: Sequence[str],
    here: Channel,
    known: Mapping[AgentKey, Agent],
    *,
    sender_id: int,
    reach_human: bool,
    everyone: Callable[[], Collection[AgentKey]],
) -> list[Agent]:
    """The agents the mentions name (never the sender), first mention first, each once.
    `known`: the agents `lookup_for` asked for; `everyone`: every agent, read only to name the
    candidates when an address names nobody (InputError)."""
    recipients: list[Agent] = []
    for address in mentioned:
        try:
            agent = known[resolve(address, here, known.keys(), may_reach_human=reach_human)]
        except InputError:
            # Said again against every agent, for the candidates the error names.
            try:
                resolve(address, here, everyone(), may_reach_human=reach_human)
            except InputError as exc:
                hint = "(text in `backticks` is not read as a mention)"
                raise InputError(f"{exc} {hint}") from None
            raise
        if agent.id != sender_id and all(agent.id != other.id for other in recipients):
            recipients.append(agent)
    return recipients
