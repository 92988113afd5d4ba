"""Each session's own CLI home (issue 35): the folder its CLI keeps its state, transcripts and
configuration in (Claude Code's `CLAUDE_CONFIG_DIR`, Codex's `CODEX_HOME`), one per session,
in the project's state folder:

    cli/<runtime>/sessions/<session id>/   one session's home, which only it writes
    cli/<runtime>/legion/                  Legion's part: its skills and the files the CLI
                                           loads as configuration or instructions

Your own `~/.claude` and `~/.codex` are never shown to a session: nothing a session writes is
loaded by your CLI, by another session or by the daemon. Inside the session's home, what the
CLI loads as configuration (`HomeLayout.config`: settings, instructions, skills, commands,
agents, plugins; Codex's `config.toml`) is Legion's part, shown read-only; what the CLI keeps
of its own state there (`.claude.json` with its MCP servers) Legion writes afresh at every
start (`fresh`). So a session cannot leave configuration behind for the session that resumes
its conversation later (a retro resumes its implementer's), and the daemon reads only its
transcripts and task files there, through no link (`legion.files.worker_written`).

Your login (the file your CLI keeps it in) is shown to a session, read-only, only when the
daemon holds no key for its CLI; confined, the home's entry is a placeholder bubblewrap shows
your file over, unconfined a link to it.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from legion.errors import ConfigError
from legion.files.private import private_folder
from legion.files.worker_written import replace_file
from legion.sandbox.policy import Access

CLI_FOLDER = "cli"
LEGION_PART = "legion"


@dataclass(frozen=True)
class HomeLayout:
    """What of a CLI's home is configuration, and where the CLI keeps its login."""

    config_files: tuple[str, ...]  # Legion's, read-only inside (written by `prepare_legion_part`)
    config_folders: tuple[str, ...]
    login: str  # the CLI's own login file, in its home

    @property
    def config(self) -> tuple[str, ...]:
        return (*self.config_files, *self.config_folders)


@dataclass(frozen=True)
class SessionHomes:
    """The homes of one CLI's sessions, in a project's state folder (None: none known, as for
    a runtime made outside a project; asking for a home is then a ConfigError)."""

    state_dir: Path | None
    runtime: str
    layout: HomeLayout

    def _state(self) -> Path:
        if self.state_dir is None:
            raise ConfigError(f"{self.runtime}'s sessions need the project's state folder")
        return self.state_dir

    def of(self, session_id: str) -> Path:
        return session_home(self._state(), self.runtime, session_id)

    @property
    def legion(self) -> Path:
        return legion_part(self._state(), self.runtime)

    def access(self, session_id: str, login: Path | None) -> Access:
        return home_access(self.of(session_id), self.legion, self.layout, login)

    def prepare(
        self,
        session_id: str,
        *,
        files: Mapping[str, bytes],
        fresh: Mapping[str, bytes],
        login: Path | None,
        confined: bool,
    ) -> Path:
        """Legion's part (its configuration `files`, its skills) and session `session_id`'s
        home made ready (`prepare_session_home`); the home."""
        from legion import skills

        prepare_legion_part(self.legion, self.layout, files)
        skills.install(self.legion / "skills")
        home = self.of(session_id)
        prepare_session_home(
            home, self.legion, self.layout, fresh=fresh, login=login, confined=confined
        )
        return home


def cli_homes(state_dir: Path, runtime: str) -> Path:
    return state_dir / CLI_FOLDER / runtime


def session_home(state_dir: Path, runtime: str, session_id: str) -> Path:
    """Session `session_id`'s own home for CLI `runtime`."""
    return cli_homes(state_dir, runtime) / "sessions" / session_id


def legion_part(state_dir: Path, runtime: str) -> Path:
    """What of every home of `runtime` is Legion's (its skills, its configuration files)."""
    return cli_homes(state_dir, runtime) / LEGION_PART


def home_access(home: Path, legion: Path, layout: HomeLayout, login: Path | None) -> Access:
    """What a confined session sees of its home: the home read-write, a mount of its own that
    the session cannot rename away; Legion's part read-only over the configuration's names;
    `login` (your login file, when the daemon holds no key) read-only in place of the CLI's."""
    shown = tuple((home / name, legion / name) for name in layout.config)
    mine = ((home / layout.login, login),) if login is not None else ()
    return Access(writable=(home,), replaced=(*shown, *mine))


def prepare_legion_part(legion: Path, layout: HomeLayout, files: Mapping[str, bytes]) -> None:
    """Make Legion's part of `layout`'s homes: each configuration file (its content from
    `files`, else empty) and folder. A folder no session writes: written as it is."""
    private_folder(legion)
    for name in layout.config_folders:
        (legion / name).mkdir(mode=0o700, exist_ok=True)
    for name in layout.config_files:
        data = files.get(name, b"")
        path = legion / name
        try:
            unchanged = path.read_bytes() == data
        except OSError:
            unchanged = False
        if not unchanged:
            replace_file(legion, name, data)


def prepare_session_home(
    home: Path,
    legion: Path,
    layout: HomeLayout,
    *,
    fresh: Mapping[str, bytes],
    login: Path | None,
    confined: bool,
) -> None:
    """Make session's home `home` ready for its CLI's start (no CLI runs in it then).

    `fresh`: files written anew (what the CLI keeps of its own state and would load: whatever
    the session left there is replaced). Confined, each configuration name holds a placeholder
    (an empty file or folder) for bubblewrap to show Legion's part over, and the login's name
    one for `login`; unconfined, each is a link to Legion's part (to `login`). What a session
    left at those names (a link, a file) is removed, never followed."""
    private_folder(home)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(home, flags)
    try:
        folders = set(layout.config_folders)
        for name in layout.config:
            _place(fd, name, folder=name in folders, link=None if confined else legion / name)
        if login is None:
            _remove(fd, layout.login)
        else:
            _place(fd, layout.login, folder=False, link=None if confined else login)
        for name in fresh:
            _remove(fd, name)  # a folder there would keep the rename below from replacing it
    finally:
        os.close(fd)
    for name, data in fresh.items():
        replace_file(home, name, data)


def _place(fd: int, name: str, *, folder: bool, link: Path | None) -> None:
    """Entry `name` of the folder open at `fd`: a link to `link`, else an empty placeholder
    (a folder when `folder`), replacing whatever else is there."""
    try:
        info: os.stat_result | None = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        info = None
    if info is not None:
        if link is not None and stat.S_ISLNK(info.st_mode):
            if os.readlink(name, dir_fd=fd) == str(link):
                return
        elif link is None and folder and stat.S_ISDIR(info.st_mode):
            return  # bubblewrap shows Legion's over it: what is inside is never seen
        elif link is None and not folder and stat.S_ISREG(info.st_mode) and not info.st_size:
            return
        _remove(fd, name)
    if link is not None:
        os.symlink(link, name, dir_fd=fd)
    elif folder:
        os.mkdir(name, 0o700, dir_fd=fd)
    else:
        os.close(
            os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd)
        )


def _remove(fd: int, name: str) -> None:
    """Whatever is at `name` of the folder open at `fd`, a folder with all it holds; through no
    link (`shutil.rmtree` walks by descriptors, and removes a link as the link)."""
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(name, dir_fd=fd)
    else:
        os.unlink(name, dir_fd=fd)
