"""The Claude Code runtime: how a worker session is started, resumed and prepared.

A worker is the interactive CLI (so it can ask questions and be typed to) started with a
deterministic session id and its first prompt on the command line. Before it starts, its
workspace is marked trusted in the CLI's own config, since the trust dialog appears for every
new folder even with `--dangerously-skip-permissions`, and would stop an unattended worker.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legion.config import Settings
from legion.core.model import Mode
from legion.core.task_list import TaskList
from legion.core.usage import Usage
from legion.errors import ConfigError
from legion.plugins import CLAUDE_CODE, runtime_plugin
from legion.runtime.base import worker_skill_args
from legion.runtime.claude import binary as claude_bin
from legion.runtime.claude import hooks
from legion.runtime.claude.paths import (
    config_dir,
    global_config_file,
    newest_activity,
    skills_dir,
    transcript_path,
)
from legion.runtime.claude.settings import ClaudeSettings
from legion.runtime.claude.tasks import read_tasks
from legion.runtime.claude.transcript import session_usage, summarize_file
from legion.runtime.tmux import Tmux
from legion.runtime.transcript import PendingQuestion, TranscriptSummary
from legion.sandbox import install_root
from legion.sandbox.policy import Access
from legion.worker_files import read_text, replace_file

# The API key variables the CLI asks the user to approve once ("Do you want to use this key?").
_API_KEY_VARIABLES = runtime_plugin(CLAUDE_CODE).secret_variables


def skill_prompt(skill: str, args: str) -> str:
    """A slash command: the CLI loads the skill and gives it `args`."""
    return f"/{skill} {args}".rstrip()


def worker_prompt(issue: str, mode: Mode) -> str:
    return skill_prompt("legion-worker", worker_skill_args(issue, mode))


def hook_settings(inbox: Path | None, context: Path | None) -> dict[str, Any]:
    """Legion's hooks for a session: Stop (messages for a busy session, at its turn boundary),
    PreCompact (a snapshot of its state) and SessionStart (the state back after a resume or a
    compaction) only. A hook is a Python start on the path of every event it is installed
    for, and an idle session has its messages typed in instead of handed over by
    UserPromptSubmit."""
    if inbox is None and context is None:
        return {}
    for path in (inbox, context):
        if path is not None:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the hooks lock in it
    return hooks.hooks_settings(
        python=sys.executable,
        inbox=inbox,
        context=context,
        events=(hooks.HookEvent.STOP, hooks.HookEvent.SESSION_START, hooks.HookEvent.PRE_COMPACT),
    )


def split_settings_arg(args: tuple[str, ...]) -> tuple[list[str], dict[str, Any]]:
    """`claude_args` without its `--settings`, and that flag's settings (JSON, or a JSON
    file's path) as an object: the CLI honours only the last `--settings`, so a user's own
    would silently replace Legion's hooks; Legion merges it into its one instead."""
    rest: list[str] = []
    given: list[str] = []
    items = iter(args)
    for arg in items:
        if arg == "--settings":
            value = next(items, None)
            if value is None:
                raise ConfigError("claude_args: --settings has no value")
            given.append(value)
        elif arg.startswith("--settings="):
            given.append(arg.removeprefix("--settings="))
        else:
            rest.append(arg)
    settings: dict[str, Any] = {}
    for value in given:
        settings = hooks.merge_settings(settings, _settings_object(value))
    return rest, settings


def _settings_object(value: str) -> dict[str, Any]:
    try:
        text = value if value.lstrip().startswith("{") else Path(value).expanduser().read_text()
        parsed = json.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"claude_args: --settings {value!r} is neither a JSON object nor a readable JSON "
            f"file ({exc})"
        ) from None
    if not isinstance(parsed, dict):
        raise ConfigError(f"claude_args: --settings {value!r} is not a JSON object")
    return parsed


def open_runtime(settings: Settings, lookup_env: Mapping[str, str]) -> ClaudeRuntime:
    """The registry's opener (`legion.plugins`): Claude Code as the project's settings set it
    up."""
    own = settings.section(ClaudeSettings)
    return ClaudeRuntime(
        settings=settings,
        permission_mode=own.permission_mode,
        extra_args=own.args,
        lookup_env=lookup_env,
    )


def configured_environment(settings: Settings) -> dict[str, str]:
    """The variables the settings give Claude Code's sessions: the project's
    CLAUDE_CONFIG_DIR."""
    folder = settings.section(ClaudeSettings).config_dir
    return {} if folder is None else {"CLAUDE_CONFIG_DIR": str(folder)}


@dataclass(frozen=True)
class ClaudeRuntime:
    """Claude Code, as an `AgentRuntime` (`legion.runtime.base`)."""

    settings: Settings | None = None  # its claude_bin; None: Legion's install, then PATH
    permission_mode: str = "bypass"
    extra_args: tuple[str, ...] = ()
    # Where the cached install and PATH are looked up (the launching process's environment).
    lookup_env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    def resolve(self) -> claude_bin.ClaudeBinary:
        if self.settings is None:
            return claude_bin.resolve(None, self.lookup_env)
        return claude_bin.resolve_configured(self.settings, self.lookup_env)

    def executable(self) -> str:
        return str(self.resolve().path)

    def command(
        self,
        session_id: str,
        prompt: str,
        *,
        resume: bool,
        inbox: Path | None = None,
        context: Path | None = None,
    ) -> list[str]:
        """argv for the interactive CLI: new session (`--session-id`) or resumed (`--resume`).

        `inbox`, `context`: the files of Legion's hooks (`hook_settings`). The CLI reads only
        the last `--settings`, so Legion's, the user's (from `claude_args`) and the hooks go in
        one."""
        argv = [self.executable(), "--resume" if resume else "--session-id", session_id]
        base: dict[str, Any] = {}
        if self.permission_mode == "bypass":
            # The warning it would show once is a consent the config already gave; passed as a
            # flag so the user's own settings.json is left alone.
            argv += ["--dangerously-skip-permissions"]
            base["skipDangerousModePermissionPrompt"] = True
        elif self.permission_mode != "default":
            argv += ["--permission-mode", self.permission_mode]
        extra_args, user_settings = split_settings_arg(self.extra_args)
        settings = hooks.merge_settings(base, user_settings)
        settings = hooks.merge_settings(settings, hook_settings(inbox, context))
        if settings:
            argv += ["--settings", json.dumps(settings)]
        argv += extra_args
        if prompt:
            argv += ["--", prompt]
        return argv

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """What the CLI needs besides the caller's environment."""
        extra: dict[str, str] = {}
        if self.permission_mode == "bypass" and os.geteuid() == 0:
            # As root the CLI refuses to skip permissions unless told it runs in a sandbox;
            # choosing bypass mode for workers is that statement.
            extra["IS_SANDBOX"] = "1"
        return extra

    @property
    def name(self) -> str:
        return CLAUDE_CODE

    def sandbox_access(self, env: Mapping[str, str], *, proxied: bool) -> Access:
        folder = config_dir(env)
        return Access(
            writable=(folder, global_config_file(env)),
            readable=install_root(Path(self.executable())),
            # The login `claude /login` keeps: the daemon's proxy speaks for the session.
            hidden=(folder / ".credentials.json",) if proxied else (),
        )

    def transcript(self, env: Mapping[str, str], workspace: Path, session_id: str) -> Path:
        return transcript_path(env, workspace, session_id)

    def summarize(self, transcript: Path) -> TranscriptSummary | None:
        return summarize_file(transcript)

    def last_activity(self, transcript: Path) -> float | None:
        return newest_activity(transcript)

    def usage(self, transcript: Path) -> list[tuple[str, Usage]]:
        return session_usage(transcript)

    def first_run_dialog(self, screen: str) -> tuple[str, list[str]] | None:
        return first_run_dialog_keys(screen)

    def answer_question(
        self, tmux: Tmux, window_id: str, question: PendingQuestion, answers: Sequence[str]
    ) -> None:
        from legion.runtime.claude.question import answer_question  # it reads CURSOR here

        answer_question(tmux, window_id, question, answers)

    def skill_prompt(self, skill: str, args: str) -> str:
        return skill_prompt(skill, args)

    def worker_prompt(self, issue: str, mode: Mode) -> str:
        return worker_prompt(issue, mode)

    def skills_dir(self, env: Mapping[str, str]) -> Path:
        return skills_dir(env)

    def task_list(self, env: Mapping[str, str], session_id: str) -> TaskList | None:
        return read_tasks(env, session_id)

    def prepare(self, env: Mapping[str, str], workspace: Path) -> None:
        """Answer the CLI's first-run questions for this workspace the way the user's config
        already has: trust the folder, and use the API key Legion was given."""
        real = os.path.realpath(workspace)
        key_suffixes = [env[name][-20:] for name in _API_KEY_VARIABLES if env.get(name)]

        config_file = global_config_file(env)

        def update(config: dict[str, Any]) -> bool:
            if config.get("hasCompletedOnboarding") is not True:
                # Its first screens (theme, login) are the user's to answer, once.
                raise ConfigError(
                    f"Claude Code is not set up yet ({config_file} has not completed onboarding): "
                    "run `claude` once and finish its first-run screens, then try again"
                )
            changed = False
            projects = config.setdefault("projects", {})
            entry = projects.setdefault(real, {})
            if entry.get("hasTrustDialogAccepted") is not True:
                entry["hasTrustDialogAccepted"] = True
                changed = True
            responses = config.setdefault("customApiKeyResponses", {})
            approved = responses.setdefault("approved", [])
            rejected = responses.setdefault("rejected", [])
            for suffix in key_suffixes:
                if suffix not in approved and suffix not in rejected:
                    approved.append(suffix)
                    changed = True
            return changed

        update_json_file(config_file, update)


# Claude Code guards .claude.json with proper-lockfile: a *directory* `<file>.lock`, taken by
# mkdir and considered stale after 10 s. Taking the same lock keeps a running CLI from
# overwriting what Legion adds (and Legion from overwriting the CLI).
LOCK_STALE_S = 10.0
LOCK_WAIT_S = 15.0


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    lock = path.with_name(path.name + ".lock")
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            lock.mkdir()
            break
        except FileExistsError:
            try:
                stale = time.time() - lock.stat().st_mtime > LOCK_STALE_S
            except FileNotFoundError:
                continue  # released meanwhile
            if stale:
                with suppress(OSError):
                    lock.rmdir()
                continue
            if time.monotonic() > deadline:
                raise ConfigError(
                    f"{lock} has been held for over {LOCK_WAIT_S:g} s; if no Claude Code runs, "
                    "remove it"
                ) from None
            time.sleep(0.02 + random.random() * 0.05)
    try:
        yield
    finally:
        with suppress(OSError):
            lock.rmdir()


def update_json_file(path: Path, update: Any) -> None:
    """Read-modify-write a JSON object file atomically, keeping every key we do not touch.

    Under the CLI's own lock, and the replace is atomic, so the CLI never reads a half-written
    file. A file that needs no change is only read, without the lock: every worker's start
    asks, and running CLIs hold that lock often (a start waited up to a quarter second).
    """
    try:
        if not update(json.loads(_read_config(path))):
            return
    except (OSError, ValueError, TypeError, AttributeError):
        pass  # missing, half-written or not an object: the locked path says which
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        try:
            config = json.loads(_read_config(path))
        except FileNotFoundError:
            config = {}
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path}: cannot read Claude Code's config ({exc})") from None
        if not isinstance(config, dict):
            raise ConfigError(f"{path}: Claude Code's config is not a JSON object")
        if not update(config):
            return
        # 0600: it holds which API keys are approved. A new file renamed over the name.
        replace_file(path.parent, path.name, json.dumps(config, indent=2).encode("utf-8"))


# Claude Code's own state file grows with every project it has seen; far past this is not it.
CONFIG_BYTES = 64 * 1024 * 1024


def _read_config(path: Path) -> str:
    """The CLI's config file, which sessions can write: a regular file reached through no link,
    never a fifo or a device (`legion.worker_files`)."""
    return read_text(path.parent, path.name, cap=CONFIG_BYTES)


# The CLI's first-run dialogs, each with the option that means "go ahead". Config written by
# `ClaudeRuntime.prepare` normally prevents them; these are answered if one shows anyway.
FIRST_RUN_DIALOGS: tuple[tuple[str, str], ...] = (
    ("Is this a project you created or one you trust?", "Yes, I trust this folder"),
    ("Do you want to use this API key?", "Yes"),
    ("running in Bypass Permissions mode", "Yes, I accept"),
)
CURSOR = "\u276f"  # the CLI's selection cursor
_OPTION = re.compile(rf"^\s*({CURSOR})?\s*(\S.*?)\s*$")


def first_run_dialog_keys(screen: str) -> tuple[str, list[str]] | None:
    """Pure: when `screen` shows a first-run dialog, the option to pick and the keys that
    pick it (arrows to reach it, then Enter); None otherwise."""
    for marker, choice in FIRST_RUN_DIALOGS:
        if marker not in screen:
            continue
        lines = screen.splitlines()
        start = max(i for i, line in enumerate(lines) if marker in line)
        rows = []  # (is_cursor, text) of the menu under the marker
        for line in lines[start + 1 :]:
            if "Enter to confirm" in line:
                break
            match = _OPTION.match(line)
            if match is not None:
                rows.append((match.group(1) is not None, match.group(2)))
        cursor = next((i for i, (here, _) in enumerate(rows) if here), None)
        target = next((i for i, (_, text) in enumerate(rows) if text == choice), None)
        if cursor is None or target is None:
            return None
        step = "Down" if target > cursor else "Up"
        return choice, [step] * abs(target - cursor) + ["Enter"]
    return None
