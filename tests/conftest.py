"""The fixtures every test may use: each test gets its own HOME, XDG dirs and git identity (no
LEGION_* leaks in), and whatever it started ends with it. The helpers they stand on are in
`tests/support/`."""

from __future__ import annotations

import atexit
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import reaper
from tests.support.cli import LegionRunner, Result, git, run_legion
from tests.support.postgres import PostgresServer
from tests.support.progress import StillRunning
from tests.support.tmux import private_tmux_socket


def pytest_configure(config: pytest.Config) -> None:
    # The run's mark, unless `scripts/test` gave one (to sweep what a pytest it had to kill
    # left). xdist workers inherit the controller's, and leave the sweep to it.
    if os.environ.get(reaper.RUN_MARK) is None:
        os.environ[reaper.RUN_MARK] = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        config.stash[_SWEEPER] = os.environ[reaper.RUN_MARK]
        atexit.register(_sweep, config)
        config.pluginmanager.register(StillRunning(config), "still-running")
    # A SIGTERM (a CI's timeout, `scripts/test` stopped) ends the run as Ctrl-C does, fixtures'
    # clean-up included, instead of killing it mid-test.
    signal.signal(signal.SIGTERM, _interrupt)
    # Started in the background by a script, SIGINT is ignored: let it interrupt as Ctrl-C does.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


E2E = Path(__file__).parent / "e2e"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers match folders: every test in tests/e2e is `e2e` (so `-m "not e2e"` is the fast
    suite), and none elsewhere may be (an end-to-end test belongs there)."""
    for item in items:
        if item.path.is_relative_to(E2E):
            item.add_marker(pytest.mark.e2e)
        elif item.get_closest_marker("e2e") is not None:
            raise pytest.UsageError(f"{item.nodeid} is marked e2e: move it to tests/e2e")
    # On several cores the run ends when its last test does: the longest modules start first,
    # so that the short tests fill the cores at the end (an order only; nothing depends on it).
    items.sort(key=lambda item: _LONG_FIRST.get(item.path.name, len(_LONG_FIRST)))


# The end-to-end modules whose tests run longest (a minute and more for the first), longest first.
_LONG_FIRST = {
    name: rank
    for rank, name in enumerate(
        (
            "test_fleet.py",
            "test_quickstart.py",
            "test_swarm_real_backends.py",
            "test_swarm.py",
            "test_demo.py",
            "test_kill_campaign.py",
            "test_scripts_test.py",
            "test_swarm_codex.py",
            "test_swarm_postgres.py",
            "test_confined_build.py",
            "test_recovery.py",
        )
    )
}


def pytest_unconfigure(config: pytest.Config) -> None:
    _sweep(config)


def _sweep(config: pytest.Config) -> None:
    """The run's leftovers: marked with its mark, or working in its temporary folders (xdist
    workers' are inside the controller's)."""
    run = config.stash.get(_SWEEPER, None)
    if run is None:
        return
    factory = getattr(config, "_tmp_path_factory", None)
    base = getattr(factory, "_basetemp", None)
    reaper.reap((reaper.RUN_MARK, run), [str(base)] if base is not None else [])


def _interrupt(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second one ends it outright
    raise KeyboardInterrupt


_SWEEPER = pytest.StashKey[str]()


@pytest.fixture(autouse=True)
def reap_test_processes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Whatever this test started and its fixtures did not stop ends with it."""
    mark = uuid.uuid4().hex
    monkeypatch.setenv(reaper.TEST_MARK, mark)
    yield
    home = os.environ.get("HOME", "")
    paths = [str(tmp_path)] + ([home] if "pytest-" in home else [])  # isolated_env's home
    reaper.reap((reaper.TEST_MARK, mark), paths)


@pytest.fixture(autouse=True)
def isolated_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    for name in list(os.environ):
        if name.startswith("LEGION_") or name.startswith("GIT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test User\n\temail = test@example.invalid\n"
        "[init]\n\tdefaultBranch = main\n",
        encoding="utf-8",
    )
    yield home


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A git repository with one commit on main."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "--quiet")
    (repo / "README.md").write_text("# test\n", encoding="utf-8")
    git(repo, "add", "README.md")
    git(repo, "commit", "--quiet", "-m", "initial")
    return repo


@pytest.fixture
def project(git_repo: Path) -> Path:
    """A git repository that `legion init` has made a project."""
    result = run_legion("init", cwd=git_repo)
    assert result.returncode == 0, result.stderr
    return git_repo


@pytest.fixture
def legion(project: Path) -> LegionRunner:
    def runner(
        *args: str,
        input_text: str | None = None,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> Result:
        return run_legion(*args, cwd=cwd or project, input_text=input_text, env=env)

    return runner


@pytest.fixture
def tmux_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private tmux server for the project (LEGION_TMUX_SOCKET), killed afterwards."""
    with private_tmux_socket(tmp_path) as socket:
        monkeypatch.setenv("LEGION_TMUX_SOCKET", str(socket))
        yield socket


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server for this pytest process (`tests/support/postgres.py`)."""
    server = PostgresServer()
    yield server
    server.close()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a new, empty PostgreSQL database (a credential: it holds the password)."""
    return postgres_server.database()
