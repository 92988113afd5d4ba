"""What every command shares: finding the project, opening backends, printing results."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO, TypeVar

import typer

from legion.backends import Backends, open_backends
from legion.config import Project, load_project
from legion.errors import InputError, LegionError

T = TypeVar("T")

JsonOption = typer.Option("--json", help="Print machine-readable JSON.")


def example(*commands: str) -> str:
    """A command's help epilog: an `Example:` line, then the commands verbatim (the leading
    backspace is click's mark for a paragraph it must not re-wrap)."""
    return "\b\nExample:\n" + "\n".join(f"  {command}" for command in commands)


def checked_option(setting: str, value: Any, option: str) -> Any:
    """A command-line value for `setting`, checked by the setting's own rules before anything
    else runs: a bad one is bad input (exit 2), named by the option the user typed."""
    from legion.config.settings import SPEC_BY_NAME

    try:
        return SPEC_BY_NAME[setting].parse(value)
    except ValueError as exc:
        raise InputError(f"{option} {exc}") from None


FOLLOW_POLL_S = 0.2  # how often a `--follow` looks for what is new


def follow(
    fetch: Callable[[int], Sequence[T]],
    cursor: int,
    show: Callable[[Sequence[T]], None],
    position: Callable[[T], int],
) -> None:
    """`--follow`: every `FOLLOW_POLL_S`, `show` what `fetch` finds after `cursor` (the
    `position` of the last thing shown), until Ctrl-C, which is how one stops: not an error."""
    import time

    try:
        while True:
            time.sleep(FOLLOW_POLL_S)
            found = fetch(cursor)
            if found:
                show(found)
                cursor = position(found[-1])
    except KeyboardInterrupt:
        return


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """The end of a one-line error about an unknown name: the names close to it, if any."""
    import difflib

    close = difflib.get_close_matches(word, sorted(set(choices)), n=3, cutoff=0.6)
    if not close:
        return ""
    return f" (did you mean {' or '.join(repr(name) for name in close)}?)"


QUIET, NORMAL, VERBOSE = -1, 0, 1


def verbosity() -> int:
    """The root's `-q` (QUIET) or `-v` (VERBOSE) for the command running now; NORMAL else."""
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    obj = ctx.find_root().obj if ctx is not None else None
    return int((obj or {}).get("verbosity", NORMAL))


def info(text: str, *, err: bool = False) -> None:
    """A line that says something about the result rather than being it (a hint, what to do
    next, that a list is empty): left out under `-q`. Escaped as `echo` escapes."""
    if verbosity() > QUIET:
        echo(text, err=err)


def debug(text: str) -> None:
    """A line on stderr under `-v` only: where the project, its settings and its state come
    from, how long the command took."""
    if verbosity() >= VERBOSE:
        echo(f"legion: {text}", err=True)


def repo_path(ctx: typer.Context) -> Path:
    obj = ctx.find_root().obj or {}
    repo = obj.get("repo")
    return Path(repo) if repo else Path.cwd()


def project(ctx: typer.Context) -> Project:
    loaded = load_project(repo_path(ctx))
    if verbosity() >= VERBOSE:
        from legion.config.paths import user_config_path

        settings = loaded.settings
        debug(f"project {loaded.root} (config {loaded.config_path})")
        debug(f"user config {user_config_path(os.environ)}")
        debug(f"state {loaded.state_dir}")
        from legion.config.settings import SPEC_BY_NAME

        for name in ("tracker", "forge", "store"):
            spec, value = SPEC_BY_NAME[name], settings.value(name)
            shown = spec.shown(value) if spec.shown is not None else value
            shown = "SQLite in the state folder" if shown is None else shown
            debug(f"{name} {shown} (from {settings.sources.get(name, 'default')})")
    return loaded


def backends(ctx: typer.Context, *, audited: bool = True) -> tuple[Project, Backends]:
    """The project and its backends. Their writes go to the action log under whoever runs the
    command (`ada`, `legion-controller`: `identity.default_author`), unless they go through the
    relay (whose server logs them under the session's mode) or not `audited` (a pass of the
    reconciler, whose writes are its actions)."""
    proj = project(ctx)
    opened = open_backends(proj)
    if audited and opened.relay is None:
        from legion.forges.audited import AuditedForge
        from legion.sessions.identity import default_author
        from legion.store.actionlog import noted_in
        from legion.trackers.audited import AuditedTracker
        from legion.trackers.splits import Splits

        author = default_author()
        note = noted_in(opened.db, author)
        opened.tracker = AuditedTracker(opened.tracker, note, Splits(opened.db).recorder(author))
        opened.forge = AuditedForge(opened.forge, note)
    return proj, opened


def logged(backends: Backends, issue: str, action: str, detail: str) -> None:
    """A person's (or the controller's) act that is no tracker or forge write, in the action
    log under their name: a worker dispatched, a session resumed or answered."""
    from legion.errors import LegionError
    from legion.sessions.identity import default_author
    from legion.store.actionlog import noted_in

    try:
        db = backends.db  # a confined session has none: what it did stands, unlogged
    except LegionError:
        return
    noted_in(db, default_author())(issue, action, detail)


def changed(project: Project) -> None:
    """A write went through: let a running daemon reconcile now instead of at its next tick."""
    from legion.daemon_link import notify

    notify(project)


def print_json(data: Any) -> None:
    sys.stdout.write(json_text(data, indent=2) + "\n")
    sys.stdout.flush()


def json_text(data: Any, indent: int | None = None) -> str:
    """`data` as JSON for a terminal or a pipe: readable UTF-8, with every character a
    terminal acts on escaped (JSON escapes only U+0000-U+001F by itself)."""
    from legion.core.text import for_json

    return for_json(json.dumps(data, indent=indent, ensure_ascii=False))


def echo(text: str, *, err: bool = False) -> None:
    """Print a line that holds text Legion did not write (a tracker's, a forge's, the bus's, a
    transcript's, a log's), through the one escaping (`for_display`)."""
    from legion.core.text import for_display

    typer.echo(for_display(text), err=err)


class _Escaping(io.TextIOBase):
    """A text stream that writes what it is given through `for_display`."""

    def __init__(self, raw: TextIO) -> None:
        super().__init__()
        self._raw = raw

    def write(self, text: str) -> int:
        from legion.core.text import for_display

        self._raw.write(for_display(text))
        return len(text)

    def flush(self) -> None:
        self._raw.flush()

    def isatty(self) -> bool:
        return self._raw.isatty()

    def fileno(self) -> int:
        return self._raw.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._raw.encoding


@contextlib.contextmanager
def escaped_output() -> Iterator[None]:
    """Everything printed on stdout and stderr meanwhile goes through `for_display`: for a
    process whose output is a log of other people's text (the daemon's)."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Escaping(saved[0]), _Escaping(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def attach_command(socket: Path | None, session: str) -> str:
    """The command that attaches a terminal to the project's tmux session, quoted for a shell
    for the user to copy (Legion itself never runs it)."""
    import shlex

    argv = ["tmux"] if socket is None else ["tmux", "-S", str(socket)]
    return shlex.join([*argv, "attach", "-t", session])


def console() -> Any:
    from rich.console import Console

    # A pipe gets whole lines (for grep and less) rather than rich's 80-column default.
    width = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 200
    # No markup and no emoji codes: a `[link=…]` or `:smile:` in a title or a comment is text.
    # What is printed through it is escaped by its renderer (`legion.cli.render.shown`).
    return Console(highlight=False, soft_wrap=False, width=width, markup=False, emoji=False)


def read_text_arg(text: str | None, file: Path | None, what: str) -> str | None:
    """The value of `--body` or `--body-file` (where `-` is standard input)."""
    if text is not None and file is not None:
        raise InputError(f"give {what} either inline or as a file, not both")
    if file is None:
        return text
    try:
        if str(file) == "-":
            return sys.stdin.read()
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {file}: {exc}") from None


def print_table(renderable: Any) -> None:
    """Print a table (or any renderable) without the spaces rich pads each line's last cell
    with: trailing blanks are noise in a terminal and a trap for `grep` and diff."""
    from rich.segment import Segment, Segments

    out = console()
    for line in out.render_lines(renderable, out.options, pad=False):
        while line and not line[-1].control and not line[-1].text.rstrip():
            line.pop()
        if line:
            last = line[-1]
            line[-1] = Segment(last.text.rstrip(), last.style, last.control)
        out.print(Segments([*line, Segment.line()]), end="")


def refuse_unshipped() -> None:
    """In a worker's session whose work is commits (an implementer, its retro), refuse to
    say its mode is done while its workspace (this folder) holds changes not committed, or
    its commits are not on its issue's branch (`legion.core.unshipped`). Outside a session,
    or outside a git checkout, there is nothing to tell."""
    import subprocess

    from legion.core.ids import branch_for
    from legion.core.model import Mode
    from legion.core.unshipped import SHIPPING_MODES, unshipped_refusal
    from legion.sessions.identity import current

    here = current()
    try:
        mode = Mode.parse(here.mode or "")
    except LegionError:
        return
    if mode not in SHIPPING_MODES or not here.issue:
        return
    status = subprocess.run(
        ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all"],
        capture_output=True,
        check=False,
    )
    if status.returncode != 0:
        return  # not a git checkout: nothing to tell
    changed = _changed_paths(status.stdout.decode(errors="replace"))
    head = subprocess.run(
        ["git", "symbolic-ref", "--quiet", "--short", "HEAD"], capture_output=True, check=False
    )
    branch = head.stdout.decode(errors="replace").strip() if head.returncode == 0 else None
    refused = unshipped_refusal(mode, branch, branch_for(here.issue), changed)
    if refused is not None:
        raise InputError(refused)


def _changed_paths(porcelain: str) -> list[str]:
    """The paths `git status --porcelain=v1 -z` shows, less new files that are build output
    (`__pycache__`, `node_modules`: the `regenerable` patterns' defaults), which nobody commits."""
    from legion.config.values import DEFAULT_REGENERABLE
    from legion.workspaces.base import is_regenerable

    changed = []
    skip = False
    for entry in porcelain.split("\0"):
        if skip:  # a rename's or a copy's former path
            skip = False
            continue
        code, path = entry[:2], entry[3:]
        if not path:
            continue
        skip = "R" in code or "C" in code
        if code == "??" and is_regenerable(path, DEFAULT_REGENERABLE):
            continue
        changed.append(path)
    return changed
