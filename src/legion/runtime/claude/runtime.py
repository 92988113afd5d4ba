"""The Claude Code runtime: how a worker session is started, resumed and prepared.

A worker is the interactive CLI (so it can ask questions and be typed to) started with a
deterministic session id and its first prompt on the command line. Before it starts, its
workspace is marked trusted in the CLI's own config, since the trust dialog appears for every
new folder even with `--dangerously-skip-permissions`, and would stop an unattended worker.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from legion.config.settings import Settings
from legion.core.model import Mode
from legion.core.task_list import TaskList
from legion.core.usage import Usage
from legion.errors import ConfigError
from legion.files.worker_written import replace_file
from legion.plugins import CLAUDE_CODE, runtime_plugin
from legion.runtime.base import worker_skill_args
from legion.runtime.claude import binary as claude_bin
from legion.runtime.claude import hooks
from legion.runtime.claude.paths import config_dir, newest_activity, transcript_path
from legion.runtime.claude.settings import ClaudeSettings
from legion.runtime.claude.tasks import read_tasks
from legion.runtime.claude.transcript import session_usage, summarize_file
from legion.runtime.homes import HomeLayout, SessionHomes
from legion.runtime.npm_pin import Binary
from legion.runtime.tmux import Tmux
from legion.runtime.transcript import PendingQuestion, TranscriptSummary
from legion.sandbox import install_root
from legion.sandbox.policy import Access

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


def open_runtime(
    settings: Settings, lookup_env: Mapping[str, str], state_dir: Path
) -> ClaudeRuntime:
    """The registry's opener (`legion.plugins`): Claude Code as the project's settings set it
    up, its sessions' homes in the project's state folder `state_dir`."""
    own = settings.section(ClaudeSettings)
    return ClaudeRuntime(
        settings=settings,
        permission_mode=own.permission_mode,
        extra_args=own.args,
        lookup_env=lookup_env,
        state_dir=state_dir,
    )


def configured_environment(settings: Settings) -> dict[str, str]:
    """The variables the settings give Legion's view of Claude Code: your CLAUDE_CONFIG_DIR,
    where your login is (a session's own home is Legion's: `ClaudeRuntime.prepare`)."""
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
    # The project's state folder, where each session's own home is (`legion.runtime.homes`).
    state_dir: Path | None = None

    def resolve(self) -> Binary:
        if self.settings is None:
            return claude_bin.CLI.resolve(None, self.lookup_env)
        return claude_bin.CLI.resolve_configured(self.settings, self.lookup_env)

    def executable(self) -> str:
        return str(self.resolve().path)

    def no_credential(self, env: Mapping[str, str]) -> str | None:
        from legion.runtime.claude.doctor import credential_check

        found = credential_check(env)
        if found.ok:
            return None
        return f"Claude Code sessions would reach no model (no key, no login): {found.fix}"

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
        # Legion runs the CLI it pinned (`legion doctor --install`): a session never updates it
        # (the pinned CLI reads this variable; its config's `autoUpdates: false` it would move
        # into settings.json, which is Legion's and read-only in the session's home).
        extra: dict[str, str] = {"DISABLE_AUTOUPDATER": "1"}
        if self.permission_mode == "bypass" and os.geteuid() == 0:
            # As root the CLI refuses to skip permissions unless told it runs in a sandbox;
            # choosing bypass mode for workers is that statement.
            extra["IS_SANDBOX"] = "1"
        return extra

    @property
    def name(self) -> str:
        return CLAUDE_CODE

    @property
    def homes(self) -> SessionHomes:
        return SessionHomes(self.state_dir, self.name, HOME_LAYOUT)

    def home(self, session_id: str) -> Path:
        """Session `session_id`'s own CLAUDE_CONFIG_DIR (`legion.runtime.homes`)."""
        return self.homes.of(session_id)

    def sandbox_access(self, env: Mapping[str, str], session_id: str, *, own_login: bool) -> Access:
        login = _user_login(env) if own_login else None
        installed = Access(readable=install_root(Path(self.executable())))
        return self.homes.access(session_id, login) + installed

    def transcript(self, workspace: Path, session_id: str) -> Path:
        return transcript_path(self.home(session_id), workspace, session_id)

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

    def task_list(self, session_id: str) -> TaskList | None:
        return read_tasks(self.home(session_id), session_id)

    def prepare(
        self,
        env: Mapping[str, str],
        workspace: Path,
        session_id: str,
        *,
        own_login: bool,
        confined: bool,
    ) -> dict[str, str]:
        """Make the session's own home (`legion.runtime.homes`) ready for its start in
        `workspace`, with the CLI's first-run questions answered there: its onboarding done,
        the workspace trusted, the API key Legion was given approved. `own_login`: the daemon
        holds no key for the session, which then uses your login (read-only). Returns the
        variables that point the CLI at its home."""
        key_suffixes = [env[name][-20:] for name in _API_KEY_VARIABLES if env.get(name)]
        state = {
            # Its first screens (theme, login) are answered by Legion's settings.
            "hasCompletedOnboarding": True,
            "projects": {os.path.realpath(workspace): {"hasTrustDialogAccepted": True}},
            "customApiKeyResponses": {"approved": key_suffixes, "rejected": []},
        }
        home = self.homes.prepare(
            session_id,
            files={"settings.json": b"{}\n"},
            fresh={".claude.json": json.dumps(state, indent=2).encode("utf-8")},
            login=_user_login(env) if own_login else None,
            confined=confined,
        )
        _carry_over(config_dir(env), home, workspace, session_id)
        variables = {"CLAUDE_CONFIG_DIR": str(home)}
        if confined and not own_login:
            # Its network reaches the model and what `sandbox_egress` allows: its telemetry and
            # error reports would only be refused there, each counted as a host to allow.
            variables["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
        return variables


# What of a session's home is configuration, Legion's and read-only inside (the pinned CLI
# loads each from its config folder: docs/claude-code-cli.md), and its login file.
HOME_LAYOUT = HomeLayout(
    config_files=("settings.json", "CLAUDE.md"),
    config_folders=("skills", "commands", "agents", "plugins", "rules", "output-styles"),
    login=".credentials.json",
)


def _user_login(env: Mapping[str, str]) -> Path | None:
    """Your Claude Code login (`claude /login` keeps it in your config folder), if any."""
    found = config_dir(env) / HOME_LAYOUT.login
    return found if found.is_file() else None


def _carry_over(user_home: Path, home: Path, workspace: Path, session_id: str) -> None:
    """A session an older Legion ran in your own config folder goes on in its own home: its
    transcript is copied there once (a regular file reached through no link), so that it is
    resumed rather than started again."""
    from legion.files.worker_written import read_transcript

    target = transcript_path(home, workspace, session_id)
    if target.exists():
        return
    try:
        data = read_transcript(transcript_path(user_home, workspace, session_id))
    except OSError:
        return  # none, or not one Legion would read
    replace_file(home, target.relative_to(home), data, folders=True)


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
