"""The `legion` command. Thin: parse, call, render; errors become one line and an exit code."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from legion import __version__

EXIT_INTERNAL = 70  # EX_SOFTWARE


def _say_error(message: str) -> None:
    print(f"legion: error: {' '.join(message.split())}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["--version"], ["-V"]):
        # Answered before importing anything heavy: the cold-start path must stay fast.
        print(f"legion {__version__}")
        return 0

    from typer import Abort
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

    from legion.cli.app import app
    from legion.errors import LegionError

    try:
        result = app(args=args, prog_name="legion", standalone_mode=False)
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
        return exc.exit_code
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


def entry() -> None:
    sys.exit(main())
