"""Creating a Legion project in a git repository (`legion init`), and forgetting one on the
machine's bus (`legion project forget`)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from legion import plugins
from legion.backends import open_backends
from legion.config import Project, git_toplevel, load_project
from legion.config.files import write_repo_config
from legion.config.paths import CONFIG_DIR_NAME, CONFIG_FILE_NAME, state_home
from legion.config.resolve import resolve_settings, widening_keys
from legion.errors import (
    ConfigError,
    ConflictError,
    InputError,
    LegionError,
    NotFoundError,
    NotPermittedError,
)
from legion.git import current_branch, rev_parse
from legion.trust import trust
from legion.workspaces.jj import refuse_jj_only

if TYPE_CHECKING:
    from legion.bus import Bus
    from legion.bus.model import ForgottenProject, KnownProject
    from legion.trackers.base import Issue, Tracker


def init_project(
    start: Path,
    *,
    key: str = "LEG",
    tracker: str = plugins.DEFAULT_BACKEND,
    forge: str = plugins.DEFAULT_BACKEND,
    extra: Mapping[str, Any] | None = None,
    requested: Mapping[str, Any] | None = None,
    warn: Callable[[str], None] = lambda line: None,
) -> tuple[Project, bool]:
    """Write .legion/config.toml and create the database; (project, created). Idempotent.

    With a real tracker or forge, its credential, the team or the repository are checked
    first: a failure there is an error and nothing is written; what Legion can live with for
    now (a status not mapped yet, a label it will create) is `warn`ed about.

    `requested` holds the settings the user asked for explicitly: on an existing project they
    must be the ones it has (then this is a no-op), else it is refused with what to edit."""
    start = start.resolve()
    root = git_toplevel(start) if start.is_dir() else None
    if root is None:
        if start.is_dir():
            refuse_jj_only(start)
        raise ConfigError(f"{start} is not inside a git repository: run `git init` there first")
    if rev_parse(root, "HEAD") is None:
        # Workers branch from the base branch's commit: with none, every dispatch would fail.
        raise InputError(
            f"{root} has no commit yet, and Legion's workers branch from one: make a first "
            'commit (e.g. `git commit --allow-empty -m "Initial commit"`), then `legion init`'
        )
    config_path = root / CONFIG_DIR_NAME / CONFIG_FILE_NAME
    if config_path.exists():
        project = load_project(root)
        _refuse_other_settings(project, requested or {})
        if not project.db_path.exists():
            # A shared config on a new machine: this is where its database begins. (An empty
            # or damaged one is an error, never replaced here.)
            open_backends(project, create=True)
        return project, False
    values: dict[str, Any] = {
        "project_id": str(uuid.uuid4()),
        "issue_key": key,
        "tracker": tracker,
        "forge": forge,
        "base_branch": current_branch(root),
        **(extra or {}),
    }
    # Validate with the same rules that reading will apply, and create the database, before the
    # config is written: a failure leaves no half-made project behind.
    settings = resolve_settings(config_path, os.environ, values)
    project = Project(root=root, settings=settings, env=os.environ)
    _check_backends(project, warn)
    open_backends(project, create=True)
    write_repo_config(root, values)
    if widening_keys(values):  # the user chose them (`legion init --repo`): theirs to trust
        trust(state_home(os.environ), config_path, config_path.read_bytes())
    return load_project(root), True


# The checks without which a project cannot work at all: `legion init` refuses on them.
_ESSENTIAL_CHECKS = ("API key", "API", "team", "token", "authentication", "repository")


def _check_backends(project: Project, warn: Callable[[str], None]) -> None:
    from legion.backends import backend_checks

    settings = project.settings
    if not plugins.is_remote((settings.tracker, settings.forge)):
        return
    for name, ok, detail in backend_checks(project):
        if ok:
            continue
        if name.endswith(_ESSENTIAL_CHECKS):
            raise ConfigError(f"{name}: {detail}")
        warn(f"{name}: {detail} (`legion doctor` checks it again)")


def pickup_line(project: Project) -> str:
    """What Legion will work on among the tracker's issues right now, in one line (`legion
    init` and `legion doctor` say it before anything starts). One read of the tracker; a
    failure raises LegionError."""
    from legion.core.pickup import pickup_summary

    backends = open_backends(project)
    try:
        issues = backends.tracker.list_issues()
    finally:
        backends.db.close()
    opt_in = project.settings.backlog_opt_in_labels
    return pickup_summary(((issue.status, issue.labels) for issue in issues), opt_in)


def issue_pickup_line(project: Project, tracker: Tracker, issue: Issue) -> str:
    """When Legion picks up `issue`, in one line (`legion issue create` says it): its status
    and opt-in, its blockers not Done (one read each), and whether a daemon runs, in what
    mode."""
    from legion.core.model import Status
    from legion.core.pickup import issue_pickup
    from legion.daemon_link import running_mode, running_pid

    waits_for = [b for b in issue.blocked_by if tracker.get_issue(b).status is not Status.DONE]
    mode = (running_mode(project) or "auto") if running_pid(project) is not None else None
    return issue_pickup(
        issue.identifier,
        issue.status,
        issue.labels,
        project.settings.backlog_opt_in_labels,
        mode,
        waits_for,
    )


def _refuse_other_settings(project: Project, requested: Mapping[str, Any]) -> None:
    """`init` on an existing project changes nothing; options that ask for other settings than
    the project's are refused rather than ignored, with the edit that would make them so."""
    differ = {
        name: value for name, value in requested.items() if project.settings.value(name) != value
    }
    if not differ:
        return
    current = {name: project.settings.value(name) for name in differ}
    have = ", ".join(
        f"{name} unset" if value is None else f"{name} = {json.dumps(value)}"
        for name, value in current.items()
    )
    want = ", ".join(f"{name} = {json.dumps(value)}" for name, value in differ.items())
    raise InputError(
        f"already a Legion project ({have}), and `legion init` does not change one: to switch, "
        f"set {want} in {project.config_path} (issues already filed stay where they are), "
        "then run `legion doctor` to check the new settings"
    )


def known_project(bus: Bus, which: str | None, here: Callable[[], Project]) -> KnownProject:
    """The project on the bus `which` names (its name on the bus, as `legion agents` shows it,
    or its project id); None: the project here (`here`), found by its id."""
    from legion.core.suggest import did_you_mean

    known = bus.known_projects()
    if which is None:
        project = here()
        wanted = project.settings.project_id
        found = [entry for entry in known if entry.project_id == wanted]
        if not found:
            raise NotFoundError(f"the bus knows no project at {project.root}: nothing to forget")
        return found[0]
    for entry in known:
        if which in (entry.name, entry.project_id):
            return entry
    hint = did_you_mean(which, [entry.name for entry in known])
    raise NotFoundError(
        f"the bus knows no project {json.dumps(which)}{hint}"
        + ("" if hint else " (`legion project list` shows those it knows)")
    )


def forget_project(
    bus: Bus,
    which: str | None,
    here: Callable[[], Project],
    env: Mapping[str, str],
    confirm: Callable[[KnownProject], bool] = lambda project: True,
) -> tuple[KnownProject, ForgottenProject | None]:
    """Take the project `which` names (`known_project`) off the machine's bus: its agents,
    channels, messages, tasks (what belongs to a project: `legion.bus.stored.projects`), so it
    leaves `legion agents` and the TUI. A person's act only: never a session's (one could wipe
    what others said), and never while the project's daemon runs (it would register its agents
    again at once). `confirm` is asked last; None when it said no."""
    from legion.relay import session_has_relay
    from legion.sessions.identity import SessionVariables

    session = SessionVariables.read(env)
    if session.in_session or session.session_id or session_has_relay(env):
        raise NotPermittedError(
            "a session may not forget a project: a person does, at their own terminal"
        )
    project = known_project(bus, which, here)
    pid = _daemon_of(project, env)
    if pid is not None:
        where = "" if project.root is None else f" (`legion -C {project.root} stop`)"
        shown = "" if pid < 0 else f" (pid {pid})"
        raise ConflictError(
            f"the daemon of project {json.dumps(project.name)} runs{shown}: stop it first{where}"
        )
    if not confirm(project):
        return project, None
    forgotten = bus.forget_project(project.name)
    if forgotten is None:  # forgotten in the meantime, by another `forget`
        raise NotFoundError(f"the bus knows no project {json.dumps(project.name)}")
    return project, forgotten


def _daemon_of(project: KnownProject, env: Mapping[str, str]) -> int | None:
    """The pid of the project's running daemon (-1: running, pid unknown), else None: looked
    for where its config puts its state, and where the state goes by default."""
    from legion.daemon_link import lock_held, running_pid

    places: list[Path] = []
    if project.root is not None:
        try:
            loaded: Project | None = load_project(project.root, env)
        except (LegionError, OSError):
            loaded = None  # moved, deleted or broken: its default state is looked at below
        if loaded is not None and project.project_id in (None, loaded.settings.project_id):
            pid = running_pid(loaded)
            if pid is not None:
                return pid
    if project.project_id is not None:
        places.append(state_home(env) / project.project_id / "daemon.lock")
    return -1 if any(lock_held(place) for place in places) else None
