"""`legion completion bash|zsh|fish`: the shell's completion script, and the answers to it.

The script calls `legion` back with `_LEGION_COMPLETE=complete_<shell>` and the command line in
the environment (bash: COMP_WORDS and COMP_CWORD; zsh and fish: _TYPER_COMPLETE_ARGS);
`legion.cli.main` sends that call here before anything else runs (`answer`)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Annotated

import typer

from legion.errors import InputError

COMPLETE_VAR = "_LEGION_COMPLETE"
SHELLS = ("bash", "zsh", "fish")


def completion(
    shell: Annotated[str, typer.Argument(metavar="SHELL", help=f"One of {', '.join(SHELLS)}.")],
) -> None:
    """Print the shell completion script for bash, zsh or fish: load it in your shell's
    startup file (bash: `eval "$(legion completion bash)"` in ~/.bashrc; zsh: the same in
    ~/.zshrc, after `compinit`; fish: `legion completion fish | source` in
    ~/.config/fish/config.fish)."""
    from typer._completion_shared import get_completion_script

    if shell not in SHELLS:
        raise InputError(f"unknown shell {shell!r}: give one of {', '.join(SHELLS)}")
    typer.echo(get_completion_script(prog_name="legion", complete_var=COMPLETE_VAR, shell=shell))


def answer(env: Mapping[str, str]) -> int | None:
    """When the shell's script asks (`_LEGION_COMPLETE` set): print the completions of the
    command line it sent and return the exit code; else None. Only the command the line
    names is built (`app_for`), as when it runs."""
    instruction = env.get(COMPLETE_VAR)
    if not instruction:
        return None
    from typer._click.shell_completion import get_completion_class
    from typer._completion_classes import completion_init
    from typer.main import get_command

    from legion.cli.app import app_for

    kind, _, shell = instruction.partition("_")
    completion_init()
    found = get_completion_class(shell) if kind == "complete" and shell in SHELLS else None
    if found is None:
        print(f"legion: error: unknown completion request {instruction!r}", file=sys.stderr)
        return 2
    try:
        words, _ = found(get_command(app_for([])), {}, "legion", COMPLETE_VAR).get_completion_args()
    except (KeyError, ValueError):  # bash's COMP_WORDS or COMP_CWORD missing or not a number
        print("legion: error: the completion request lacks the command line", file=sys.stderr)
        return 2
    out = found(get_command(app_for(words)), {}, "legion", COMPLETE_VAR).complete()
    if out:
        sys.stdout.write(out + "\n")
    return 0
