"""The `legion` command. Thin: parse, call, render; errors become one line and an exit code."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from legion import __version__

EXIT_INTERNAL = 70  # EX_SOFTWARE


def _say_error(message: str) -> None:
    from legion.core.text import for_display

    # An error can quote a tracker's or a forge's text: escaped like any text Legion did not
    # write (and bytes that were not UTF-8 in an argument, lone surrogates, shown escaped).
    print(f"legion: error: {for_display(' '.join(message.split()))}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["--version"], ["-V"]):
        # Answered before importing anything heavy: the cold-start path must stay fast.
        print(f"legion {__version__}")
        return 0
    if os.environ.get("_LEGION_COMPLETE"):  # the shell's completion script asking
        from legion.cli.completion import answer

        answered = answer(os.environ)
        if answered is not None:
            return answered
    if not args and sys.stdin.isatty() and sys.stdout.isatty():
        args = ["tui"]  # `legion` alone on a terminal opens the TUI; in a pipe, the help

    from legion.errors import LegionError

    try:
        ran = _in_daemon(args)
    except LegionError as exc:
        _say_error(str(exc))
        return exc.exit_code
    if ran is not None:
        return ran
    from legion.diagnostics.log import setup_command

    setup_command()  # what the modules it runs log is said as its own output: `legion: warning:`

    from typer import Abort
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

    from legion.cli.app import app_for
    from legion.errors import NotFoundError

    try:
        result = app_for(args)(args=args, prog_name="legion", standalone_mode=False)
    except NoArgsIsHelpError as exc:
        print(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        return 0
    except UsageError as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
        _say_error(exc.format_message() + hint)
        return exc.exit_code
    except ClickException as exc:
        _say_error(exc.format_message())
        return exc.exit_code
    except LegionError as exc:
        _say_error(str(exc))
        # Naming what does not exist (an issue, a pull request, a branch, a worker) is bad
        # input like a malformed value: exit 2, as docs/commands.md states.
        return 2 if isinstance(exc, NotFoundError) else exc.exit_code
    except UnicodeError as exc:
        # Text that is not UTF-8 (an argument, standard input, a file) is bad input.
        _say_error(f"the input is not valid UTF-8 ({exc})")
        return 2
    except (Abort, KeyboardInterrupt):
        print("legion: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`legion issue list | head`): not an error worth a word.
        sys.stderr.close()
        return 0
    except Exception as exc:
        if os.environ.get("LEGION_DEBUG"):
            raise
        _say_error(
            f"internal error: {type(exc).__name__}: {exc} "
            "(run again with LEGION_DEBUG=1 for a traceback, and please report it)"
        )
        return EXIT_INTERNAL
    return result if isinstance(result, int) else 0


def _in_daemon(args: list[str]) -> int | None:
    """In a session Legion gave the relay, a command that needs the tmux server, the bus or
    the project's database is run by the daemon (`legion.services.session_ops.DAEMON_COMMANDS`: a
    confined session sees none of them; the daemon refuses a worker): its exit code, after
    printing what it printed. None: run here."""
    from legion.relay import RUN_BY_DAEMON_ENV, session_has_relay

    if not session_has_relay(os.environ) or os.environ.get(RUN_BY_DAEMON_ENV):
        return None
    from legion.services.session_ops import (
        DAEMON_COMMANDS,
        FOLLOW_REFUSAL,
        command_index,
        follows,
        run_in_daemon,
    )

    at = command_index(args)
    if at is None or args[at] not in DAEMON_COMMANDS or {"--help", "-h"} & set(args):
        return None  # help is answered here
    if follows(args, at):  # the daemon refuses it too
        from legion.errors import InputError

        raise InputError(FOLLOW_REFUSAL)
    from legion.relay.client import session_client

    client = session_client(os.environ)
    assert client is not None
    args, stdin = _files_read_here(args, at)
    if stdin is None and "-" in args[at + 1 :] and not sys.stdin.isatty():
        stdin = sys.stdin.read()
    ran = run_in_daemon(client, args, stdin)
    sys.stdout.write(ran.stdout)
    sys.stdout.flush()
    sys.stderr.write(ran.stderr)
    sys.stderr.flush()
    return ran.exit


def _files_read_here(args: list[str], at: int) -> tuple[list[str], str | None]:
    """`args` with its `--*-file` option reading standard input, and the file's text read here,
    in the session's sandbox, as the session: the daemon runs the command outside it and reads
    no file for a session (`legion.core.file_options`). One file at most, and not beside `-`."""
    from pathlib import Path

    from legion.core.file_options import STDIN, named_files, reading_stdin
    from legion.errors import InputError

    named = named_files(args[at + 1 :])
    if not named:
        return args, None
    option = named[0]
    if len(named) > 1 or STDIN in args[at + 1 :]:
        raise InputError(
            f"through the daemon a command reads one file at most, not beside `-` "
            f"({option.name} {option.value})"
        )
    if option.value is None:
        raise InputError(f"{option.name} needs a file")
    try:
        text = Path(option.value).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {option.value}: {exc}") from None
    return [*args[: at + 1], *reading_stdin(args[at + 1 :], option)], text


def entry() -> None:
    if os.environ.get("LEGION_TRACE"):  # bench/swarm.py: each command is a span of the trace
        from legion.diagnostics.tracing import command_span

        with command_span(sys.argv[1:]):
            code = main()
        sys.exit(code)
    sys.exit(main())
