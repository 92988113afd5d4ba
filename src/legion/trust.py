"""Which repository configs the user trusts to choose what Legion runs (`legion trust`).

A repository's `.legion/config.toml` is written by whoever can land a commit, a worker
included, so the settings that choose programs, their arguments, the sandbox, folders, remotes
or the store (`SettingSpec.widens`) are the user's: their user config or their environment; so
is raising a budget (`SettingSpec.caps`: a repository's config may only lower one). A
repository's config that does either is refused until the user trusts that exact file, as direnv
does: the record is the file's content hash, kept in the user's state folder (where no session
writes), so any change to the file undoes it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from legion.files.private import write_private

# The folder of the user's state home (`legion.config.paths.state_home`) that holds the records, one
# file per config path.
TRUST_FOLDER = "trusted-configs"


def records(state_home: Path) -> Path:
    """The folder of the records: shown read-only to every session (its own `legion` loads the
    project's config too), written only by `legion trust` and `legion init` outside them."""
    return state_home / TRUST_FOLDER


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _record(state_home: Path, config: Path) -> Path:
    name = hashlib.sha256(str(config.absolute()).encode()).hexdigest()
    return records(state_home) / name


def is_trusted(state_home: Path, config: Path, data: bytes) -> bool:
    """Whether the user trusted `config` when it held exactly `data`."""
    try:
        recorded = _record(state_home, config).read_text(encoding="utf-8").split()
    except (OSError, UnicodeDecodeError):
        return False
    return bool(recorded) and recorded[0] == digest(data)


def trust(state_home: Path, config: Path, data: bytes) -> str:
    """Record that the user trusts `config` as it holds `data`; its digest."""
    found = digest(data)
    write_private(_record(state_home, config), f"{found} {config.absolute()}\n")
    return found
