"""The bubblewrap command line of a confined session (`legion.sandbox.policy`): pure."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from legion.sandbox.policy import SYSTEM, Access, Confinement, bwrap_argv, paths_of

WORKSPACE = Path("/w/LEG-1")
HOME = Path("/home/u")
EMPTY = Path("/state/empty")


def mounts(argv: list[str]) -> list[tuple[str, str]]:
    """(kind, destination) of each bind, in order."""
    found = []
    for n, arg in enumerate(argv):
        if arg in ("--bind", "--ro-bind", "--ro-bind-try"):
            found.append((arg, argv[n + 2]))
        if arg == "--":
            break
    return found


def confined(access: Access, existing: list[Path] | None = None) -> list[str]:
    confinement = Confinement(HOME, EMPTY, access)
    present = paths_of(confinement) if existing is None else existing
    argv = ["claude", "--session-id", "x"]
    return bwrap_argv("/usr/bin/bwrap", confinement, argv, existing=present)


def test_the_command_runs_last_after_the_separator() -> None:
    argv = confined(Access(writable=(WORKSPACE,)))
    assert argv[0] == "/usr/bin/bwrap"
    assert argv[-4:] == ["--", "claude", "--session-id", "x"]
    assert [a for a in argv if a == "--unshare-pid"] == ["--unshare-pid"]
    assert "--as-pid-1" in argv and "--die-with-parent" not in argv


def test_the_system_is_read_only_and_home_and_tmp_are_private() -> None:
    argv = confined(Access(writable=(WORKSPACE,)))
    for folder in SYSTEM:
        assert ("--ro-bind-try", folder) in mounts(argv)
    assert argv[argv.index("--proc") + 1] == "/proc"
    tmpfs = [argv[n + 1] for n, a in enumerate(argv) if a == "--tmpfs"]
    assert "/tmp" in tmpfs and str(HOME) in tmpfs
    assert ("--bind", str(WORKSPACE)) in mounts(argv)


def test_a_missing_path_is_left_out_not_a_failed_start() -> None:
    gone = Path("/nowhere/config")
    argv = confined(Access(writable=(WORKSPACE, gone)), existing=[WORKSPACE])
    assert str(gone) not in argv


def test_writable_wins_over_readable_for_the_same_path() -> None:
    argv = confined(Access(writable=(WORKSPACE,), readable=(WORKSPACE,)))
    assert [m for m in mounts(argv) if m[1] == str(WORKSPACE)] == [("--bind", str(WORKSPACE))]


def test_a_hidden_file_is_shown_empty_after_its_folder_is_mounted() -> None:
    config = HOME / ".claude"
    secret = config / ".credentials.json"
    argv = confined(Access(writable=(config,), hidden=(secret,)))
    folder = argv.index(str(config))
    shown_empty = [n for n, a in enumerate(argv) if a == str(secret)]
    assert shown_empty and shown_empty[0] > folder
    assert argv[shown_empty[0] - 1] == str(EMPTY)


def test_system_secrets_are_hidden_when_they_exist() -> None:
    argv = confined(Access(), existing=[Path("/etc/shadow"), Path("/etc/ssh")])
    assert argv[argv.index("/etc/shadow") - 1] == str(EMPTY)
    assert argv[argv.index("/etc/ssh") - 1] == "--tmpfs"


paths = st.lists(
    st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=4).map(
        lambda parts: Path("/", *parts)
    ),
    max_size=8,
)


@given(writable=paths, readable=paths)
def test_parents_are_mounted_before_what_is_inside_them(
    writable: list[Path], readable: list[Path]
) -> None:
    argv = confined(Access(writable=tuple(writable), readable=tuple(readable)))
    order = [Path(dest) for kind, dest in mounts(argv) if kind != "--ro-bind-try"]
    assert len(order) == len(set(order))  # each once
    for n, path in enumerate(order):
        assert not any(path in later.parents for later in order[:n] if later != path)


def test_a_path_inside_a_folder_mounted_the_same_way_shows_through_it() -> None:
    """Claude Code's `.claude.json` inside its writable config folder is not mounted again (a
    rename of it between bubblewrap's bind and remount failed the start); one inside a
    read-only folder is, writable."""
    config = HOME / ".claude"
    state = config / ".claude.json"
    tools = Path("/opt/tools")
    argv = confined(Access(writable=(config, state, tools / "cache"), readable=(tools,)))
    assert mounts(argv)[-3:] == [
        ("--ro-bind", str(tools)),
        ("--bind", str(config)),
        ("--bind", str(tools / "cache")),
    ]


@given(writable=paths, readable=paths)
def test_every_path_is_shown_as_it_asks(writable: list[Path], readable: list[Path]) -> None:
    """Whatever is left out, each path asked for is shown writable or read-only as asked
    (writable winning): by its own mount, or by the nearest mounted folder it is inside."""
    argv = confined(Access(writable=tuple(writable), readable=tuple(readable)))
    mounted = {Path(dest): kind for kind, dest in mounts(argv) if kind != "--ro-bind-try"}
    for path in {*writable, *readable}:
        wanted = "--bind" if path in writable else "--ro-bind"
        holders = [p for p in mounted if p == path or p in path.parents]
        nearest = max(holders, key=lambda p: len(p.parts))
        assert mounted[nearest] == wanted, (path, mounted)


def test_a_session_has_no_capability() -> None:
    argv = confined(Access())
    assert argv[argv.index("--cap-drop") + 1] == "ALL"


def test_a_replaced_file_is_shown_read_only_after_everything_else() -> None:
    real, copy = Path("/home/u/.config/legion/config.toml"), Path("/state/run/user-config.toml")
    argv = confined(Access(readable=(Path("/state/run"),), replaced=((real, copy),)))
    at = argv.index(str(real))
    assert argv[at - 2 : at + 1] == ["--ro-bind", str(copy), str(real)]
    assert at > argv.index("/state/run")
