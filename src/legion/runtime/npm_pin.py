"""Installing a pinned agent CLI from npm into Legion's cache, once, and finding the one to run:
Claude Code, Codex and the Gemini CLI all come this way (each runtime's `binary` module declares
its `NpmCli`)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from legion.errors import LegionError, ToolMissingError
from legion.plugins import DoctorCheck

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
    product: str  # as people call it
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


# What each CLI's `--version` said, by the file asked (`NpmCli.version_of`).
_VERSIONS: dict[tuple[str, int, int, int], str] = {}


@dataclass(frozen=True)
class NpmCli:
    """An agent CLI Legion runs, installed from npm at a pinned version: what a runtime's
    `binary` module declares, and what every one of them does with it. The `<command>_bin`
    setting (when the caller has one), else Legion's own cached install of the pinned version
    (`$XDG_CACHE_HOME/legion/<folder>`, which `legion doctor --install` fills), else `<command>`
    on `PATH`."""

    product: str  # as people call it
    command: str  # the launcher npm links, and its name on PATH
    package: str  # the npm package
    version: str  # the pinned version
    folder: str  # the cache's folder for it
    bin_of: Callable[[Settings], Path | None]  # the `<command>_bin` setting's value
    version_word: int = -1  # which word of `<command> --version` is the version
    version_timeout: float = 30.0  # seconds `--version` may take (a big node bundle loads)
    version_env: Mapping[str, str] = field(default_factory=dict)  # added to `--version`'s

    @property
    def setting(self) -> str:
        return f"{self.command}_bin"

    @property
    def pin(self) -> Pin:
        variable = f"LEGION_{self.setting.upper()}"
        instead = f"set {self.setting} ({variable}) to a `{self.command}`"
        return Pin(self.product, self.package, self.version, instead)

    def cache_prefix(self, env: Mapping[str, str]) -> Path:
        """The npm prefix of Legion's own install of it (beside the other CLIs')."""
        base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
        return Path(base) / "legion" / self.folder

    def cached_binary(self, env: Mapping[str, str]) -> Path:
        """The launcher npm links into the cache (what users run as `<command>`)."""
        return self.cache_prefix(env) / "node_modules" / ".bin" / self.command

    def fix_hint(self, env: Mapping[str, str]) -> str:
        variable = f"LEGION_{self.setting.upper()}"
        return (
            f"run `legion doctor --install` (installs {self.product} {self.version} into "
            f"{self.cache_prefix(env)} with npm), or set {self.setting} ({variable}) to your "
            f"`{self.command}`"
        )

    def resolve(
        self, configured: Path | None, env: Mapping[str, str], *, configured_source: str = "setting"
    ) -> Binary:
        """The CLI to run; a ToolMissingError naming the cause and the fix if none."""
        return resolve_binary(
            configured,
            env,
            setting=self.setting,
            command=self.command,
            product=self.product,
            cached=self.cached_binary(env),
            fix=self.fix_hint(env),
            configured_source=configured_source,
        )

    def resolve_configured(self, settings: Settings | None, env: Mapping[str, str]) -> Binary:
        """`resolve` with the setting and where it came from (None: no settings)."""
        if settings is None:
            return self.resolve(None, env)
        named = setting_source(settings.sources, self.setting)
        return self.resolve(self.bin_of(settings), env, configured_source=named)

    def version_of(self, binary: Path) -> str | None:
        """What `<command> --version` says (no network request), or None. Asked once per
        file as it is (`legion doctor --install` asks before and after installing, and a
        node bundle takes seconds to load)."""
        try:
            found = os.stat(binary)  # through the launcher's link: the file that runs
        except OSError:
            return None
        key = (str(binary), found.st_ino, found.st_mtime_ns, found.st_size)
        if key not in _VERSIONS:
            said = self._ask_version(binary)
            if said is None:
                return None  # asked again next time: a loaded machine may have timed it out
            _VERSIONS[key] = said
        return _VERSIONS[key]

    def _ask_version(self, binary: Path) -> str | None:
        try:
            out = subprocess.run(
                [str(binary), "--version"],
                capture_output=True, text=True, timeout=self.version_timeout, check=False,
                env={**os.environ, **self.version_env},
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return None
        words = out.stdout.split()
        return words[self.version_word] if out.returncode == 0 and words else None

    def install(
        self,
        env: Mapping[str, str],
        say: Callable[[str], None],
        *,
        repair: Callable[[Mapping[str, str]], None] | None = None,
        missing_hint: Callable[[], str] = lambda: "",
    ) -> Path:
        """Install the pinned version into the cache, unless it is there; the launcher's path
        (`install_pinned`)."""
        return install_pinned(
            self.pin, self.cache_prefix(env), self.cached_binary(env), self.version_of, env, say,
            repair=repair, missing_hint=missing_hint,
        )  # fmt: skip

    def configured_or_installed(
        self, env: Mapping[str, str], install: Callable[[], object]
    ) -> Binary:
        """`configured_or_installed` for this CLI, `install` installing it."""
        return configured_or_installed(
            env, self.bin_of, install, lambda settings: self.resolve_configured(settings, env)
        )


def installed_checks(
    cli: NpmCli,
    settings: Settings | None,
    roles: Sequence[str],
    env: Mapping[str, str],
    *,
    install: str,
    more: Callable[[bool], list[DoctorCheck]],
) -> list[DoctorCheck]:
    """`legion doctor`'s lines for a CLI a role may run on (`roles`: those that do): found
    (required when a role runs on it), runs, the version Legion is tested with (a warning),
    then `more(needed)` (its credential, its config). While no role runs on it, what is wrong
    is information, not a warning. `install`: the command that installs it."""
    needed = bool(roles)
    name = cli.command
    try:
        binary = cli.resolve_configured(settings, env)
    except LegionError as exc:
        if not needed:
            unused = f"not found; not used (no role runs on {name})"
            return [DoctorCheck(name, False, unused, "", False)]
        return [DoctorCheck(name, False, f"not found (used by {', '.join(roles)})", str(exc))]
    version = cli.version_of(binary.path)
    cached = f"`{install}` puts the tested version in Legion's cache"
    if version is None:
        broken = f"{binary.path} ({binary.source}) does not run"
        return [DoctorCheck(name, False, broken, f"reinstall it ({cached})", required=needed)]
    used = f"used by {', '.join(roles)}" if needed else f"no role runs on {name}"
    found = f"{version} at {binary.path} ({binary.source}); {used}"
    checks = [DoctorCheck(name, True, found, required=needed)]
    if version != cli.version:
        tested = f"{version}; Legion is tested with {cli.version}"
        checks.append(DoctorCheck(f"{name} version", False, tested, cached, required=False))
    checks += more(needed)
    if not needed:
        unused = f"(not needed: no role runs on {name})"
        checks = [
            check if check.ok else check._replace(detail=f"{check.detail} {unused}", fix="")
            for check in checks
        ]
    return checks
