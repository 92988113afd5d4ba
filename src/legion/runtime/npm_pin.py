"""Installing a pinned agent CLI from npm into Legion's cache, once: Claude Code and Codex
both come this way (`runtime/claude/binary.py`, `runtime/codex/binary.py`)."""

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
    from legion.config.settings import Settings

# The system's CA bundle (Debian/Ubuntu, Fedora). Node trusts only its own CA list, so behind a
# proxy whose CA the system trusts (curl, pip and git work) npm fails with a certificate error.
_SYSTEM_CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


def system_ca(env: Mapping[str, str]) -> dict[str, str]:
    """Have npm trust the system's CAs as well as its own, unless the user chose already."""
    if env.get("NODE_EXTRA_CA_CERTS") or env.get("npm_config_cafile"):
        return {}
    bundle = next((path for path in _SYSTEM_CA_BUNDLES if Path(path).is_file()), None)
    return {} if bundle is None else {"NODE_EXTRA_CA_CERTS": bundle}


@dataclass(frozen=True)
class Binary:
    path: Path
    source: str  # where the choice came from: "claude_bin (env)", "cached install", "PATH"


def resolve_binary(
    configured: Path | None,
    env: Mapping[str, str],
    *,
    setting: str,
    command: str,
    product: str,
    cached: Path,
    fix: str,
    configured_source: str = "setting",
) -> Binary:
    """The CLI to run: the `setting` when given (a name on PATH or a path), else the cached
    pinned install, else `command` on PATH; a ToolMissingError naming the cause and `fix`."""
    search_path = env.get("PATH", os.defpath)
    if configured is not None:
        text = str(configured)
        found = shutil.which(text, path=search_path) if os.sep not in text else None
        path = Path(found) if found else configured
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ToolMissingError(
                f"{setting} ({configured_source}) is {text!r}, which is not an executable file; "
                f"fix the setting or unset it to use Legion's own install ({fix})"
            )
        return Binary(path, f"{setting} ({configured_source})")
    if cached.is_file() and os.access(cached, os.X_OK):
        return Binary(cached, "cached install")
    found = shutil.which(command, path=search_path)
    if found is not None:
        return Binary(Path(found), "PATH")
    raise ToolMissingError(f"{product} CLI not found: {fix}")


@dataclass(frozen=True)
class Pin:
    product: str  # as people call it: "Claude Code"
    package: str  # the npm package
    version: str
    instead: str  # what a user without npm can do: "set claude_bin (LEGION_CLAUDE_BIN) to …"


def install_pinned(
    pin: Pin,
    prefix: Path,
    binary: Path,
    version_of: Callable[[Path], str | None],
    env: Mapping[str, str],
    say: Callable[[str], None],
    *,
    repair: Callable[[Mapping[str, str]], None] | None = None,
    missing_hint: Callable[[], str] = lambda: "",
) -> Path:
    """Install `pin` under `prefix` unless `binary` already runs that version; `binary`.

    Under a lock, so two commands that both find it missing install it once. `repair` runs
    (with npm's environment) when the install left the binary not running, e.g. a postinstall
    npm skipped; `missing_hint` adds to the error when it still does not run."""
    prefix.mkdir(parents=True, exist_ok=True)
    with (prefix / ".install.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if version_of(binary) == pin.version:
            return binary
        npm = shutil.which("npm", path=env.get("PATH", os.defpath))
        if npm is None:
            raise ToolMissingError(
                f"installing {pin.product} {pin.version} needs npm: install Node.js and npm "
                f"(e.g. apt-get install npm), or {pin.instead}"
            )
        say(f"Installing {pin.product} {pin.version} into {prefix} with npm (once)...")
        npm_env = {**env, "NO_UPDATE_NOTIFIER": "1", **system_ca(env)}
        result = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "--save-exact",
             "--prefix", str(prefix), f"{pin.package}@{pin.version}"],
            capture_output=True, text=True, check=False, env=npm_env,
        )  # fmt: skip
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise ToolMissingError(f"npm could not install {pin.product} {pin.version}: {last}")
        if repair is not None and version_of(binary) != pin.version:
            repair(npm_env)
        got = version_of(binary)
        if got != pin.version:
            raise ToolMissingError(
                f"expected {pin.product} {pin.version} at {binary} after installing, "
                f"got {got or 'nothing that runs'}{missing_hint()}"
            )
        say(f"Installed {pin.product} {pin.version}: {binary}")
        return binary


def setting_source(sources: Mapping[str, str], setting: str) -> str:
    """How to name where a path setting came from (`codex_bin (LEGION_CODEX_BIN)`)."""
    source = sources.get(setting, "setting")
    return {"env": f"LEGION_{setting.upper()}", "flag": "the command line"}.get(source, source)


def configured_or_installed(
    env: Mapping[str, str],
    configured: Callable[[Settings], object],
    install: Callable[[], object],
    resolve: Callable[[Settings], Binary],
) -> Binary:
    """The CLI `legion demo` runs (the registry's `DemoPlugin.binary`): the one configured
    (`configured(settings)` not None), else the pinned version in Legion's cache, installed
    there first if it is missing. The same resolver then finds it for the daemon and every
    worker."""
    from legion.config.resolve import machine_settings

    settings = machine_settings(env)
    if configured(settings) is None:
        install()
    return resolve(settings)
