"""`legion demo`: the swarm, end to end, on a throwaway repository."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from legion.errors import InputError


def demo(
    directory: Annotated[
        Path | None,
        typer.Option("--dir", help="Where to create the demo (default: a new temporary folder)."),
    ] = None,
    issues: Annotated[int, typer.Option(min=1, max=5, help="How many issues to run.")] = 3,
    mode: Annotated[str, typer.Option(help="Controller mode: auto or llm.")] = "auto",
    real: Annotated[
        bool,
        typer.Option(
            "--real", help="Use Anthropic's API (ANTHROPIC_API_KEY) instead of the scripted model."
        ),
    ] = False,
    timeout: Annotated[float, typer.Option(help="Give up after this many seconds.")] = 600.0,
) -> None:
    """Run the whole swarm on a throwaway repository: every issue from Todo to Done."""
    from legion.demo.run import run_demo

    if mode not in ("auto", "llm"):
        raise InputError(f"unknown controller mode {mode!r} (known: auto, llm)")
    if directory is None:
        folder = Path(tempfile.mkdtemp(prefix="legion-demo-"))
    else:
        folder = directory.expanduser().resolve()
        if folder.exists() and any(folder.iterdir()):
            raise InputError(f"{folder} is not empty: choose a new folder for the demo")
        folder.mkdir(parents=True, exist_ok=True)
    result = run_demo(folder, issues=issues, mode=mode, real=real, timeout=timeout, say=typer.echo)
    done = [issue for issue, status in result.statuses.items() if status == "Done"]
    typer.echo("")
    typer.echo(
        f"{len(done)} of {len(result.statuses)} issues Done in {result.seconds:.0f} s "
        f"({mode} mode)."
    )
    if not real:
        typer.echo(
            f"Model requests (scripted): {result.requests}, of which the controller made "
            f"{result.controller_requests}."
        )
    typer.echo(
        f"Look around: cd {folder / 'repo'} && legion issue list && legion log && git log --oneline"
    )
    if len(done) != len(result.statuses):
        raise typer.Exit(1)
