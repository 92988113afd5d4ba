"""Where Claude Code keeps its files, computed the way the CLI computes them. Pure but for
`realpath` and `stat`."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from pathlib import Path

MAX_ENCODED_LENGTH = 200
# The variables that may hold a Claude Code model credential (the daemon's, for its proxy; a
# session's only when the daemon holds none).
CREDENTIAL_VARIABLES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
_NOT_ALNUM = re.compile(r"[^a-zA-Z0-9]")
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def config_dir(env: Mapping[str, str]) -> Path:
    """`$CLAUDE_CONFIG_DIR`, else `~/.claude`."""
    explicit = env.get("CLAUDE_CONFIG_DIR")
    if explicit:
        return Path(explicit).expanduser()
    return Path(env.get("HOME") or Path.home()) / ".claude"


def skills_dir(env: Mapping[str, str]) -> Path:
    """Where Claude Code finds the user's skills."""
    return config_dir(env) / "skills"


def java_string_hash(text: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit integer."""
    value = 0
    data = text.encode("utf-16-le")
    for index in range(0, len(data), 2):
        value = (31 * value + (data[index] | data[index + 1] << 8)) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def base36(number: int) -> str:
    if number == 0:
        return "0"
    digits = []
    while number:
        number, remainder = divmod(number, 36)
        digits.append(_BASE36[remainder])
    return "".join(reversed(digits))


def encode_project_dir(path: str) -> str:
    """The folder name under `projects/` for a working directory: every non-alphanumeric
    character becomes `-`; a name over 200 characters is cut to 200 and suffixed with `-` and
    the base-36 hash of the full path, so long paths stay distinct."""
    encoded = _NOT_ALNUM.sub("-", path)
    if len(encoded) <= MAX_ENCODED_LENGTH:
        return encoded
    return f"{encoded[:MAX_ENCODED_LENGTH]}-{base36(abs(java_string_hash(path)))}"


def transcript_path(home: Path, workspace: Path, session_id: str) -> Path:
    """Where the CLI whose config folder is `home` keeps session `session_id` in `workspace`."""
    folder = project_folder(str(workspace))
    return Path(f"{home}/projects/{folder}/{session_id}.jsonl")


@functools.lru_cache(maxsize=4096)
def project_folder(workspace: str) -> str:
    """The CLI's folder name for a workspace (its real path, encoded). Kept: the daemon asks
    for every worker's transcript several times a tick, and resolving a path is a system call
    per component; a workspace's real path stays what it was when its worker started."""
    return encode_project_dir(os.path.realpath(workspace))


def newest_activity(transcript: Path) -> float | None:
    """Newest mtime of the transcript and its subagents' transcripts; None when it has none.
    The CLI's folder is the sessions': no link there is followed (`legion.files.worker_written`)."""
    from legion.files.worker_written import regular_files, stat_regular, transcript_file

    try:
        root, below = transcript_file(transcript)
        newest = stat_regular(root, below).st_mtime
    except OSError:
        return None
    subagents = regular_files(root, transcript.with_suffix("") / "subagents", ".jsonl")
    return max([newest, *(entry.stat.st_mtime for entry in subagents)])
