"""The one registry of Legion's plugins: the integrations (where issues and pull requests live)
and the runtimes (the agent CLIs sessions run on).

Each plugin declares here its name, the settings it owns, the secret variables it reads, and
where its code is, as "module:attribute" strings imported only when a project uses it (so
`legion --version` never loads an HTTP client): how it is opened, what `legion init` asks of it,
what `legion doctor` checks. No other module names a backend or a runtime: they ask here.
"Adding an integration or a runtime" in docs/architecture.md says what a plugin declares.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from legion.errors import ConfigError

# Records are NamedTuples, not dataclasses: this module is imported by every command, and a
# dataclass costs a millisecond or more to make.

# The names, as settings and the bus write them.
EMBEDDED = "embedded"
LINEAR = "linear"
GITHUB = "github"
CLAUDE_CODE = "claude-code"
CODEX = "codex"
GEMINI = "gemini"


class DoctorCheck(NamedTuple):
    """One line of `legion doctor`: what is there, or what is wrong and how to fix it."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True  # a failed optional check is a warning


class DoctorReport(NamedTuple):
    """A runtime's checks, and whether its CLI is missing where it should be installed (then
    npm, which installs it, is required)."""

    checks: list[DoctorCheck]
    needs_install: bool


class InitOption(NamedTuple):
    """An option of `legion init` that an integration reads (`--team` for Linear)."""

    name: str  # the option's name without dashes; the CLI declares it with this help
    help: str


class InitRequest(NamedTuple):
    """What `legion init` was asked for, as an integration's init function sees it."""

    tracker: str
    forge: str
    key: str  # the issue key given or the default
    key_given: bool
    options: Mapping[str, str | None]  # every InitOption's value, None when not given
    repo_path: Path
    # The setting's value checked as reading the config would check it ("option --team").
    check: Callable[[str, Any, str], Any]


class InitChoice(NamedTuple):
    settings: Mapping[str, Any]  # settings to write
    key: str | None = None  # the issue key this integration gives the project


class BackendPlugin(NamedTuple):
    """An integration: a tracker, a forge, or both (GitHub)."""

    name: str
    description: str  # for help text: what it is
    tracker: str | None = None  # "module:function" (project, database) -> Tracker
    forge: str | None = None  # "module:function" (project, database) -> Forge
    # Remote: it holds the user's credential, so sessions reach it through the daemon's
    # relay, and workspaces push their branches to the project's remote.
    remote: bool = True
    # "module:function" (project) -> [(name, ok, detail)]: `legion doctor`'s checks of it as
    # the tracker, and as the forge
    tracker_doctor: str | None = None
    forge_doctor: str | None = None
    # Variables holding its credential: kept from every session Legion starts.
    secret_variables: tuple[str, ...] = ()
    # "module:Class": its own typed settings section (`legion.setting_spec.SettingsSection`)
    settings: str | None = None
    # "module:function" (InitRequest) -> InitChoice: the settings its `legion init` options give
    init: str | None = None
    init_options: tuple[InitOption, ...] = ()
    aliases: tuple[str, ...] = ()  # earlier names a config may still hold


class ModelRoute(NamedTuple):
    """How the daemon's model proxy (`legion.proxy`) serves a runtime's sessions: what its CLI
    may send, where, to which upstream, and how a session is pointed there."""

    # The entry of the proxy's route table its CLI's requests are checked against
    # (`legion.proxy.routes.APIS`): the routes, headers and body fields of the API it speaks.
    api: str
    # The path the proxy serves it under ("": the proxy's root); each runtime has its own.
    mount: str
    # "module:function" (the daemon's environment with `environment`'s variables) ->
    # (the API's base URL, the headers carrying the daemon's credential) or None: the daemon
    # holds no key for it and does not serve it (unless `own_login`: then no headers).
    upstream: str
    # "module:function" (a session's environment, the proxy's URL for it, the session's
    # capability or None when the daemon holds no key for it) -> that environment pointed at
    # the proxy (as it was when the CLI cannot be pointed there).
    point: str
    # "module:function" (environment) -> (every model key variable it knows of, those its CLI
    # reads for the provider it uses): what `legion.proxy.model_key_variables` withholds.
    key_variables: str
    # Served, and metered, even when the daemon holds no key: the session's own login passes
    # through the proxy (the session is then known by what its CLI sends, not contained).
    own_login: bool = False


class DemoPlugin(NamedTuple):
    """What `legion demo` needs to run a runtime's sessions offline, on a scripted model
    server (`legion.demo`) for the API its CLI speaks."""

    # "module:Class" of that scripted server; its module makes the swarm's script of the same
    # blocks (`bash`, `text`, `Scenario`, `Script`: `legion.demo.swarm_script`).
    server: str
    # "module:function" (its home folder, the scripted server's base URL) -> the variables
    # that make that folder the CLI's home, its only model the scripted server.
    offline_home: str
    # "module:function" (environment, say) -> `legion.runtime.npm_pin.Binary`: the CLI the
    # demo runs, the one configured, else the pinned version, installed first if missing.
    binary: str
    home_folder: str  # its home's folder in the demo's folder
    home_setting: str  # the setting naming your own CLI home: the demo's private one
    home_variable: str  # the variable that says where that home is, with `--real`
    api: str  # whose API `--real` uses ("Anthropic"), with its key (the first secret)
    # The roles it takes in `legion demo --runtime mixed` (the default runtime the others).
    mixed_roles: tuple[str, ...] = ()


class RuntimePlugin(NamedTuple):
    """An agent CLI a session can run on."""

    name: str
    description: str
    # "module:function" (settings, lookup environment, the project's state folder) ->
    # AgentRuntime
    runtime: str
    # "module:function" (settings) -> the variables that say where your own CLI's home is
    environment: str
    # "module:function" (chosen settings, every settings, environment) -> DoctorReport
    doctor: str
    # "module:function" (environment, say): installs the version Legion is tested with
    install: str
    # "module:function" (environment) -> where the CLI finds the user's skills
    skills_dir: str
    # Where in a repository the CLI finds a project's skills; None: it reads only the user's
    project_skills: str | None = None
    # Variables holding the key the CLI itself uses: a session needs it (so it is passed on),
    # and it is never logged or shown. A provider's own variable (Codex's `env_key`) is read
    # from the CLI's config by its doctor check.
    secret_variables: tuple[str, ...] = ()
    settings: str | None = None  # "module:Class", as a backend's
    aliases: tuple[str, ...] = ()
    model: ModelRoute | None = None  # how the model proxy serves it; None: it does not
    # Tools whose call is the model asking the user a question (the proxy keeps the last one:
    # `legion.proxy.questions`).
    question_tools: tuple[str, ...] = ()
    # Variables its CLI sets for the processes its tools run, by name and by prefix: kept from
    # every session Legion starts, so that a session started from one (the controller's
    # `legion` command) is not taken for that session's child.
    child_variables: tuple[str, ...] = ()
    child_variable_prefixes: tuple[str, ...] = ()
    demo: DemoPlugin | None = None  # how `legion demo` runs it; None: it does not


BACKENDS: tuple[BackendPlugin, ...] = (
    BackendPlugin(
        EMBEDDED,
        "Legion's own SQLite database",
        tracker="legion.trackers.local:open_tracker",
        forge="legion.forges.local:open_forge",
        remote=False,
        aliases=("local",),  # the embedded backends' name before 0.2
    ),
    BackendPlugin(
        LINEAR,
        "Linear",
        tracker="legion.trackers.linear.adapter:open_tracker",
        tracker_doctor="legion.trackers.linear.doctor:doctor_checks",
        secret_variables=("LINEAR_API_KEY",),
        settings="legion.trackers.linear.settings:LinearSettings",
        init="legion.trackers.linear.init:init_settings",
        init_options=(
            InitOption("team", "The Linear team's key (with --tracker linear), e.g. ENG."),
        ),
    ),
    BackendPlugin(
        GITHUB,
        "GitHub Issues and pull requests",
        tracker="legion.trackers.github_issues.adapter:open_tracker",
        forge="legion.forges.github.adapter:open_forge",
        tracker_doctor="legion.trackers.github_issues.doctor:doctor_checks",
        forge_doctor="legion.forges.github.doctor:doctor_checks",
        secret_variables=("GITHUB_TOKEN", "GH_TOKEN"),
        settings="legion.github.settings:GitHubSettings",
        init="legion.github.init:init_settings",
        init_options=(
            InitOption(
                "repo",
                "The GitHub repository OWNER/NAME (with --forge github); default: the one the "
                "`origin` remote points at.",
            ),
        ),
    ),
)

RUNTIMES: tuple[RuntimePlugin, ...] = (
    RuntimePlugin(
        CLAUDE_CODE,
        "Claude Code",
        runtime="legion.runtime.claude.runtime:open_runtime",
        environment="legion.runtime.claude.runtime:configured_environment",
        doctor="legion.runtime.claude.doctor:doctor_report",
        install="legion.runtime.claude.binary:install",
        skills_dir="legion.runtime.claude.paths:skills_dir",
        project_skills=".claude/skills",
        secret_variables=("ANTHROPIC_API_KEY",),
        settings="legion.runtime.claude.settings:ClaudeSettings",
        aliases=("claude",),
        model=ModelRoute(
            api="anthropic-messages",
            mount="",
            upstream="legion.runtime.claude.model_route:upstream",
            point="legion.runtime.claude.model_route:point",
            key_variables="legion.runtime.claude.model_route:key_variables",
            own_login=True,
        ),
        question_tools=("AskUserQuestion",),
        child_variables=("CLAUDECODE", "CLAUDE_PID", "CLAUDE_EFFORT"),
        child_variable_prefixes=(
            "CLAUDE_CODE_CHILD_",
            "CLAUDE_CODE_SESSION_",
            "CLAUDE_CODE_MESSAGING_",
            "CLAUDE_CODE_ENTRYPOINT",
            "CLAUDE_CODE_EXECPATH",
        ),
        demo=DemoPlugin(
            server="legion.demo.model_server:FakeModelServer",
            offline_home="legion.demo.offline:claude_offline_home",
            binary="legion.runtime.claude.binary:configured_or_installed",
            home_folder="claude-config",
            home_setting="claude_config_dir",
            home_variable="CLAUDE_CONFIG_DIR",
            api="Anthropic",
        ),
    ),
    RuntimePlugin(
        CODEX,
        "Codex",
        runtime="legion.runtime.codex.runtime:open_runtime",
        environment="legion.runtime.codex.runtime:configured_environment",
        doctor="legion.runtime.codex.doctor:doctor_report",
        install="legion.runtime.codex.binary:install",
        skills_dir="legion.runtime.codex.runtime:skills_dir",
        secret_variables=("OPENAI_API_KEY",),
        settings="legion.runtime.codex.settings:CodexSettings",
        model=ModelRoute(
            api="openai-responses",
            mount="/codex",
            upstream="legion.runtime.codex.model_route:upstream",
            point="legion.runtime.codex.model_route:point",
            key_variables="legion.runtime.codex.model_route:key_variables",
        ),
        demo=DemoPlugin(
            server="legion.demo.responses_server:FakeResponsesServer",
            offline_home="legion.demo.offline:codex_offline_home",
            binary="legion.runtime.codex.binary:configured_or_installed",
            home_folder="codex-home",
            home_setting="codex_home",
            home_variable="CODEX_HOME",
            api="OpenAI",
            mixed_roles=("implement",),
        ),
    ),
    RuntimePlugin(
        GEMINI,
        "Gemini",
        runtime="legion.runtime.gemini.runtime:open_runtime",
        environment="legion.runtime.gemini.runtime:configured_environment",
        doctor="legion.runtime.gemini.doctor:doctor_report",
        install="legion.runtime.gemini.binary:install",
        skills_dir="legion.runtime.gemini.runtime:skills_dir",
        project_skills=".gemini/skills",
        secret_variables=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        settings="legion.runtime.gemini.settings:GeminiSettings",
        model=ModelRoute(
            api="gemini-generate-content",
            mount="/gemini",
            upstream="legion.runtime.gemini.model_route:upstream",
            point="legion.runtime.gemini.model_route:point",
            key_variables="legion.runtime.gemini.model_route:key_variables",
        ),
        # What it sets for its shell tool's commands (seen in `env` there: docs/gemini-cli.md).
        child_variables=("GEMINI_CLI", "GEMINI_CLI_NO_RELAUNCH"),
        demo=DemoPlugin(
            server="legion.demo.gemini_server:FakeGeminiServer",
            offline_home="legion.demo.offline:gemini_offline_home",
            binary="legion.runtime.gemini.binary:configured_or_installed",
            home_folder="gemini-home",
            home_setting="gemini_home",
            home_variable="GEMINI_CLI_HOME",
            api="Gemini",
        ),
    ),
)

DEFAULT_BACKEND = EMBEDDED
DEFAULT_RUNTIME = CLAUDE_CODE  # every role the settings do not put elsewhere


def tracker_names() -> tuple[str, ...]:
    return tuple(plugin.name for plugin in BACKENDS if plugin.tracker)


def forge_names() -> tuple[str, ...]:
    return tuple(plugin.name for plugin in BACKENDS if plugin.forge)


def runtime_names() -> tuple[str, ...]:
    return tuple(plugin.name for plugin in RUNTIMES)


def backend_aliases() -> dict[str, str]:
    return {alias: plugin.name for plugin in BACKENDS for alias in plugin.aliases}


def runtime_aliases() -> dict[str, str]:
    return {alias: plugin.name for plugin in RUNTIMES for alias in plugin.aliases}


def backend(name: str) -> BackendPlugin:
    for plugin in BACKENDS:
        if plugin.name == name:
            return plugin
    raise ConfigError(f"unknown backend {name!r} (known: {', '.join(p.name for p in BACKENDS)})")


def runtime_plugin(name: str) -> RuntimePlugin:
    for plugin in RUNTIMES:
        if plugin.name == name:
            return plugin
    raise ConfigError(f"unknown runtime {name!r} (known: {', '.join(runtime_names())})")


def backend_secret_variables() -> tuple[str, ...]:
    """Every integration's credential variables: no session Legion starts may have them."""
    return tuple(name for plugin in BACKENDS for name in plugin.secret_variables)


def runtime_secret_variables() -> tuple[str, ...]:
    return tuple(name for plugin in RUNTIMES for name in plugin.secret_variables)


def proxied_runtimes() -> tuple[RuntimePlugin, ...]:
    """The runtimes the model proxy serves (those that declare a `ModelRoute`)."""
    return tuple(plugin for plugin in RUNTIMES if plugin.model is not None)


def question_tools() -> frozenset[str]:
    """Every runtime's question tools: a call of one is the model asking the user."""
    return frozenset(name for plugin in RUNTIMES for name in plugin.question_tools)


def child_variables() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The variables the runtimes' CLIs set for their tools' processes: (names, prefixes)."""
    names = tuple(name for plugin in RUNTIMES for name in plugin.child_variables)
    prefixes = tuple(name for plugin in RUNTIMES for name in plugin.child_variable_prefixes)
    return names, prefixes


def is_remote(names: Iterable[str]) -> bool:
    """Whether any of these backends holds a credential (and lives on a remote service)."""
    return any(backend(name).remote for name in names)


def init_option(name: str) -> InitOption:
    for plugin in BACKENDS:
        for option in plugin.init_options:
            if option.name == name:
                return option
    raise KeyError(name)


def init_settings(request: InitRequest) -> InitChoice:
    """The settings `legion init` writes for the chosen tracker and forge, from the options
    their integrations read; an option given for an integration not chosen is refused."""
    from legion.errors import InputError

    chosen = {request.tracker, request.forge}
    settings: dict[str, Any] = {}
    key: str | None = None
    for plugin in BACKENDS:
        if plugin.name not in chosen:
            for option in plugin.init_options:
                if request.options.get(option.name) is not None:
                    uses = [f"--forge {plugin.name}"] if plugin.forge else []
                    uses += [f"--tracker {plugin.name}"] if plugin.tracker else []
                    raise InputError(f"--{option.name} is for {' or '.join(uses)}")
            continue
        if plugin.init is None:
            continue
        choice: InitChoice = load(plugin.init)(request)
        settings.update(choice.settings)
        key = choice.key or key
    return InitChoice(settings, key)


def load(path: str) -> Callable[..., Any]:
    """The attribute a "module:attribute" string names, its module imported now."""
    module_name, _, attribute = path.partition(":")
    found: Callable[..., Any] = getattr(importlib.import_module(module_name), attribute)
    return found
