"""The Gemini runtime: Google's Gemini CLI as an `AgentRuntime` (see `legion.runtime.base`).

A Gemini session is a chain of headless turns (`gemini -p ... -o stream-json`) run by Legion's
turn loop (`legion.runtime.gemini.session`) in the session's tmux window, as Codex's is: each
turn is one process that ends at the turn boundary, so messages are handed over between turns.
Unlike Codex, Gemini takes Legion's own session id (`--session-id`, then `--resume` with it).

Its chat file (`<home>/tmp/<project>/chats/session-<time>-<id8>.jsonl`) is named by the time
it began, so the turn loop links it as Legion's transcript, `<home>/legion/<id>.jsonl`, with a
state file beside it saying whether a turn runs (docs/gemini-cli.md).
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
from legion.files.worker_written import read_transcript
from legion.plugins import GEMINI
from legion.runtime import npm_pin
from legion.runtime.gemini import binary as gemini_bin
from legion.runtime.gemini.model_route import KEY_VARIABLES
from legion.runtime.gemini.settings import GeminiSettings
from legion.runtime.headless import (
    HeadlessRuntime,
    summarize_turn_loop,
)
from legion.runtime.homes import HomeLayout, SessionHomes
from legion.runtime.transcript import TranscriptSummary, Turn
from legion.sandbox import install_root
from legion.sandbox.policy import Access

NAME = GEMINI
# The CLI keeps everything under `$GEMINI_CLI_HOME/.gemini`; a session's home links that name to
# itself, so its configuration is at the home's top, where `legion.runtime.homes` puts it.
DOT_GEMINI = ".gemini"
# Flags of every headless turn: each tool call approved (the worker's workspace is its
# sandbox, as with the other CLIs' bypass modes), its events as JSON lines.
TURN_FLAGS = ("--yolo", "--output-format", "stream-json")
TRUST_VARIABLE = "GEMINI_CLI_TRUST_WORKSPACE"

HOME_LAYOUT = HomeLayout(
    config_files=("settings.json", "GEMINI.md"),
    config_folders=("skills", "commands", "extensions", "policies", "agents"),
    login="oauth_creds.json",
)
# How the pinned CLI's turn ends when the API refused its key (seen with 0.61.0 against a server
# answering 401 or 403: one request, no retry, a `result` event whose `error.message` is
# `[API Error: <the answer's body>]`, a non-zero exit). A 429 it retries with backoff. The body
# is Google's (`{"error":{"code":401,...}}`) or, through the model proxy, the proxy's own
# (`{"type":"error","error":{"type":"authentication_error",...}}`: `legion.proxy.routes`).
_REFUSED_CODES = re.compile(r'"code"\s*:\s*(401|403)\b')
_REFUSED_TYPES = {"authentication_error": "401", "permission_error": "403"}
_REFUSED_TYPE = re.compile(r'"type"\s*:\s*"(authentication_error|permission_error)"')


def key_refused(message: str) -> str | None:
    """Pure: what a failed turn's error says when the API (or the proxy) refused the key
    ("HTTP 401"), else None. Its own words are left out: an API's may quote part of the key."""
    found = _REFUSED_CODES.search(message)
    if found:
        return f"HTTP {found.group(1)}"
    kind = _REFUSED_TYPE.search(message)
    return f"HTTP {_REFUSED_TYPES[kind.group(1)]}" if kind else None


def settings_json() -> bytes:
    """Legion's `settings.json` of every session: the API key as the way in (no login
    dialog), no usage statistics or update checks, and the key kept from the commands its
    shell tool runs (`environmentVariableRedaction`; checked: docs/gemini-cli.md)."""
    settings = {
        "security": {
            "auth": {"selectedType": "gemini-api-key"},
            "environmentVariableRedaction": {"enabled": True, "blocked": list(KEY_VARIABLES)},
        },
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    }
    return (json.dumps(settings, indent=2) + "\n").encode()


def gemini_home(env: Mapping[str, str]) -> Path:
    """`$GEMINI_CLI_HOME`, else your home: the CLI keeps its files in its `.gemini`."""
    explicit = env.get("GEMINI_CLI_HOME")
    return Path(explicit).expanduser() if explicit else Path(env.get("HOME") or Path.home())


def skills_dir(env: Mapping[str, str]) -> Path:
    """Where Gemini finds the user's skills."""
    return gemini_home(env) / DOT_GEMINI / "skills"


def session_link(home: Path, session_id: str) -> Path:
    """Where Legion links session `session_id`'s chat file, in its own home `home`."""
    return home / "legion" / f"{session_id}.jsonl"


def find_chat(home: Path, session_id: str) -> Path | None:
    """The chat file of session `session_id` under `home/tmp/<project>/chats/`, or None
    before its first turn wrote it. The oldest: a resumed session goes on in its first chat
    file, and may leave one of its start's minute holding only a header line."""
    found = sorted(home.glob(f"tmp/*/chats/session-*-{session_id[:8]}.jsonl"))
    for path in found:
        try:
            with path.open(encoding="utf-8") as chat:
                first = json.loads(chat.readline() or "{}")
        except (OSError, ValueError):
            continue
        if isinstance(first, dict) and first.get("sessionId") == session_id:
            return path
    return None


def _records(lines: Iterable[str]) -> Iterable[dict[str, object]]:
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn last line
        if isinstance(record, dict):
            yield record


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def chat_usage(lines: Iterable[str]) -> list[tuple[str, Usage]]:
    """Pure: each model response's tokens, from the chat's `gemini` records (`tokens`). A
    record is written again when its tool calls end (same id): counted once. Gemini counts
    cached input inside `input`; here `input` is what was sent afresh, and its thoughts are
    output."""
    found: list[tuple[str, Usage]] = []
    seen: set[str] = set()
    for record in _records(lines):
        tokens = record.get("tokens")
        if record.get("type") != "gemini" or not isinstance(tokens, dict):
            continue
        key = str(record.get("id", ""))
        if key in seen:
            continue
        seen.add(key)
        cached = _int(tokens.get("cached"))
        usage = Usage(
            input=max(0, _int(tokens.get("input")) - cached),
            output=_int(tokens.get("output")) + _int(tokens.get("thoughts")),
            cache_read=cached,
            cache_write=0,
        )
        found.append((str(record.get("timestamp", "")), usage))
    return found


def summarize_chat(lines: Iterable[str]) -> TranscriptSummary:
    """Pure: the turn's state from a chat's lines: ended when its last message is the model's
    with no tool call waiting, open otherwise. Headless Gemini never waits on a question."""
    entries = 0
    last: Mapping[str, object] | None = None
    for record in _records(lines):
        entries += 1
        if record.get("type") in ("user", "gemini"):
            last = record
    if last is None:
        return TranscriptSummary(entries, Turn.NONE if entries == 0 else Turn.OPEN, None)
    ended = last.get("type") == "gemini" and not last.get("toolCalls")
    return TranscriptSummary(entries, Turn.ENDED if ended else Turn.OPEN, None)


def _lines(path: Path) -> list[str]:
    try:
        return read_transcript(path).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []


def skill_prompt(skill: str, args: str) -> str:
    """How a Gemini session is told to use a skill: in words, since no prompt syntax invokes
    one (it loads a skill with its `activate_skill` tool)."""
    return f"Activate the {skill} skill and follow it: {args}".rstrip()


def open_runtime(
    settings: Settings, lookup_env: Mapping[str, str], state_dir: Path
) -> GeminiRuntime:
    """The registry's opener (`legion.plugins`): Gemini as the project's settings set it up,
    its sessions' homes in the project's state folder `state_dir`."""
    return GeminiRuntime(settings=settings, lookup_env=lookup_env, state_dir=state_dir)


def configured_environment(settings: Settings) -> dict[str, str]:
    """The variables the settings give Legion's view of Gemini: your GEMINI_CLI_HOME (a
    session's own home is Legion's: `GeminiRuntime.prepare`)."""
    home = settings.section(GeminiSettings).home
    return {} if home is None else {"GEMINI_CLI_HOME": str(home)}


def _link_home_to_itself(home: Path) -> None:
    """`home/.gemini` as a link to `home` itself, whatever the session left there."""
    fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            if os.readlink(DOT_GEMINI, dir_fd=fd) == ".":
                return
        except OSError:
            pass
        try:
            os.unlink(DOT_GEMINI, dir_fd=fd)
        except IsADirectoryError:
            import shutil

            shutil.rmtree(DOT_GEMINI, dir_fd=fd)
        except FileNotFoundError:
            pass
        os.symlink(".", DOT_GEMINI, dir_fd=fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class GeminiRuntime(HeadlessRuntime):
    """Gemini, as an `AgentRuntime`: its sessions run in `legion.runtime.gemini.session`."""

    settings: Settings | None = None  # its gemini_bin, gemini_model and gemini_args
    lookup_env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    state_dir: Path | None = None

    product = "Gemini"

    @property
    def name(self) -> str:
        return NAME

    @property
    def own(self) -> GeminiSettings:
        return GeminiSettings() if self.settings is None else self.settings.section(GeminiSettings)

    def resolve(self) -> npm_pin.Binary:
        return gemini_bin.CLI.resolve_configured(self.settings, self.lookup_env)

    def executable(self) -> str:
        return str(self.resolve().path)

    def no_credential(self, env: Mapping[str, str]) -> str | None:
        if any(env.get(name) for name in KEY_VARIABLES):
            return None
        return "Gemini sessions would reach no model (GEMINI_API_KEY is not set): set it"

    def command(
        self,
        session_id: str,
        prompt: str,
        *,
        resume: bool,
        inbox: Path | None = None,
        context: Path | None = None,
    ) -> list[str]:
        """argv of the turn loop for session `session_id`: it runs headless `gemini` turns,
        the first with `prompt` (a resumed session's with its wake-up context before it)."""
        argv = [
            sys.executable,
            "-m",
            "legion.runtime.gemini.session",
            "--gemini",
            self.executable(),
            "--session",
            session_id,
            "--model",
            self.own.model,
        ]
        if resume:
            argv.append("--resume")
        if inbox is not None:
            argv += ["--inbox", str(inbox)]
        if context is not None:
            argv += ["--context", str(context)]
        argv += [f"--gemini-arg={arg}" for arg in self.own.args]
        return [*argv, "--", prompt]

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        return {TRUST_VARIABLE: "true"}  # no trust dialog; Legion chose the workspace

    @property
    def homes(self) -> SessionHomes:
        return SessionHomes(self.state_dir, NAME, HOME_LAYOUT)

    def home(self, session_id: str) -> Path:
        """Session `session_id`'s own GEMINI_CLI_HOME (`legion.runtime.homes`)."""
        return self.homes.of(session_id)

    def sandbox_access(self, env: Mapping[str, str], session_id: str, *, own_login: bool) -> Access:
        installed = Access(readable=install_root(Path(self.executable())))
        return self.homes.access(session_id, None) + installed

    def prepare(
        self,
        env: Mapping[str, str],
        workspace: Path,
        session_id: str,
        *,
        own_login: bool,
        confined: bool,
    ) -> dict[str, str]:
        """Make the session's own home ready: Legion's `settings.json` and skills, read-only
        inside, and `.gemini` linked to the home. Gemini's own login is never shown to a
        session: it reaches the model with an API key. Returns the variables that point
        Gemini at the home."""
        home = self.homes.prepare(
            session_id,
            files={"settings.json": settings_json()},
            fresh={},
            login=None,
            confined=confined,
        )
        _link_home_to_itself(home)
        (home / "legion").mkdir(mode=0o700, exist_ok=True)
        return {"GEMINI_CLI_HOME": str(home)}

    def transcript(self, workspace: Path, session_id: str) -> Path:
        return session_link(self.home(session_id), session_id)

    def summarize(self, transcript: Path) -> TranscriptSummary | None:
        return summarize_turn_loop(transcript, summarize_chat)

    def usage(self, transcript: Path) -> list[tuple[str, Usage]]:
        return chat_usage(_lines(transcript))

    def skill_prompt(self, skill: str, args: str) -> str:
        return skill_prompt(skill, args)
