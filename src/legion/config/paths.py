"""Where Legion's config and state live: a project's `.legion/config.toml`, the user's config
(`$XDG_CONFIG_HOME/legion/config.toml`) and the machine's state home.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

CONFIG_DIR_NAME = ".legion"

CONFIG_FILE_NAME = "config.toml"


def user_config_path(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".config")
    return Path(base) / "legion" / CONFIG_FILE_NAME


# Where the machine's Legion state is, when not under $XDG_STATE_HOME: `legion demo` keeps
# its own in the demo's folder, so that removing the folder leaves nothing of it behind.
STATE_HOME_ENV = "LEGION_STATE_HOME"


def state_home(env: Mapping[str, str]) -> Path:
    """The machine's Legion state: the bus, the configs you trust, each project's state unless
    its `state_dir` says otherwise, the TUI's read marks. `$LEGION_STATE_HOME` when set, else
    `$XDG_STATE_HOME/legion` (`~/.local/state/legion`)."""
    own = env.get(STATE_HOME_ENV, "")
    if own:
        return Path(own).expanduser()
    base = env.get("XDG_STATE_HOME") or str(
        Path(env.get("HOME", "~")).expanduser() / ".local" / "state"
    )
    return Path(base) / "legion"
