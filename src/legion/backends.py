"""Opens what a project is configured for: tracker, forge, and the worker runtimes.

The integrations and runtimes are the plugins of `legion.plugins`, the one registry that names
them; each one's module is imported only when a project uses it (so `legion --version` never
pays for an HTTP client).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from legion import plugins
from legion.config import Project
from legion.errors import ConfigError
from legion.forges.base import Forge
from legion.store import Store, open_store
from legion.trackers.base import Tracker

if TYPE_CHECKING:
    from legion.relay.client import RelayClient
    from legion.sessions.workers import WorkerManager
    from legion.workspaces.base import Workspaces


class Backends:
    """A project's tracker and forge, and its database (Legion's own records). In a session
    with the relay the database is opened only when asked for: a confined session has none to
    open, and needs none for what it runs (`legion.services.session_ops`)."""

    def __init__(
        self,
        tracker: Tracker,
        forge: Forge,
        db: Store | Callable[[], Store],
        relay: RelayClient | None = None,
    ) -> None:
        self.tracker = tracker
        self.forge = forge
        self._db = db
        self.relay = relay  # the session's relay client, when its calls go through the daemon

    @property
    def db(self) -> Store:
        if callable(self._db):
            self._db = self._db()
        return self._db


# name: "module:function", from the registry; the function takes (project, database) and
# returns the backend. (Tests swap an opener here.)
TRACKER_OPENERS: dict[str, str] = {p.name: p.tracker for p in plugins.BACKENDS if p.tracker}
FORGE_OPENERS: dict[str, str] = {p.name: p.forge for p in plugins.BACKENDS if p.forge}


def _opener(table: Mapping[str, str], kind: str, name: str) -> Callable[[Project, Store], object]:
    if name not in table:
        raise ConfigError(f"unknown {kind} {name!r} (known: {', '.join(table)})")
    opener: Callable[[Project, Store], object] = plugins.load(table[name])
    return opener


def backend_checks(project: Project) -> list[tuple[str, bool, str]]:
    """`legion doctor`'s checks of the configured tracker and forge: (name, ok, what is there
    or how to fix it), as each plugin declares them."""
    settings = project.settings
    results: list[tuple[str, bool, str]] = []
    checks = {
        plugins.backend(settings.tracker).tracker_doctor,
        plugins.backend(settings.forge).forge_doctor,
    }
    for path in sorted(check for check in checks if check is not None):
        results += plugins.load(path)(project)
    return results


def open_backends(
    project: Project, *, create: bool = False, direct: bool = False, store: Store | None = None
) -> Backends:
    """The project's tracker and forge. Only `legion init` may `create` the database: for an
    existing project a missing or empty one is an error, never a fresh start. (Every backend
    keeps Legion's own records, workers and judgments, in that database.)

    In a session Legion started with the relay (a capability and the relay's socket in its
    environment: always where the tracker or forge needs a credential, on the embedded ones
    while the daemon runs), both are the relay's, which ask the daemon (`legion.relay`): the
    session has no credential, and merges and tracker writes are made outside its sandbox. The
    database is opened only if asked for (a confined session cannot see it). `direct`: the
    real backends whatever the environment (the daemon, and its relay server, are the ones
    that make the calls). `store`: the project's store as the caller opened it (the daemon's,
    fenced by its lease)."""
    from legion.fleet.hosts import fenced_on_lease
    from legion.relay import CAPABILITY_ENV, SOCKET_ENV

    settings = project.settings
    if not direct and project.env.get(CAPABILITY_ENV) and project.env.get(SOCKET_ENV):
        from legion.relay.client import RelayForge, RelayTracker, relay_client

        client = relay_client(project.env, project.state_dir)
        return Backends(
            RelayTracker(client),
            RelayForge(client),
            # A command the daemon runs for a session writes under the daemon's lease.
            lambda: fenced_on_lease(open_store(project), project.env),
            relay=client,
        )
    db = (
        store
        if store is not None
        else fenced_on_lease(open_store(project, create=create), project.env)
    )
    tracker = _opener(TRACKER_OPENERS, "tracker", settings.tracker)(project, db)
    forge = _opener(FORGE_OPENERS, "forge", settings.forge)(project, db)
    return Backends(tracker, forge, db)  # type: ignore[arg-type]


def open_workspaces(project: Project) -> Workspaces:
    """Where the project's issues are checked out (git worktrees, or jj workspaces when set),
    for the workers and for whoever sweeps or lists the workspaces."""
    from legion.git import current_branch
    from legion.workspaces.git_worktree import GitWorktrees
    from legion.workspaces.jj import JjWorkspaces, refuse_jj_only

    refuse_jj_only(project.root)
    base = project.settings.base_branch or current_branch(project.root) or "main"
    # `auto` is git worktrees, in a colocated jj repository too: the jj adapter has never run
    # against a real jj, and the skills and forges work with git branches.
    vcs = project.settings.workspace_vcs
    keep = project.settings.regenerable
    if vcs == "jj":
        return JjWorkspaces(project.root, project.workspace_root, base, regenerable=keep)
    hosted = plugins.backend(project.settings.forge).remote
    remote = project.settings.remote if hosted else None
    return GitWorktrees(project.root, project.workspace_root, base, regenerable=keep, remote=remote)


def open_workers(
    project: Project, backends: Backends, env: Mapping[str, str] | None = None
) -> WorkerManager:
    from legion.relay import relay_needed
    from legion.relay.capabilities import Capabilities
    from legion.runtime.tmux import Tmux
    from legion.sessions.registry import Registry
    from legion.sessions.workers import WorkerManager

    settings = project.settings
    environment = dict(os.environ if env is None else env)
    # A project that names its CLIs' homes (the demo's does) is read and run with them, so
    # `legion issue show` finds its sessions' transcripts whoever runs it.
    for plugin in plugins.RUNTIMES:
        environment.update(plugins.load(plugin.environment)(settings))
    runtimes = {
        plugin.name: plugins.load(plugin.runtime)(settings, environment, project.state_dir)
        for plugin in plugins.RUNTIMES
    }
    return WorkerManager(
        project=project,
        tracker=backends.tracker,
        registry=Registry(backends.db),
        tmux=Tmux(socket=settings.tmux_socket, config=settings.tmux_config),
        workspaces=open_workspaces(project),
        runtime=runtimes[plugins.DEFAULT_RUNTIME],
        runtimes=runtimes,
        env=environment,
        # Every session gets a capability: its token for the daemon's model proxy, and, where
        # the tracker or forge needs a credential, for the relay.
        capabilities=Capabilities(backends.db),
        relay=relay_needed(settings),
    )
