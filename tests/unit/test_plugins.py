"""The registry of plugins (`legion.plugins`) is the one place that names an integration or a
runtime (issue 20): every "module:attribute" it declares resolves, each plugin's settings are
its own section, and no other module spells a backend's or a runtime's name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import legion
from legion import plugins
from legion.config.settings import SPEC_BY_NAME, settings_of
from legion.errors import InputError
from legion.github.settings import GitHubSettings
from legion.runtime.codex.settings import CodexSettings

ROOT = Path(legion.__file__).parent

# The files of each plugin (and the registry), where its name may be spelled out.
PLUGIN_FILES = (
    "plugins.py",
    "trackers/linear/",
    "trackers/github_issues/",
    "forges/github/",
    "github/",
    "runtime/claude",
    "runtime/codex",
    "cli/reference_notes.py",  # the commands' reference, whose examples name them as a user writes
    "cli/reference_settings.py",  # the settings' reference, likewise
)
NAME = re.compile(r"""["'](?:claude|codex|linear|github|embedded|claude-code)["']""")


def test_no_module_but_a_plugin_and_the_registry_names_a_backend_or_a_runtime() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted(ROOT.rglob("*.py"))
        if not str(path.relative_to(ROOT)).startswith(PLUGIN_FILES)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if NAME.search(line) and "ALTER TABLE" not in line  # a migration keeps its history
    ]
    assert not found, "\n".join(found)


def test_every_declared_attribute_resolves() -> None:
    for backend in plugins.BACKENDS:
        for where in (
            backend.tracker,
            backend.forge,
            backend.tracker_doctor,
            backend.forge_doctor,
            backend.init,
            backend.settings,
        ):
            if where is not None:
                assert callable(plugins.load(where)), where
    for runtime in plugins.RUNTIMES:
        for where in (
            runtime.runtime,
            runtime.environment,
            runtime.doctor,
            runtime.install,
            runtime.skills_dir,
            runtime.settings,
        ):
            if where is not None:
                assert callable(plugins.load(where)), where
        if runtime.model is not None:
            for where in (runtime.model.upstream, runtime.model.point, runtime.model.key_variables):
                assert callable(plugins.load(where)), where


def test_a_runtime_the_proxy_serves_names_an_api_of_its_route_table_and_a_path_of_its_own() -> None:
    from legion.proxy.routes import APIS

    routes = [runtime.model for runtime in plugins.RUNTIMES if runtime.model is not None]
    assert routes and all(route.api in APIS for route in routes)
    mounts = [route.mount for route in routes]
    assert len(set(mounts)) == len(mounts)
    assert all(
        mount == "" or (mount.startswith("/") and not mount.endswith("/")) for mount in mounts
    )


def test_a_plugins_settings_are_its_section_read_by_the_same_rules() -> None:
    assert {"github_repo", "github_project", "merge_method", "codex_home"} <= set(SPEC_BY_NAME)
    settings = settings_of({"project_id": "x", "github_project": 3, "codex_args": ("-v",)})
    assert settings.section(GitHubSettings) == GitHubSettings(project=3)
    assert settings.section(CodexSettings).args == ("-v",)
    assert settings.value("github_project") == 3 and settings.value("tracker") == "embedded"


def test_every_integrations_credential_is_kept_from_sessions() -> None:
    assert set(plugins.backend_secret_variables()) == {"LINEAR_API_KEY", "GITHUB_TOKEN", "GH_TOKEN"}
    assert "ANTHROPIC_API_KEY" in plugins.runtime_secret_variables()


def test_an_init_option_without_its_integration_is_refused() -> None:
    def request(tracker: str, forge: str, **options: str | None) -> plugins.InitRequest:
        return plugins.InitRequest(
            tracker=tracker,
            forge=forge,
            key="LEG",
            key_given=False,
            options={"team": None, "repo": None, **options},
            repo_path=Path("/nonexistent"),
            check=lambda setting, value, where: value,
        )

    with pytest.raises(InputError, match="--team is for --tracker linear"):
        plugins.init_settings(request("embedded", "embedded", team="ENG"))
    with pytest.raises(InputError, match="--repo is for --forge github or --tracker github"):
        plugins.init_settings(request("embedded", "embedded", repo="acme/widgets"))
    chosen = plugins.init_settings(request("linear", "github", team="ENG", repo="acme/widgets"))
    assert chosen.settings == {"linear_team": "ENG", "github_repo": "acme/widgets"}
    assert chosen.key == "ENG"
