"""`legion demo`: the swarm, end to end, on a throwaway repository."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from legion.errors import InputError, LegionError

if TYPE_CHECKING:
    from legion.demo.run import IssueSummary


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
            "--real",
            help="Use Anthropic's API (ANTHROPIC_API_KEY), and OpenAI's (OPENAI_API_KEY) for "
            "Codex, instead of the scripted model.",
        ),
    ] = False,
    runtime: Annotated[
        str,
        typer.Option(
            help="The agent CLI: claude-code, codex (every session) or mixed (Codex "
            "implementers, Claude Code for the other roles)."
        ),
    ] = "claude-code",
    timeout: Annotated[float, typer.Option(help="Give up after this many seconds.")] = 600.0,
) -> None:
    """Run the whole swarm on a throwaway repository: every issue from Todo to Done."""
    from legion.demo.run import RUNTIME_CHOICES, issues_text, run_demo

    if mode not in ("auto", "llm"):
        raise InputError(f"unknown controller mode {mode!r} (known: auto, llm)")
    runtime = "claude-code" if runtime == "claude" else runtime
    if runtime not in RUNTIME_CHOICES:
        known = ", ".join(RUNTIME_CHOICES)
        raise InputError(f"unknown runtime {runtime!r} (known: {known})")
    if directory is None:
        folder = Path(tempfile.mkdtemp(prefix="legion-demo-"))
    else:
        folder = directory.expanduser().resolve()
        if folder.exists() and any(folder.iterdir()):
            raise InputError(f"{folder} is not empty: choose a new folder for the demo")
        folder.mkdir(parents=True, exist_ok=True)
    result = run_demo(
        folder,
        issues=issues,
        mode=mode,
        real=real,
        timeout=timeout,
        say=typer.echo,
        runtime=runtime,
    )
    done = [issue for issue, status in result.statuses.items() if status == "Done"]
    typer.echo("")
    typer.echo(
        f"{len(done)} of {issues_text(len(result.statuses))} Done in {result.seconds:.0f} s "
        f"({mode} mode, {runtime})."
    )
    typer.echo("")
    for line in summary_table(result.issues):
        typer.echo(line)
    typer.echo("")
    if not real:
        typer.echo(
            f"Model requests (scripted): {result.requests}, of which the controller made "
            f"{result.controller_requests}."
        )
    for kept in result.kept_workspaces:
        typer.echo(f"Kept a workspace: {kept}")
    repo = folder / "repo"
    typer.echo(f"Files: {folder}")
    typer.echo(f"  repo:        {repo}   (cd there, then: legion issue list; legion log)")
    typer.echo(f"  state:       {repo / '.legion' / 'state'}   (database, daemon log)")
    if runtime != "codex":
        typer.echo(f"  transcripts: {folder / 'claude-config' / 'projects'}")
    if runtime != "claude-code":
        typer.echo(f"  rollouts:    {folder / 'codex-home' / 'sessions'}   (Codex's transcripts)")
    typer.echo(f"Remove them all with: rm -rf {folder}")
    if result.paused:
        raise LegionError(f"the demo stopped: {result.paused}")
    if len(done) != len(result.statuses):
        raise LegionError(
            f"the demo ran out of time after {timeout:g} s with "
            f"{issues_text(len(result.statuses) - len(done))} not Done; see `legion log` in {repo}"
        )


def summary_table(issues: Sequence[IssueSummary]) -> list[str]:
    """One row per issue: its workers in order, its time, its model requests, its PR."""
    header = ("issue", "status", "workers", "time", "requests", "PR")
    rows = [header] + [
        (
            s.identifier,
            s.status,
            " ".join(s.modes) or "-",
            "-" if s.seconds is None else f"{s.seconds:.0f} s",
            "-" if s.requests is None else str(s.requests),
            s.pr,
        )
        for s in issues
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]  # fmt: skip
