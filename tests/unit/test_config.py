"""Settings resolve flag > env > repo config > user config > default; bad values say where."""

from __future__ import annotations

from pathlib import Path

import pytest

from legion.config.files import toml_value, write_repo_config
from legion.config.resolve import resolve_settings
from legion.core.model import Status
from legion.errors import ConfigError
from legion.github.settings import GitHubSettings

PROJECT = "7b4f0862-b775-4cb0-9a67-85400c6f44a8"


@pytest.fixture
def repo_config(tmp_path: Path) -> Path:
    write_repo_config(tmp_path, {"project_id": PROJECT, "wip_limit": 3, "tracker": "local"})
    return tmp_path / ".legion" / "config.toml"


def user_config(home: Path, text: str) -> None:
    path = home / "config" / "legion" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def env_for(home: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"), **extra}


def test_precedence(repo_config: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    user_config(home, 'wip_limit = 9\nbase_branch = "trunk"\n')
    settings = resolve_settings(repo_config, env_for(home))
    assert settings.wip_limit == 3 and settings.sources["wip_limit"] == str(repo_config)
    assert settings.base_branch == "trunk"  # only the user config sets it
    assert settings.issue_key == "LEG" and settings.sources["issue_key"] == "default"

    settings = resolve_settings(repo_config, env_for(home, LEGION_WIP_LIMIT="5"))
    assert settings.wip_limit == 5 and settings.sources["wip_limit"] == "env"

    settings = resolve_settings(repo_config, env_for(home, LEGION_WIP_LIMIT="5"), {"wip_limit": 7})
    assert settings.wip_limit == 7 and settings.sources["wip_limit"] == "flag"

    settings = resolve_settings(repo_config, env_for(home, LEGION_WIP_LIMIT="unlimited"))
    assert settings.wip_limit is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('project_id = "x"\n', "key 'project_id' must be a UUID"),
        (f'project_id = "{PROJECT}"\nwip_limit = -1\n', "key 'wip_limit' must be a whole number"),
        (f'project_id = "{PROJECT}"\ntrakcer = "local"\n', 'unknown setting "trakcer"'),
        (
            f'project_id = "{PROJECT}"\ntracker = "jira"\n',
            "key 'tracker' must be one of embedded, linear",
        ),
        (f'project_id = "{PROJECT}"\nissue_key = "le g"\n', "key 'issue_key'"),
        ("project_id = \n", "invalid TOML"),
        ("wip_limit = 2\n", "missing key 'project_id'"),
    ],
)
def test_malformed_repo_config(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / ".legion" / "config.toml"
    path.parent.mkdir()
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        resolve_settings(path, env_for(tmp_path / "home"))
    assert str(path) in str(info.value)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_environment_value_names_the_variable(repo_config: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="environment LEGION_WIP_LIMIT must be a whole number"):
        resolve_settings(repo_config, env_for(tmp_path, LEGION_WIP_LIMIT="lots"))


def test_project_identity_belongs_to_the_repository(repo_config: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    user_config(home, f'project_id = "{PROJECT}"\n')
    with pytest.raises(ConfigError, match="belongs in the repository"):
        resolve_settings(repo_config, env_for(home))


def test_the_store_belongs_to_the_machine_not_the_repository(tmp_path: Path) -> None:
    # Every project on a machine shares its bus, so the store is the machine's to set; and
    # its URL may hold a password, which a repository would hand to every clone.
    write_repo_config(tmp_path, {"project_id": PROJECT, "store": "postgresql://u:pw@db/x"})
    path = tmp_path / ".legion" / "config.toml"
    with pytest.raises(ConfigError, match="belongs in your user config") as info:
        resolve_settings(path, env_for(tmp_path / "home"))
    assert "LEGION_STORE" in str(info.value) and "pw" not in str(info.value)
    home = tmp_path / "home"
    user_config(home, 'store = "postgresql://u@db/x"\n')
    write_repo_config(tmp_path, {"project_id": PROJECT})
    assert resolve_settings(path, env_for(home)).store == "postgresql://u@db/x"


def test_toml_strings_round_trip(tmp_path: Path) -> None:
    import tomllib

    nasty = 'quote " backslash \\ newline \n tab \t nul \x00 emoji 🎉 astral-control \U000e0001'
    write_repo_config(tmp_path, {"project_id": PROJECT, "base_branch": nasty})
    text = (tmp_path / ".legion" / "config.toml").read_text(encoding="utf-8")
    assert tomllib.loads(text)["base_branch"] == nasty
    assert toml_value(["a", 1, True]) == '["a", 1, true]'


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("tick = inf", "from 0.1 to 604800"),
        ("tick = nan", "from 0.1 to 604800"),
        ("tick = 1e-9", "from 0.1 to 604800"),
        ("stale_after = -5", "from 0.1 to 604800"),
        ("restart_cooldown = true", "must be a number of seconds"),
        ('labels = "a"', "must be a list of label names"),
        ("labels = [1]", "must be a list of label names"),
    ],
)
def test_out_of_range_and_mistyped_values_are_refused(
    repo_config: Path, tmp_path: Path, text: str, complaint: str
) -> None:
    home = tmp_path / "home"
    user_config(home, text + "\n")
    with pytest.raises(ConfigError) as caught:
        resolve_settings(repo_config, env_for(home))
    assert complaint in str(caught.value)
    assert "config.toml: key" in str(caught.value)


def test_a_variable_lists_labels_with_commas(repo_config: Path, tmp_path: Path) -> None:
    settings = resolve_settings(repo_config, env_for(tmp_path, LEGION_LABELS="bug, ux"))
    assert settings.labels == ("bug", "ux")


@pytest.mark.parametrize(
    ("url", "repo"),
    [
        ("https://github.com/acme/widgets.git", "acme/widgets"),
        ("https://github.com/acme/widgets", "acme/widgets"),
        ("https://x-access-token@github.com/acme/wid.gets.git", "acme/wid.gets"),
        ("git@github.com:acme/widgets.git", "acme/widgets"),
        ("ssh://git@github.com/acme/widgets.git", "acme/widgets"),
        ("https://gitlab.com/acme/widgets.git", None),
        ("/srv/git/widgets.git", None),
    ],
)
def test_the_github_repository_is_read_from_the_remote_url(url: str, repo: str | None) -> None:
    from legion.github.repository import github_repo_of_url

    assert github_repo_of_url(url) == repo


def test_backend_names_and_their_settings_are_checked(tmp_path: Path) -> None:
    path = tmp_path / ".legion" / "config.toml"
    path.parent.mkdir()
    path.write_text(
        f'project_id = "{PROJECT}"\ntracker = "local"\nforge = "github"\n'
        'github_repo = "acme/widgets"\n[statuses]\n"QA" = "Needs Review"\n'
    )
    settings = resolve_settings(path, env_for(tmp_path / "home"), trusting=True)
    assert (settings.tracker, settings.forge) == ("embedded", "github")  # "local": the old name
    assert settings.section(GitHubSettings).repo == "acme/widgets"
    assert dict(settings.statuses) == {"QA": Status.NEEDS_REVIEW}
    path.write_text(f'project_id = "{PROJECT}"\ngithub_repo = "acme"\n')
    with pytest.raises(ConfigError, match="must be OWNER/NAME"):
        resolve_settings(path, env_for(tmp_path / "home"), trusting=True)
    env = env_for(tmp_path / "home") | {"LEGION_STATUSES": "QA=Needs Review,Shipped=Done"}
    path.write_text(f'project_id = "{PROJECT}"\n')
    assert dict(resolve_settings(path, env).statuses) == {
        "QA": Status.NEEDS_REVIEW,
        "Shipped": Status.DONE,
    }


@pytest.mark.parametrize(
    ("repo", "key"),
    [
        ("acme/widgets", "WIDGETS"),
        ("acme/my-app.js", "MYAPPJS"),
        ("acme/2fast", "FAST"),
        ("acme/a-very-long-repository-name", "AVERYLONGR"),
        ("acme/---", "GH"),
    ],
)
def test_a_github_issues_project_takes_its_key_from_the_repository(repo: str, key: str) -> None:
    from legion.core.model import validate_issue_key
    from legion.github.repository import issue_key_for_repo

    assert issue_key_for_repo(repo) == key
    assert validate_issue_key(key) == key


WIDENING = {
    "sandbox": "none",
    "claude_bin": "/tmp/evil",
    "claude_args": ["--dangerously-load"],
    "codex_bin": "/tmp/evil",
    "codex_args": ["-c", "x=1"],
    "codex_home": "/tmp/h",
    "claude_config_dir": "/tmp/c",
    "permission_mode": "acceptEdits",
    "tmux_config": "/tmp/tmux.conf",
    "tmux_socket": "/tmp/s",
    "state_dir": "/tmp/state",
    "workspace_root": "/tmp/ws",
    "remote": "attacker",
    "github_repo": "attacker/repo",
    "linear_team": "OTHER",
    "tracker": "linear",
    "forge": "github",
    "runtime": "codex",
    "runtimes": {"implement": "codex"},
    "workspace_vcs": "git",
    "backlog_opt_in_labels": ["*"],
}


@pytest.mark.parametrize("key", sorted(WIDENING))
def test_a_repositorys_config_that_chooses_what_runs_is_refused_until_trusted(
    tmp_path: Path, key: str
) -> None:
    """Whoever lands a commit writes .legion/config.toml, a worker included: the settings that
    choose programs, arguments, the sandbox, folders or remotes are the user's."""
    from legion import trust
    from legion.config.paths import state_home

    write_repo_config(tmp_path, {"project_id": PROJECT, key: WIDENING[key]})
    path, env = tmp_path / ".legion" / "config.toml", env_for(tmp_path / "home")
    with pytest.raises(ConfigError, match=f"what only you choose .*: {key};") as info:
        resolve_settings(path, env)
    assert "legion trust" in str(info.value) and "\n" not in str(info.value)
    trust.trust(state_home(env), path, path.read_bytes())
    assert resolve_settings(path, env).sources[key] == str(path)
    # Any change undoes it, a comment included.
    path.write_text(path.read_text() + "# changed\n")
    with pytest.raises(ConfigError, match=f": {key};"):
        resolve_settings(path, env)
    # The same setting from the user's own config or environment needs no trust.
    write_repo_config(tmp_path, {"project_id": PROJECT})
    user_config(tmp_path / "home", f"{key} = {toml_value(WIDENING[key])}\n")
    assert resolve_settings(path, env).sources[key].endswith("legion/config.toml")


def test_every_widening_key_is_named_in_one_line(tmp_path: Path) -> None:
    write_repo_config(tmp_path, {"project_id": PROJECT, "wip_limit": 2, **WIDENING})
    with pytest.raises(ConfigError) as info:
        resolve_settings(tmp_path / ".legion" / "config.toml", env_for(tmp_path / "home"))
    message = str(info.value)
    assert "\n" not in message and "wip_limit" not in message
    assert all(key in message for key in WIDENING)


def test_settings_that_choose_nothing_that_runs_need_no_trust(tmp_path: Path) -> None:
    write_repo_config(
        tmp_path, {"project_id": PROJECT, "wip_limit": 2, "tick": 5, "labels": ["bug"]}
    )
    settings = resolve_settings(tmp_path / ".legion" / "config.toml", env_for(tmp_path / "home"))
    assert settings.wip_limit == 2


def test_a_widening_key_at_its_default_needs_no_trust(tmp_path: Path) -> None:
    """`legion init` writes the embedded tracker's and forge's names: they widen nothing."""
    write_repo_config(
        tmp_path,
        {"project_id": PROJECT, "tracker": "embedded", "forge": "embedded", "runtimes": {}},
    )
    path = tmp_path / ".legion" / "config.toml"
    assert resolve_settings(path, env_for(tmp_path / "home")).tracker == "embedded"


@pytest.mark.parametrize(
    ("key", "user", "raised", "lowered"),
    [
        ("token_budget", 1000, 5000, 500),
        ("token_budget", 1000, "unlimited", 0),
        ("daily_token_budget", 20000, 20001, 20000),
        ("idle_spend_limit", None, 6_000_000, 4_000_000),  # over its default
        ("idle_spend_limit", None, "unlimited", 1),
        ("wip_limit", 2, 3, 1),
    ],
)
def test_a_repositorys_config_may_lower_a_budget_but_not_raise_it_until_trusted(
    tmp_path: Path, key: str, user: int | None, raised: int | str, lowered: int
) -> None:
    """A worker can land `.legion/config.toml`: a budget there may only lower what the user's
    config (or the default) allows; one above it, or unlimited, waits for `legion trust`."""
    from legion import trust
    from legion.config.paths import state_home

    home = tmp_path / "home"
    if user is not None:
        user_config(home, f"{key} = {user}\n")
    env, path = env_for(home), tmp_path / ".legion" / "config.toml"
    write_repo_config(tmp_path, {"project_id": PROJECT, key: lowered})
    assert resolve_settings(path, env).sources[key] == str(path)
    write_repo_config(tmp_path, {"project_id": PROJECT, key: raised})
    with pytest.raises(ConfigError, match=f"a budget above your own\\): {key} \\(") as info:
        resolve_settings(path, env)
    assert "legion trust" in str(info.value) and "\n" not in str(info.value)
    assert "over your" in str(info.value)
    trust.trust(state_home(env), path, path.read_bytes())
    assert resolve_settings(path, env).sources[key] == str(path)


def test_a_budget_raised_over_the_users_is_named_with_both_values(tmp_path: Path) -> None:
    user_config(tmp_path / "home", "token_budget = 1000\n")
    write_repo_config(tmp_path, {"project_id": PROJECT, "token_budget": "unlimited"})
    with pytest.raises(ConfigError, match=r"token_budget \(unlimited, over your 1000\);"):
        resolve_settings(tmp_path / ".legion" / "config.toml", env_for(tmp_path / "home"))


def test_a_repositorys_config_is_read_through_no_link_and_only_when_regular(
    tmp_path: Path,
) -> None:
    """Whoever lands a commit chooses what `.legion/config.toml` is: a link to a fifo would
    hang every `legion`, one to /dev/zero would read without end."""
    import os

    folder = tmp_path / ".legion"
    folder.mkdir()
    real = tmp_path / "elsewhere.toml"
    real.write_text(f'project_id = "{PROJECT}"\n')
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target in (real, fifo, Path("/dev/zero")):
        link = folder / "config.toml"
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        with pytest.raises(ConfigError, match="cannot read"):
            resolve_settings(link, env_for(tmp_path / "home"))
    (folder / "config.toml").unlink()
    os.mkfifo(folder / "config.toml")
    with pytest.raises(ConfigError, match="not a regular file"):
        resolve_settings(folder / "config.toml", env_for(tmp_path / "home"))


def test_every_legion_variable_legion_reads_is_a_setting_or_named_as_its_own() -> None:
    """A LEGION_* variable close to a setting's is refused as misspelt: each variable Legion
    itself sets or reads must be a setting's or in `OTHER_VARIABLES`, or it would be refused."""
    import re

    from legion.config.resolve import OTHER_VARIABLES
    from legion.config.settings import SPECS

    source = Path(__file__).parents[2] / "src" / "legion"
    named = {
        found
        for path in source.rglob("*.py")
        for found in re.findall(r"[\"'](LEGION_[A-Z0-9_]+)[\"']", path.read_text())
    }
    settings = {spec.env_var for spec in SPECS}
    assert named - settings - OTHER_VARIABLES == set()


def test_a_repositorys_egress_list_only_narrows_the_users(tmp_path: Path) -> None:
    """`sandbox_egress` is the user's: a repository's config (which a worker can land) keeps
    what both allow, and never needs trust; a bad entry is one line naming the file and key."""
    home = tmp_path / "home"
    path = tmp_path / ".legion" / "config.toml"
    write_repo_config(tmp_path, {"project_id": PROJECT})
    assert resolve_settings(path, env_for(home)).sandbox_egress == ()
    user_config(home, 'sandbox_egress = ["*.crates.io", "pypi.org", "127.0.0.1:8080"]\n')
    settings = resolve_settings(path, env_for(home))
    assert settings.sandbox_egress == ("*.crates.io", "pypi.org", "127.0.0.1:8080")
    write_repo_config(
        tmp_path, {"project_id": PROJECT, "sandbox_egress": ["index.crates.io", "evil.com"]}
    )
    settings = resolve_settings(path, env_for(home))
    assert settings.sandbox_egress == ("index.crates.io",)
    assert "narrowed by" in settings.sources["sandbox_egress"]
    variable = env_for(home, LEGION_SANDBOX_EGRESS="evil.com, index.crates.io:443")
    narrowed = ("evil.com", "index.crates.io:443")  # the variable is the user's word
    assert resolve_settings(path, variable).sandbox_egress == narrowed
    write_repo_config(tmp_path, {"project_id": PROJECT, "sandbox_egress": ["@registries"]})
    assert resolve_settings(path, env_for(home)).sandbox_egress == (
        "pypi.org:443",
        "static.crates.io:443",
        "index.crates.io:443",
    )
    user_config(home, 'sandbox_egress = ["pypi.org", "127.0.0.1"]\n')
    with pytest.raises(ConfigError) as raised:
        resolve_settings(path, env_for(home))
    assert "sandbox_egress" in str(raised.value) and "\n" not in str(raised.value)
