"""How a project's sessions are confined (`legion.sandbox`): the sandbox the settings choose,
what of the machine a session sees and writes (its workspace, the git parts its issue's work
needs, its own folder of Legion's state, the daemon's sockets), its one way out through the
daemon's model and egress proxies; and a worker's workspace setup, confined like it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from legion import proxy
from legion.config import Project
from legion.config.files import read_toml
from legion.config.paths import state_home, user_config_path
from legion.core import egress as egress_rules
from legion.core.session_config import toml_text, without_secrets
from legion.daemon_link import run_folder
from legion.errors import ConfigError
from legion.files.private import private_folder, write_private
from legion.git import main_git_dir
from legion.proxy import EGRESS_SOCKET_NAME, PROXY_SOCKET_NAME
from legion.relay import socket_path
from legion.relay.capabilities import SETUP_MODE, Capabilities, setup_session
from legion.runtime.base import AgentRuntime
from legion.sandbox import (
    Access,
    Confinement,
    Sandbox,
    bridge,
    empty_file,
    install_root,
    legion_install,
    session_access,
    worker_git_parts,
)
from legion.sandbox import resolve as resolve_sandbox
from legion.sandbox import wrap as sandbox_wrap
from legion.sessions.session_env import inherited
from legion.trust import records
from legion.workspaces import issue_repo
from legion.workspaces.setup import (
    PASSED_VARIABLES,
    Plan,
    cache_env,
    cache_folder,
    setup_argv,
)


class SessionConfinement:
    def __init__(
        self,
        project: Project,
        env: Mapping[str, str],
        capabilities: Capabilities | None,
        session_folder: Callable[[str], Path],
    ) -> None:
        """`env`: the dispatcher's environment; `capabilities`: where a setup's capability is
        minted (None: a setup gets no egress); `session_folder`: a session's own folder of
        Legion's state."""
        self.project = project
        self.env = env
        self.capabilities = capabilities
        self.session_folder = session_folder

    def sandbox(self) -> Sandbox:
        """How this project's workers run (`legion.sandbox`): a ConfigError when `sandbox =
        "bwrap"` and bubblewrap cannot run here."""
        return resolve_sandbox(self.project.settings.sandbox, self.env)

    @staticmethod
    def wrap(
        sandbox: Sandbox,
        argv: list[str],
        confinement: Confinement,
        access: proxy.ProxyAccess | None,
        *,
        egress: bridge.Egress | None = None,
    ) -> list[str]:
        """`argv` in `confinement`, with a network of its own whose one way out is its bridge
        to the daemon's model proxy (`access`), and to its egress proxy (`egress`); without
        one (no daemon runs, the proxy does not serve its CLI or holds no key for it), the
        machine's network."""
        port = None if access is None else access.port
        if access is not None and access.socket is not None and port is not None:
            argv = bridge.command(argv, port, access.socket, egress=egress)
        else:
            argv = bridge.command(argv)  # the sandbox's pid 1 all the same
            confinement = replace(confinement, network=True)
        return sandbox_wrap(sandbox, confinement, argv)

    def egress(self, env: dict[str, str], access: proxy.ProxyAccess | None) -> bridge.Egress | None:
        """A confined session's way to the daemon's egress proxy, its HTTP clients pointed
        there in its environment `env` (changed in place); None (and `env` as it was) when
        `sandbox_egress` allows nothing, or the daemon serves no egress proxy (started before
        it was set)."""
        rules = egress_rules.parse(self.project.settings.sandbox_egress)
        where = socket_path(self.project.state_dir, EGRESS_SOCKET_NAME)
        if not rules or access is None or access.port is None or not where.is_socket():
            return None
        forwards = egress_rules.forwarded(rules)
        port = egress_rules.egress_port({access.port, *(port for _, port, _ in forwards)})
        env.update(egress_rules.variables(port))
        return bridge.Egress(port, str(where), forwards)

    def for_session(
        self,
        sid: str,
        workspace: Path,
        runtime: AgentRuntime,
        env: Mapping[str, str],
        *,
        proxied: bool,
        relayed: bool,
        worker: bool,
    ) -> Confinement:
        from legion.bus import bus_path

        home = Path(env.get("HOME") or Path.home())
        state_dir = self.project.state_dir
        # The daemon's sockets may be in a short folder of their own; the rest of Legion's state
        # (the bus, the database) is the daemon's, reached through the relay.
        daemon = tuple(
            dict.fromkeys(
                (
                    run_folder(state_dir),
                    socket_path(state_dir).parent,
                    socket_path(state_dir, PROXY_SOCKET_NAME).parent,
                    socket_path(state_dir, EGRESS_SOCKET_NAME).parent,
                )
            )
        )
        own = private_folder(self.session_folder(sid))
        # With the relay, the bus and the database are the daemon's to open. Only a session
        # given no capability (a supervisor made without the project's database to mint one)
        # opens them itself.
        session_state = (own,) if relayed else (state_dir, bus_path(env).parent)
        if worker and self.project.settings.workspace_vcs == "jj":
            # jj keeps one store for every workspace: a worker would write your repository's
            # objects and every `legion/` branch (`docs/threat-model.md`, "Open").
            raise ConfigError(
                "a jj workspace cannot be confined to its own issue's objects yet: use "
                '`workspace_vcs = "git"` (git worktrees, in a colocated jj repository too), or '
                '`sandbox = "none"` to run jj workers unconfined'
            )
        git_folder = main_git_dir(self.project.root)
        access = session_access(
            workspace=workspace,
            workspace_writable=worker,
            git_folder=git_folder,
            git_writable=(
                self._git_parts(git_folder, workspace)
                if worker and git_folder is not None and workspace != self.project.root
                else ((), ())
            ),
            session_state=session_state,
            daemon=daemon,
            # The file, not its folder: a state folder set inside `.legion/` (the demo's) stays out.
            project_config=self.project.config_path,
            trust_records=_existing(records(state_home(env))),
            user_config=self._user_config_copy(env),
            runtime=runtime.sandbox_access(self.env, sid, own_login=not proxied),
            env=env,
        )
        return Confinement(home, empty_file(state_dir), access)

    def setup_plan(self, issue: str, workspace: Path) -> Plan:
        """How `issue`'s workspace setup runs (`legion.workspaces.setup`): confined like its
        worker (its workspace and the git parts a worker writes), plus the issue's own cache
        folder (`cache_folder`), read-write for setup alone, with the network `sandbox_egress`
        allows (through the daemon's egress proxy, under a capability good for nothing else);
        its environment holds no secret. Unconfined (`sandbox = "none"`, or no bubblewrap),
        plainly in the workspace, with the dispatcher's environment less what no session gets."""
        sandbox = self.sandbox()
        if not sandbox.confined:
            env = inherited(self.env)
            return Plan(lambda command: setup_argv(None, None, command, None), workspace, env)
        if self.project.settings.workspace_vcs == "jj":
            raise ConfigError(
                "a jj workspace's setup cannot be confined to its own issue's objects yet: use "
                '`workspace_vcs = "git"`, or `sandbox = "none"`'
            )
        cache = private_folder(cache_folder(self.project.state_dir, issue))
        git_folder = main_git_dir(self.project.root)
        git_parts: tuple[tuple[Path, ...], tuple[Path, ...]] = ((), ())
        if git_folder is not None and workspace != self.project.root:
            git_parts = self._git_parts(git_folder, workspace)
        env = self._command_env(cache)
        egress, capability = self._setup_egress(issue, env)
        return self._confined_plan(
            sandbox,
            workspace,
            env,
            writable=(workspace, *git_parts[0], cache),
            readable=(*((git_folder,) if git_folder is not None else ()), *git_parts[1]),
            egress=egress,
            capability=capability,
        )

    def check_plan(self, tree: Path, cache: Path) -> Plan:
        """How a check of the embedded forge's CI runs (`legion.forges.local_checks`): in
        `tree`, a copy of a pull request's head with no git folder, writing there and in its
        own `cache` alone; with no network at all and no secret in its environment (a check
        runs the pull request's code, which a worker wrote). Unconfined (`sandbox = "none"`),
        plainly in the tree, with the daemon's environment less what no session gets."""
        sandbox = self.sandbox()
        if not sandbox.confined:
            env = inherited(self.env)
            return Plan(lambda command: setup_argv(None, None, command, None), tree, env)
        env = self._command_env(private_folder(cache))
        return self._confined_plan(sandbox, tree, env, writable=(tree, cache), readable=())

    def _command_env(self, cache: Path) -> dict[str, str]:
        """A confined command's environment: the variables a session keeps, and the cache."""
        home = Path(self.env.get("HOME") or Path.home())
        env = {name: self.env[name] for name in PASSED_VARIABLES if name in self.env}
        return env | {"HOME": str(home), **cache_env(cache)}

    def _confined_plan(
        self,
        sandbox: Sandbox,
        cwd: Path,
        env: dict[str, str],
        *,
        writable: tuple[Path, ...],
        readable: tuple[Path, ...],
        egress: bridge.Egress | None = None,
        capability: str | None = None,
    ) -> Plan:
        """Commands confined to `writable` and `readable`, besides what every confined command
        reads: Legion's install, the programs on its PATH outside the system's (`~/.local/bin`,
        say), npm's prefix; the one socket of the daemon's it may reach is `egress`'s."""
        home = Path(env["HOME"])
        programs = tuple(
            Path(folder)
            for folder in env.get("PATH", "").split(os.pathsep)
            if folder.startswith("/")
            and Path(folder) not in (home, Path("/"))
            and Path(folder) not in home.parents
        )
        node = shutil.which("node", path=env.get("PATH"))
        access = Access(
            writable=writable,
            readable=(
                *readable,
                *legion_install(),
                *programs,
                *(install_root(Path(node)) if node else ()),  # npm's prefix, as a session's
            ),
        )
        if egress is not None:
            access += Access(readable=(Path(egress.socket),))  # that socket alone of the daemon's
        confinement = Confinement(home, empty_file(self.project.state_dir), access)
        return Plan(
            lambda command: setup_argv(sandbox, confinement, command, egress),
            cwd,
            env,
            capability,
        )

    def _setup_egress(
        self, issue: str, env: dict[str, str]
    ) -> tuple[bridge.Egress | None, str | None]:
        """A confined setup's way to the daemon's egress proxy and the capability it shows
        there (minted now, for this run: `SETUP_MODE`, which neither the relay nor the model
        proxy knows), its HTTP clients pointed there in `env` (changed in place); (None, None)
        when `sandbox_egress` allows nothing or no egress proxy runs."""
        rules = egress_rules.parse(self.project.settings.sandbox_egress)
        where = socket_path(self.project.state_dir, EGRESS_SOCKET_NAME)
        if not rules or self.capabilities is None or not where.is_socket():
            return None, None
        token = self.capabilities.mint(issue, mode=SETUP_MODE, session_id=setup_session(issue))
        forwards = egress_rules.forwarded(rules)
        port = egress_rules.egress_port({port for _, port, _ in forwards})
        env.update(egress_rules.variables(port))
        return bridge.Egress(port, str(where), forwards), token

    @staticmethod
    def _git_parts(git_folder: Path, workspace: Path) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
        """What of git a worker writes, and what inside that it only reads: of its issue's own
        repository (`issue_repo.sandbox_parts`); of the project's for a workspace an older
        Legion made, until its next start moves it (`worker_git_parts`)."""
        repo = issue_repo.repo_of(git_folder, workspace.name)
        if issue_repo.exists(repo):
            return issue_repo.sandbox_parts(repo, workspace)
        return worker_git_parts(git_folder, workspace), ()

    def _user_config_copy(self, env: Mapping[str, str]) -> tuple[Path, Path] | None:
        """The user's Legion config and the copy of it a confined session is shown in its place,
        without its secrets (the fleet store's password, a token), written afresh here, where
        no session writes; None when there is no config."""
        real = user_config_path(env)
        copy = run_folder(self.project.state_dir) / "user-config.toml"
        table = read_toml(real)
        if not real.is_file():
            copy.unlink(missing_ok=True)
            return None
        private_folder(copy.parent)
        write_private(copy, toml_text(without_secrets(table)))
        return real, copy


def _existing(path: Path) -> Path | None:
    return path if path.is_dir() and not path.is_symlink() else None
