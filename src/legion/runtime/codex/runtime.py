"""The Codex runtime: OpenAI's Codex CLI as an `AgentRuntime` (see `legion.runtime.base`).

A Codex session is a chain of `codex exec --json` turns run by Legion's turn loop
(`legion.runtime.codex.session`) in the session's tmux window: each turn is one process that
ends at the turn boundary, so messages are handed over between turns (the loop reads the
session's inbox, as Claude Code's Stop hook does, and takes typed prompts when idle), and
resuming is `codex exec resume <id>`. docs/codex-cli.md says why this beats driving Codex's TUI.

Codex chooses its own session ids. Legion keeps its deterministic id and records the mapping as
a link, `$CODEX_HOME/legion/<legion id>.jsonl`, to the session's rollout
(`$CODEX_HOME/sessions/.../rollout-...-<codex id>.jsonl`): the link is the transcript Legion
watches, and its target names the Codex session to resume. A state file beside it says whether
a turn runs, so a turn whose process died is not taken for a busy session.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from legion.config.settings import Settings
from legion.core.usage import Usage
from legion.errors import ConfigError
from legion.files.worker_written import read_transcript
from legion.plugins import CODEX
from legion.runtime import npm_pin
from legion.runtime.codex import binary as codex_bin
from legion.runtime.codex.settings import CodexSettings
from legion.runtime.headless import (
    HeadlessRuntime,
    summarize_turn_loop,
)
from legion.runtime.homes import HomeLayout, SessionHomes
from legion.runtime.transcript import (
    TranscriptSummary,
    Turn,
)
from legion.sandbox import install_root
from legion.sandbox.policy import Access

NAME = CODEX
ROLLOUT_ID = re.compile(
    r"rollout-.*?-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$"
)
# Codex's flags for an unattended turn: the worker's workspace is its sandbox (as Claude Code's
# bypass mode), and a workspace outside a git repository is fine.
EXEC_FLAGS = (
    "--json",
    "--skip-git-repo-check",
    "--dangerously-bypass-approvals-and-sandbox",
    # A login shell would rebuild PATH from /etc/profile and lose the `legion` Legion put first.
    "--config",
    "allow_login_shell=false",
    # Legion runs the CLI it pinned: no session looks for (or offers) a newer one.
    "--config",
    "check_for_update_on_startup=false",
)
# A worker's commands do not see variables named like credentials (*KEY*, *SECRET*, *TOKEN*):
# Codex holds the model key, and the commands it runs never get it. Not the controller's: the
# sessions it starts (`legion reconcile` in llm mode) inherit its commands' environment, and
# need the key.
NO_CREDENTIALS = ("--config", "shell_environment_policy.ignore_default_excludes=false")


def codex_home(env: Mapping[str, str]) -> Path:
    """`$CODEX_HOME`, else `~/.codex`."""
    explicit = env.get("CODEX_HOME")
    if explicit:
        return Path(explicit).expanduser()
    return Path(env.get("HOME") or Path.home()) / ".codex"


def skills_dir(env: Mapping[str, str]) -> Path:
    """Where Codex finds the user's skills."""
    return codex_home(env) / "skills"


def session_link(env: Mapping[str, str], session_id: str) -> Path:
    """Where Legion's session `session_id` links to its Codex rollout."""
    return codex_home(env) / "legion" / f"{session_id}.jsonl"


def codex_session_id(link: Path) -> str | None:
    """The Codex session a link points at (None: not started yet)."""
    try:
        target = os.readlink(link)
    except OSError:
        return None
    match = ROLLOUT_ID.search(target)
    return match.group(1) if match else None


def find_rollout(home: Path, codex_id: str) -> Path | None:
    """The rollout file of Codex session `codex_id` under `home/sessions`, newest day first."""
    sessions = home / "sessions"
    for day in sorted(sessions.glob("*/*/*"), reverse=True):
        for path in day.glob(f"rollout-*-{codex_id}.jsonl"):
            return path
    return None


def _records(lines: Iterable[str]) -> Iterable[dict[str, object]]:
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn last line, or not JSON
        if isinstance(record, dict):
            yield record


def _event(record: Mapping[str, object]) -> tuple[str, Mapping[str, object]] | None:
    payload = record.get("payload")
    if record.get("type") != "event_msg" or not isinstance(payload, dict):
        return None
    return str(payload.get("type")), payload


# How the pinned Codex records a turn it could not run for want of a working credential (seen
# with 0.169.0, `codex exec`, against a server answering 401): the turn's `task_complete` holds
# its `error`, `{"message": "unexpected status 401 Unauthorized: <the server's words>, url: …",
# "codex_error_info": {"http_connection_failed": {"http_status_code": 401}}}`; with no key in
# the variable its provider's `env_key` names, `{"message": "Missing environment variable:
# `<name>`.", "codex_error_info": "other"}`.
_UNREACHABLE_STATUSES = frozenset({401})
_NO_KEY = "Missing environment variable: "


def _error(payload: Mapping[str, object]) -> tuple[str, object]:
    """A turn's end's error: its message and `codex_error_info` ("", None: none)."""
    error = payload.get("error")
    if not isinstance(error, dict):
        return "", None
    return str(error.get("message", "")), error.get("codex_error_info")


def key_refused(payload: Mapping[str, object]) -> str | None:
    """What a turn's end (`task_complete`) says when the model's server refused Codex's key
    (HTTP 401), else None. Codex's own words only: what the server said (which may quote part
    of the key) is left out."""
    message, info = _error(payload)
    failed = info.get("http_connection_failed") if isinstance(info, dict) else None
    if not isinstance(failed, dict) or failed.get("http_status_code") not in _UNREACHABLE_STATUSES:
        return None
    said = message.split(":", 1)[0].strip()  # "unexpected status 401 Unauthorized"
    return said if said.startswith("unexpected status") else f"HTTP {failed['http_status_code']}"


def unreachable(payload: Mapping[str, object]) -> str | None:
    """What a turn's end (`task_complete`) says when Codex could not reach the model (its key
    refused, or none), else None."""
    refused = key_refused(payload)
    if refused is not None:
        return refused
    message, _ = _error(payload)
    return message.strip()[:200] if message.startswith(_NO_KEY) else None


def last_turn_refused(lines: Iterable[str]) -> bool:
    """Pure: whether the rollout's last turn ended with its key refused (`key_refused`)."""
    last: Mapping[str, object] | None = None
    for record in _records(lines):
        event = _event(record)
        if event is not None and event[0] in ("task_started", "task_complete", "turn_aborted"):
            last = event[1] if event[0] == "task_complete" else None
    return last is not None and key_refused(last) is not None


def summarize_rollout(lines: Iterable[str]) -> TranscriptSummary:
    """Pure: the turn's state from a rollout's lines. A `task_started` without its
    `task_complete` is a turn in progress. Codex's `exec` turns never wait on a question (it
    has no way to answer one), so there is never a pending question. `unreachable`: the last
    turn ended for want of a working credential (`unreachable`), and none began since."""
    entries = 0
    open_turns: set[str] = set()
    started = False
    cannot: str | None = None
    for record in _records(lines):
        entries += 1
        event = _event(record)
        if event is None:
            continue
        kind, payload = event
        turn_id = str(payload.get("turn_id", ""))
        if kind == "task_started":
            started = True
            open_turns.add(turn_id)
            cannot = None
        elif kind in ("task_complete", "turn_aborted"):
            open_turns.discard(turn_id)
            cannot = unreachable(payload) if kind == "task_complete" else None
    if not started:
        return TranscriptSummary(entries, Turn.NONE if entries == 0 else Turn.OPEN, None)
    return TranscriptSummary(entries, Turn.OPEN if open_turns else Turn.ENDED, None, cannot)


def rollout_usage(lines: Iterable[str]) -> list[tuple[str, Usage]]:
    """Pure: each model response's tokens, from the rollout's `token_count` events (the
    response's own counts, `last_token_usage`). Codex counts cached input inside
    `input_tokens`; here `input` is what was sent afresh, as for Claude Code."""
    found: list[tuple[str, Usage]] = []
    last_total: object = None
    for record in _records(lines):
        event = _event(record)
        if event is None or event[0] != "token_count":
            continue
        info = event[1].get("info")
        if not isinstance(info, dict):
            continue
        total, last = info.get("total_token_usage"), info.get("last_token_usage")
        if not isinstance(last, dict) or total == last_total:
            continue  # a repeat of the last count (Codex re-sends it with rate-limit news)
        last_total = total
        cached = _int(last.get("cached_input_tokens"))
        usage = Usage(
            input=max(0, _int(last.get("input_tokens")) - cached),
            output=_int(last.get("output_tokens")),
            cache_read=cached,
            cache_write=_int(last.get("cache_write_input_tokens")),
        )
        found.append((str(record.get("timestamp", "")), usage))
    return found


def compactions(lines: Iterable[str]) -> int:
    """Pure: how many times the session was compacted (its `compacted` lines)."""
    return sum(1 for record in _records(lines) if record.get("type") == "compacted")


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _lines(path: Path) -> list[str]:
    """The rollout's lines (its last `WHOLE_BYTES`), through Legion's link `path`."""
    try:
        return read_transcript(path).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []


# What of a session's home is configuration, Legion's and read-only inside (the pinned CLI
# loads each from its home), and its login file.
HOME_LAYOUT = HomeLayout(
    config_files=("config.toml", "AGENTS.md", "AGENTS.override.md"),
    config_folders=("skills", "prompts", "rules"),
    login="auth.json",
)
# Your `config.toml` is a few kilobytes; one past this is not copied.
CONFIG_BYTES = 1024 * 1024


def _user_config(env: Mapping[str, str]) -> bytes:
    """Your Codex `config.toml` (your own home's, which no session writes), or nothing."""
    path = codex_home(env) / "config.toml"
    try:
        if path.stat().st_size > CONFIG_BYTES:
            raise ConfigError(f"{path} is over {CONFIG_BYTES} bytes: not Codex's config")
        return path.read_bytes()
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read Codex's config ({exc})") from None


def _user_login(env: Mapping[str, str]) -> Path | None:
    """Your `codex login` (it keeps it in your home's `auth.json`), if any."""
    found = codex_home(env) / HOME_LAYOUT.login
    return found if found.is_file() else None


def _carry_over(user_home: Path, home: Path, session_id: str) -> None:
    """A session an older Legion ran in your own CODEX_HOME goes on in its own home: its
    rollout is copied there once (a regular file reached through no link) and linked as
    Legion's transcript, so that it is resumed rather than started again."""
    from legion.files.worker_written import read_transcript, replace_file, transcript_file

    link = home / "legion" / f"{session_id}.jsonl"
    if link.is_symlink():
        return
    old = user_home / "legion" / f"{session_id}.jsonl"
    try:
        _, below = transcript_file(old)
        data = read_transcript(old)
    except OSError:
        return  # none, or not one Legion would read
    replace_file(home, below, data, folders=True)
    folder = os.open(link.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:  # in the folder as it is, through no link a session left in its place
        os.symlink(home / below, link.name, dir_fd=folder)
    finally:
        os.close(folder)


def skill_prompt(skill: str, args: str) -> str:
    """How a Codex session is told to use a skill: `$name`, as Codex mentions skills."""
    return f"${skill} {args}".rstrip()


def open_runtime(
    settings: Settings, lookup_env: Mapping[str, str], state_dir: Path
) -> CodexRuntime:
    """The registry's opener (`legion.plugins`): Codex as the project's settings set it up, its
    sessions' homes in the project's state folder `state_dir`."""
    return CodexRuntime(settings=settings, lookup_env=lookup_env, state_dir=state_dir)


def configured_environment(settings: Settings) -> dict[str, str]:
    """The variables the settings give Legion's view of Codex: your CODEX_HOME, whose
    `config.toml` chooses the provider and whose login a session may use (a session's own home
    is Legion's: `CodexRuntime.prepare`)."""
    home = settings.section(CodexSettings).home
    return {} if home is None else {"CODEX_HOME": str(home)}


@dataclass(frozen=True)
class CodexRuntime(HeadlessRuntime):
    """Codex, as an `AgentRuntime`: its sessions run in `legion.runtime.codex.session`."""

    settings: Settings | None = None  # its codex_bin and codex_args
    lookup_env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    # The project's state folder, where each session's own home is (`legion.runtime.homes`).
    state_dir: Path | None = None

    product = "Codex"

    @property
    def name(self) -> str:
        return NAME

    def resolve(self) -> npm_pin.Binary:
        return codex_bin.CLI.resolve_configured(self.settings, self.lookup_env)

    def executable(self) -> str:
        return str(self.resolve().path)

    def no_credential(self, env: Mapping[str, str]) -> str | None:
        from legion.runtime.codex.doctor import credential_check

        found = credential_check(env)
        if found.ok:
            return None
        return f"Codex sessions would reach no model ({found.detail}): {found.fix}"

    def command(
        self,
        session_id: str,
        prompt: str,
        *,
        resume: bool,
        inbox: Path | None = None,
        context: Path | None = None,
    ) -> list[str]:
        """argv of the turn loop for session `session_id`: it runs `codex exec` turns, the
        first with `prompt` (a resumed session's with its wake-up context before it)."""
        argv = [
            sys.executable,
            "-m",
            "legion.runtime.codex.session",
            "--codex",
            self.executable(),
            "--session",
            session_id,
        ]
        if resume:
            argv.append("--resume")
        if inbox is not None:
            argv += ["--inbox", str(inbox)]
        if context is not None:
            argv += ["--context", str(context)]
        extra = () if self.settings is None else self.settings.section(CodexSettings).args
        for arg in extra:
            argv.append(f"--codex-arg={arg}")
        return [*argv, "--", prompt]

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        return {}

    @property
    def homes(self) -> SessionHomes:
        return SessionHomes(self.state_dir, NAME, HOME_LAYOUT)

    def home(self, session_id: str) -> Path:
        """Session `session_id`'s own CODEX_HOME (`legion.runtime.homes`)."""
        return self.homes.of(session_id)

    def sandbox_access(self, env: Mapping[str, str], session_id: str, *, own_login: bool) -> Access:
        login = _user_login(env) if own_login else None
        installed = Access(readable=install_root(Path(self.executable())))
        return self.homes.access(session_id, login) + installed

    def prepare(
        self,
        env: Mapping[str, str],
        workspace: Path,
        session_id: str,
        *,
        own_login: bool,
        confined: bool,
    ) -> dict[str, str]:
        """Make the session's own home ready: your `config.toml` (its provider and model) as
        Legion's part, read-only inside, Legion's skills, and your `codex login` only when the
        daemon holds no key for Codex (`own_login`). `codex exec` asks no first-run question.
        Returns the variables that point Codex at the home."""
        home = self.homes.prepare(
            session_id,
            files={"config.toml": _user_config(env)},
            fresh={},
            login=_user_login(env) if own_login else None,
            confined=confined,
        )
        (home / "legion").mkdir(mode=0o700, exist_ok=True)
        _carry_over(codex_home(env), home, session_id)
        return {"CODEX_HOME": str(home)}

    def transcript(self, workspace: Path, session_id: str) -> Path:
        return self.home(session_id) / "legion" / f"{session_id}.jsonl"

    def summarize(self, transcript: Path) -> TranscriptSummary | None:
        return summarize_turn_loop(transcript, summarize_rollout)

    def usage(self, transcript: Path) -> list[tuple[str, Usage]]:
        return rollout_usage(_lines(transcript))

    def skill_prompt(self, skill: str, args: str) -> str:
        return skill_prompt(skill, args)
