"""An offline environment for running the real Claude Code CLI against the fake model server.

`make_claude_env` builds, for one test, a private HOME and CLAUDE_CONFIG_DIR, pre-seeds the
config so the interactive CLI shows none of its first-run dialogs (onboarding, "use this API
key?", "do you trust this folder?", the bypass-permissions warning), and returns the
environment variables that point the CLI at the fake server and switch off everything that
would otherwise reach the internet.  See docs/claude-code-cli.md for what each piece does and
how it was verified.

`find_claude` locates the pinned CLI in Legion's cache (`scripts/test` installs it there); when
it is missing the test fails (never skips) and says which command installs it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from legion.demo.offline import FAKE_API_KEY, base_environment, offline_variables
from legion.runtime.claude import binary as claude_bin

REPO_ROOT = Path(__file__).resolve().parents[2]

# --------------------------------------------------------------------------------------------
# The installed CLI
# --------------------------------------------------------------------------------------------


def claude_code_version() -> str:
    """The Claude Code version Legion pins and tests with."""
    return claude_bin.PINNED_VERSION


# Legion's own cached install, as `scripts/test` (`legion doctor --install`) and `legion demo`
# put it there. Computed at import, from the real HOME: tests/conftest.py gives every test a
# fresh HOME of its own.
_CACHED_AT_IMPORT = claude_bin.CLI.cached_binary(os.environ)


def install_command() -> str:
    return "scripts/test (or: legion doctor --install)"


@cache
def _probe_version(path: str) -> str | None:
    return claude_bin.CLI.version_of(Path(path))


def find_claude() -> Path:
    """The pinned `claude` executable; fails the calling test when it is not installed."""
    version = claude_code_version()
    path = _CACHED_AT_IMPORT
    found = _probe_version(str(path)) if path.exists() else None
    if found != version:
        state = "missing" if not path.exists() else f"reports version {found!r}"
        pytest.fail(
            f"Claude Code CLI {version} is not installed at {path} ({state}).\n"
            f"Install it with: {install_command()}",
            pytrace=False,
        )
    return path


def find_tmux() -> Path:
    found = shutil.which("tmux")
    if found is None:
        pytest.fail("tmux is not installed (apt-get install tmux)", pytrace=False)
    return Path(found)


# --------------------------------------------------------------------------------------------
# Paths the CLI writes
# --------------------------------------------------------------------------------------------

_MAX_PROJECT_DIR = 200


def encode_project_dir(cwd: str | Path) -> str:
    """The directory name under <config>/projects/ that holds the transcripts for `cwd`.

    Every character outside [A-Za-z0-9] becomes '-'.  Names longer than 200 characters are cut
    and get a hash suffix, which this helper does not reproduce (`find_transcript` globs).
    """
    encoded = re.sub(r"[^A-Za-z0-9]", "-", str(cwd))
    if len(encoded) > _MAX_PROJECT_DIR:
        raise ValueError(f"path too long for a predictable project dir: {cwd}")
    return encoded


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


# --------------------------------------------------------------------------------------------
# The environment
# --------------------------------------------------------------------------------------------


@dataclass
class ClaudeEnv:
    root: Path
    home: Path
    config_dir: Path
    workspace: Path
    base_url: str
    api_key: str
    claude: Path
    env: dict[str, str] = field(default_factory=dict)

    # ---- config ---------------------------------------------------------------------------

    @property
    def global_config_path(self) -> Path:
        """`.claude.json`: lives inside CLAUDE_CONFIG_DIR when that is set."""
        return self.config_dir / ".claude.json"

    @property
    def settings_path(self) -> Path:
        return self.config_dir / "settings.json"

    def global_config(self) -> dict[str, Any]:
        return dict(json.loads(self.global_config_path.read_text(encoding="utf-8")))

    def trust(self, directory: Path) -> None:
        """Mark another directory as trusted (no trust dialog when the CLI starts there)."""
        config = self.global_config()
        projects = config.setdefault("projects", {})
        projects.setdefault(os.path.realpath(directory), {})["hasTrustDialogAccepted"] = True
        self.global_config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")

    # ---- transcripts ----------------------------------------------------------------------

    def project_dir(self, cwd: Path | None = None) -> Path:
        cwd = Path(os.path.realpath(cwd or self.workspace))
        return self.config_dir / "projects" / encode_project_dir(cwd)

    def transcript_path(self, session_id: str, cwd: Path | None = None) -> Path:
        return self.project_dir(cwd) / f"{session_id}.jsonl"

    def find_transcript(self, session_id: str) -> Path | None:
        matches = sorted((self.config_dir / "projects").glob(f"*/{session_id}.jsonl"))
        return matches[0] if matches else None

    def read_transcript(self, session_id: str, cwd: Path | None = None) -> list[dict[str, Any]]:
        path = self.transcript_path(session_id, cwd)
        if not path.exists():
            path = self.find_transcript(session_id) or path
        return read_jsonl(path)

    # ---- running --------------------------------------------------------------------------

    def command(self, *args: str) -> list[str]:
        return [str(self.claude), *args]

    def run(
        self,
        *args: str,
        cwd: Path | None = None,
        timeout: float = 60,
        input_text: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run `claude ARGS...` to completion (for -p / --print use)."""
        return subprocess.run(
            self.command(*args),
            cwd=cwd or self.workspace,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input_text if input_text is not None else "",
            check=False,
        )

    def print_mode(
        self,
        prompt: str,
        *extra: str,
        session_id: str | None = None,
        resume: str | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """`claude -p PROMPT --dangerously-skip-permissions` with a session id or --resume."""
        args = ["-p", prompt, "--dangerously-skip-permissions", *extra]
        if session_id is not None:
            args += ["--session-id", session_id]
        if resume is not None:
            args += ["--resume", resume]
        return self.run(*args, timeout=timeout)


def new_session_id() -> str:
    return str(uuid.uuid4())


def write_config(
    config_dir: Path,
    *,
    api_key: str,
    trusted_dirs: Iterable[Path],
    settings: Mapping[str, Any] | None = None,
) -> None:
    """Pre-seed `.claude.json` and `settings.json` so no first-run dialog blocks the CLI."""
    config_dir.mkdir(parents=True, exist_ok=True)
    global_config = {
        "hasCompletedOnboarding": True,
        "customApiKeyResponses": {"approved": [api_key[-20:]], "rejected": []},
        "projects": {os.path.realpath(d): {"hasTrustDialogAccepted": True} for d in trusted_dirs},
    }
    (config_dir / ".claude.json").write_text(json.dumps(global_config, indent=2), "utf-8")
    all_settings: dict[str, Any] = {"skipDangerousModePermissionPrompt": True}
    all_settings.update(settings or {})
    (config_dir / "settings.json").write_text(json.dumps(all_settings, indent=2), "utf-8")


def make_claude_env(
    root: Path,
    base_url: str,
    *,
    workspace: Path | None = None,
    trusted_dirs: Sequence[Path] = (),
    api_key: str = FAKE_API_KEY,
    block_outbound: bool = True,
    settings: Mapping[str, Any] | None = None,
    extra_env: Mapping[str, str] | None = None,
    claude: Path | None = None,
) -> ClaudeEnv:
    """A private HOME, config dir and workspace under `root`, and the env to run the CLI in.

    With `block_outbound` (the default) HTTP(S)_PROXY point at `base_url`: the fake server
    answers proxy requests with 403 and records them, so a test can assert
    `server.outbound_attempts() == []`.
    """
    root.mkdir(parents=True, exist_ok=True)
    home = root / "home"
    config_dir = root / "claude-config"
    workspace = workspace or root / "workspace"
    for directory in (home, config_dir, workspace):
        directory.mkdir(parents=True, exist_ok=True)
    write_config(
        config_dir,
        api_key=api_key,
        trusted_dirs=[workspace, *trusted_dirs],
        settings=settings,
    )
    env = base_environment()
    env |= offline_variables(
        base_url,
        home=home,
        config_dir=config_dir,
        api_key=api_key,
        proxy_url=base_url if block_outbound else None,
    )
    env |= dict(extra_env or {})
    return ClaudeEnv(
        root=root,
        home=home,
        config_dir=config_dir,
        workspace=workspace,
        base_url=base_url,
        api_key=api_key,
        claude=claude or find_claude(),
        env=env,
    )


# --------------------------------------------------------------------------------------------
# A private tmux server
# --------------------------------------------------------------------------------------------


class PrivateTmux:
    """A tmux server on its own socket (`tmux -S SOCK -f /dev/null`), for one test.

    The server is started by the first `new_session` with the environment given there, so
    the panes see exactly that environment.  `kill()` ends the server and everything in it.
    """

    def __init__(self, socket: Path, *, width: int = 200, height: int = 50) -> None:
        self.socket = socket
        self.width = width
        self.height = height
        self.tmux = find_tmux()

    def _cmd(self, *args: str) -> list[str]:
        return [str(self.tmux), "-S", str(self.socket), "-f", "/dev/null", *args]

    def run(self, *args: str, check: bool = True) -> str:
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
        out = subprocess.run(
            self._cmd(*args), capture_output=True, text=True, timeout=30, env=env, check=False
        )
        if check and out.returncode != 0:
            raise RuntimeError(f"tmux {' '.join(args)} failed: {out.stderr.strip()}")
        return out.stdout

    def new_session(
        self,
        name: str,
        command: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
    ) -> None:
        """Start `command` in a new detached session; the pane stays after the command exits."""
        clean_env = {k: v for k, v in env.items() if k not in ("TMUX", "TMUX_PANE")}
        env_args = [a for k, v in clean_env.items() for a in ("-e", f"{k}={v}")]
        args = [
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            str(self.width),
            "-y",
            str(self.height),
            "-c",
            str(cwd),
            *env_args,
            *command,
            ";",
            "set-option",
            "-t",
            name,
            "remain-on-exit",
            "on",
        ]
        out = subprocess.run(
            self._cmd(*args),
            capture_output=True,
            text=True,
            timeout=30,
            env=clean_env,
            cwd=cwd,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"tmux new-session failed: {out.stderr.strip()}")

    def capture(self, target: str) -> str:
        """The visible screen of `target` as plain text (no colours), trailing blanks removed."""
        text = self.run("capture-pane", "-p", "-t", target)
        return "\n".join(line.rstrip() for line in text.splitlines()).rstrip() + "\n"

    def send_text(self, target: str, text: str) -> None:
        """Type `text` literally (no key-name lookup)."""
        self.run("send-keys", "-t", target, "-l", text)

    def send_keys(self, target: str, *keys: str) -> None:
        """Send tmux key names, e.g. "Enter", "Escape", "Down", "Tab", "2"."""
        self.run("send-keys", "-t", target, *keys)

    def pane_dead(self, target: str) -> tuple[bool, int | None]:
        out = self.run("display-message", "-p", "-t", target, "#{pane_dead} #{pane_dead_status}")
        dead, _, status = out.strip().partition(" ")
        return dead == "1", int(status) if status else None

    def wait_for(
        self,
        target: str,
        pattern: str | re.Pattern[str],
        *,
        timeout: float = 45.0,
        interval: float = 0.2,
    ) -> str:
        """Poll the pane until `pattern` (substring or regex) shows; return the screen."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.capture(target)
            found = (
                pattern.search(screen) is not None
                if isinstance(pattern, re.Pattern)
                else pattern in screen
            )
            if found:
                return screen
            if self.pane_dead(target)[0]:
                break
            time.sleep(interval)
        raise TimeoutError(f"{pattern!r} did not show in tmux pane {target}; screen:\n{screen}")

    def kill(self) -> None:
        self.run("kill-server", check=False)
        self.socket.unlink(missing_ok=True)


# Markers of the interactive CLI's screen (2.1.328), see docs/claude-code-cli.md.
CURSOR = "\N{HEAVY RIGHT-POINTING ANGLE QUOTATION MARK ORNAMENT}"  # selected row / input prompt
IDLE_FOOTER = "bypass permissions on"  # bottom line while --dangerously-skip-permissions
QUESTION_FOOTER = "Enter to select"  # AskUserQuestion / select dialogs
