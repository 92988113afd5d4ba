"""Which Claude Code CLI Legion runs, and installing the version Legion is tested with.

One resolver serves the daemon, the workers, `legion start`, `legion dispatch`, `legion demo`
and `legion doctor`, so they can never disagree: the `claude_bin` setting (a flag,
`LEGION_CLAUDE_BIN`, or a config file), else Legion's own cached install of the pinned version
(`$XDG_CACHE_HOME/legion/claude-code`, which `legion demo`, `legion doctor --install` and
`scripts/test` fill), else `claude` on `PATH`. The cached install comes before `PATH` because it
is the version Legion's tests drive; a user who wants another says so with `claude_bin`.

The npm package carries the native binary in a per-platform optional dependency fetched from
the npm registry like any package; its postinstall only links that binary into place, and is
run by hand when npm skipped it (`--ignore-scripts`, a policy).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from legion.errors import ToolMissingError

if TYPE_CHECKING:
    from legion.config import Settings

PINNED_VERSION = "2.1.328"
NPM_PACKAGE = "@anthropic-ai/claude-code"


def cache_prefix(env: Mapping[str, str]) -> Path:
    """The npm prefix of Legion's own Claude Code install."""
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "legion" / "claude-code"


def cached_binary(env: Mapping[str, str]) -> Path:
    return cache_prefix(env) / "node_modules" / ".bin" / "claude"


def fix_hint(env: Mapping[str, str]) -> str:
    return (
        f"run `legion doctor --install` (installs Claude Code {PINNED_VERSION} into "
        f"{cache_prefix(env)} with npm), or set claude_bin (LEGION_CLAUDE_BIN) to your `claude`"
    )


@dataclass(frozen=True)
class ClaudeBinary:
    path: Path
    source: str  # where the choice came from: "setting (env)", "cached install", "PATH"


def resolve(
    configured: Path | None, env: Mapping[str, str], *, configured_source: str = "setting"
) -> ClaudeBinary:
    """The Claude Code CLI to run; a ToolMissingError naming the cause and the fix if none."""
    search_path = env.get("PATH", os.defpath)
    if configured is not None:
        text = str(configured)
        found = shutil.which(text, path=search_path) if os.sep not in text else None
        path = Path(found) if found else configured
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ToolMissingError(
                f"claude_bin ({configured_source}) is {text!r}, which is not an executable file; "
                f"fix the setting or unset it to use Legion's own install ({fix_hint(env)})"
            )
        return ClaudeBinary(path, f"claude_bin ({configured_source})")
    cached = cached_binary(env)
    if cached.is_file() and os.access(cached, os.X_OK):
        return ClaudeBinary(cached, "cached install")
    found = shutil.which("claude", path=search_path)
    if found is not None:
        return ClaudeBinary(Path(found), "PATH")
    raise ToolMissingError(f"Claude Code CLI not found: {fix_hint(env)}")


def resolve_configured(settings: Settings, env: Mapping[str, str]) -> ClaudeBinary:
    """`resolve` with the claude_bin setting and where it came from."""
    source = settings.sources.get("claude_bin", "setting")
    named = {"env": "LEGION_CLAUDE_BIN", "flag": "the command line"}.get(source, source)
    return resolve(settings.claude_bin, env, configured_source=named)


def version_of(binary: Path) -> str | None:
    """What `claude --version` says (it makes no network request), or None."""
    try:
        out = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = out.stdout.split()
    return words[0] if out.returncode == 0 and words else None


# The system's CA bundle (Debian/Ubuntu, Fedora). Node trusts only its own CA list, so behind a
# proxy whose CA the system trusts (curl, pip and git work) npm fails with a certificate error.
_SYSTEM_CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


def _system_ca(env: Mapping[str, str]) -> dict[str, str]:
    """Have npm trust the system's CAs as well as its own, unless the user chose already."""
    if env.get("NODE_EXTRA_CA_CERTS") or env.get("npm_config_cafile"):
        return {}
    bundle = next((path for path in _SYSTEM_CA_BUNDLES if Path(path).is_file()), None)
    return {} if bundle is None else {"NODE_EXTRA_CA_CERTS": bundle}


def install(env: Mapping[str, str], say: Callable[[str], None]) -> Path:
    """Install the pinned Claude Code into the cache, unless it is there already; its path.

    Under a lock, so two commands that both find it missing install it once."""
    prefix = cache_prefix(env)
    binary = cached_binary(env)
    prefix.mkdir(parents=True, exist_ok=True)
    with (prefix / ".install.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if version_of(binary) == PINNED_VERSION:
            return binary
        npm = shutil.which("npm", path=env.get("PATH", os.defpath))
        if npm is None:
            raise ToolMissingError(
                f"installing Claude Code {PINNED_VERSION} needs npm: install Node.js and npm "
                "(e.g. apt-get install npm), or set claude_bin (LEGION_CLAUDE_BIN) to a `claude`"
            )
        say(f"Installing Claude Code {PINNED_VERSION} into {prefix} with npm (once)...")
        npm_env = {**env, "NO_UPDATE_NOTIFIER": "1", **_system_ca(env)}
        result = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "--save-exact",
             "--prefix", str(prefix), f"{NPM_PACKAGE}@{PINNED_VERSION}"],
            capture_output=True, text=True, check=False, env=npm_env,
        )  # fmt: skip
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise ToolMissingError(f"npm could not install Claude Code {PINNED_VERSION}: {last}")
        if version_of(binary) != PINNED_VERSION:
            # The postinstall that puts the native binary in place did not run: run it.
            package = prefix / "node_modules" / NPM_PACKAGE
            node = shutil.which("node", path=env.get("PATH", os.defpath)) or "node"
            subprocess.run(
                [node, "install.cjs"], cwd=package, capture_output=True, check=False, env=npm_env
            )
        got = version_of(binary)
        if got != PINNED_VERSION:
            raise ToolMissingError(
                f"expected Claude Code {PINNED_VERSION} at {binary} after installing, "
                f"got {got or 'nothing that runs'}"
            )
        say(f"Installed Claude Code {PINNED_VERSION}: {binary}")
        return binary
