"""Reading and writing config files: a repository's `.legion/config.toml` read through no link
and written atomically, and `legion config set`'s one key changed in place.
"""

from __future__ import annotations

import contextlib
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from legion.config.paths import CONFIG_DIR_NAME, CONFIG_FILE_NAME
from legion.config.settings import SPEC_BY_NAME
from legion.errors import ConfigError, InputError
from legion.setting_spec import (
    SettingSpec,
)

# A repository's config is a few hundred bytes; one larger is not read.
MAX_REPO_CONFIG = 1 << 20


def read_config(path: Path, *, repo: bool = False) -> tuple[bytes, dict[str, Any]]:
    """The file's bytes and its table (b"" and {} when it does not exist); a broken file is a
    ConfigError. One read serves both, so what is trusted is what is used. A repository's
    `.legion/config.toml` is whatever was committed: it is read through no link, only when it
    is a regular file, and up to `MAX_REPO_CONFIG` bytes (`legion.files.worker_written`)."""
    from legion.files.worker_written import read_regular

    below = path.parent.parent if repo and path.parent.name == CONFIG_DIR_NAME else None
    try:
        if below is None:
            data = path.read_bytes()
        else:
            data = read_regular(below, path.relative_to(below), cap=MAX_REPO_CONFIG)
    except FileNotFoundError:
        return b"", {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    try:
        return data, tomllib.loads(data.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None


def read_toml(path: Path) -> dict[str, Any]:
    """The file's table, or {} when it does not exist; a broken file is a ConfigError."""
    return read_config(path)[1]


def toml_value(value: Any) -> str:
    """A TOML literal for the simple values Legion writes (strings, ints, bools, lists)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):  # Python's repr is TOML's spelling (`inf`, `nan` too)
        return repr(value)
    if isinstance(value, str):
        escaped = "".join(_toml_char(c) for c in value)
        return f'"{escaped}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):  # an inline table; its keys are quoted, whatever they are
        return (
            "{"
            + ", ".join(f"{toml_value(str(k))} = {toml_value(v)}" for k, v in value.items())
            + "}"
        )
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _toml_char(char: str) -> str:
    if char.isprintable() and char not in '"\\':
        return char
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def write_repo_config(root: Path, values: Mapping[str, Any]) -> Path:
    """Write .legion/config.toml atomically (never a half-written file). What is in `.legion`
    is whatever a commit put there: a new file of a name drawn now, made through no link
    (`legion.files.worker_written.replace_file`), renamed over the name; `.legion` a link is
    refused."""
    from legion.files.worker_written import replace_file

    folder = root / CONFIG_DIR_NAME
    with contextlib.suppress(FileExistsError):
        folder.mkdir()
    path = folder / CONFIG_FILE_NAME
    lines = ["# Legion project settings. See Legion's docs/configuration.md."]
    lines += [f"{key} = {toml_value(value)}" for key, value in values.items() if value is not None]
    try:
        replace_file(root, path, ("\n".join(lines) + "\n").encode("utf-8"), mode=0o644)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write: {exc}") from None
    return path


def config_value(spec: SettingSpec, text: str) -> Any:
    """The value `legion config set` writes for `text`, as the file will hold it: `text` read
    as a TOML value (`3`, `true`, `["a", "b"]`, `{todo = "Open"}`) when the setting's rules
    take that, else `text` itself as a string. Refused in one line, by the setting's rules,
    when neither is valid."""
    candidates: list[Any] = []
    with contextlib.suppress(tomllib.TOMLDecodeError):
        candidates.append(tomllib.loads(f"v = {text}")["v"])
    if not candidates or candidates[0] != text:
        candidates.append(text)
    error: ValueError | None = None
    for raw in candidates:
        try:
            spec.parse(raw)
        except ValueError as exc:
            error = error or exc
            continue
        return raw
    assert error is not None
    raise InputError(f"{spec.name} {error}")


def check_config_key(key: str, *, repo: bool) -> SettingSpec:
    """The spec of a key `legion config set` may write to a repository's config (`repo`) or
    the user's; else a one-line refusal (an unknown key with the known ones close to it)."""
    import difflib

    spec = SPEC_BY_NAME.get(key)
    if spec is None:
        close = difflib.get_close_matches(key, list(SPEC_BY_NAME), n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(repr(n) for n in close)}?)" if close else ""
        raise InputError(f"unknown setting {key!r}{hint}; `legion config` lists them all")
    if key == "project_id":
        raise InputError("project_id is the project's identity: `legion init` sets it, once")
    if spec.repo_only and not repo:
        raise InputError(f"{key} belongs in the repository's config: drop --user")
    if spec.user_only and repo:
        raise InputError(f"{key} belongs in your user config, never in the repository: add --user")
    return spec


def with_config_value(text: str, key: str, value: Any) -> str:
    """The config file's `text` with top-level `key` set to `value` and everything else kept
    (comments, order, other keys): its line replaced (or its `[key]` table), or a new line
    after the file's last top-level key. Refused when the file would not then read back as
    the same table with that one key changed (a value over several lines, a dotted key)."""
    before = tomllib.loads(text)
    lines = text.splitlines()
    header = re.compile(r"^\s*\[")
    first_table = next((i for i, line in enumerate(lines) if header.match(line)), len(lines))
    own = re.compile(rf"^\s*(?:{re.escape(key)}|\"{re.escape(key)}\")\s*=")
    new_line = f"{key} = {toml_value(value)}"
    found = next((i for i in range(first_table) if own.match(lines[i])), None)
    table = re.compile(rf"^\s*\[\s*(?:{re.escape(key)}|\"{re.escape(key)}\")\s*\]\s*(#.*)?$")
    start = next((i for i in range(first_table, len(lines)) if table.match(lines[i])), None)
    if start is not None:  # `[key]`: taken out, and written inline among the top-level keys
        end = next((i for i in range(start + 1, len(lines)) if header.match(lines[i])), len(lines))
        lines[start:end] = []
    if found is not None:
        lines[found] = new_line
    else:
        at = first_table
        while at > 0 and not lines[at - 1].strip():
            at -= 1
        lines.insert(at, new_line)
    after = "\n".join(lines) + "\n"
    expected = dict(before) | {key: value}
    try:
        written = tomllib.loads(after)
    except tomllib.TOMLDecodeError:
        written = None
    if written != expected:
        raise InputError(
            f"cannot change {key} without rewriting other lines of the file (a value over "
            "several lines, or a dotted key): edit the file by hand"
        )
    return after


def write_config_value(path: Path, key: str, value: Any, *, repo: bool = False) -> None:
    """Set `key` in the config file at `path` (made if missing), atomically, keeping the
    rest of the file. A repository's is read as loading reads it (a regular file, no link)."""
    data, _ = read_config(path, repo=repo)  # a broken file is reported as loading reports it
    updated = with_config_value(data.decode("utf-8"), key, value)
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    # A new file of a name drawn now (O_EXCL): never one a commit put there, nor its link.
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=path.parent, prefix=".config-", suffix=".tmp", delete=False
    ) as tmp:
        tmp.write(updated)
    if repo:  # the project's, committed: readable as git checks it out (the user's stays 0600)
        os.chmod(tmp.name, 0o644)
    Path(tmp.name).replace(path)
