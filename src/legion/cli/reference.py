"""The command and settings references in docs/, generated so they cannot drift.

`commands_markdown()` walks the command tree (`legion.cli.app.app`, as click builds it) and
writes each command's synopsis, arguments and options (as its `--help` shows them), what it
does, its example, and the notes `legion.cli.reference_notes.COMMAND_NOTES` adds. A command
added to the tree appears in the reference when it is regenerated: nothing here lists them.
`settings_markdown()` writes every setting of `legion.config.settings.SPECS` (the project's and each
plugin's): its type, default, variable and whether a repository's config may set it, with its
meaning from `legion.cli.reference_settings.SETTINGS`.

Each lands in its file between two markers, `<!-- generated: NAME -->` and
`<!-- end generated: NAME -->`; the prose around them is written by hand. A unit test fails
when a file differs from what this writes. Regenerate with:

    .venv/bin/python -m legion.cli.reference --write
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REGENERATE = ".venv/bin/python -m legion.cli.reference --write"


def _begin(name: str) -> str:
    return f"<!-- generated: {name} (by `{REGENERATE}`; do not edit) -->"


def _end(name: str) -> str:
    return f"<!-- end generated: {name} -->"


# -- commands --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandDoc:
    path: tuple[str, ...]  # ("issue", "create"); () for `legion` itself
    usage: str
    help: str
    rows: tuple[tuple[str, str], ...]  # (arguments and options as --help shows them, help)
    example: tuple[str, ...]
    subcommands: tuple[str, ...]

    @property
    def name(self) -> str:
        return " ".join(("legion", *self.path))


def walk_commands() -> Iterator[CommandDoc]:
    """Every command of the tree, depth first, in the order `--help` lists them; hidden ones
    left out."""
    import typer.main

    from legion.cli.app import app

    root = typer.main.get_command(app)
    ctx = root.make_context("legion", [], resilient_parsing=True)
    yield from _walk(root, ctx, ())


def _walk(command: Any, ctx: Any, path: tuple[str, ...]) -> Iterator[CommandDoc]:
    names = list(command.list_commands(ctx)) if hasattr(command, "list_commands") else []
    subs = [(name, command.get_command(ctx, name)) for name in names]
    subs = [(name, sub) for name, sub in subs if sub is not None and not sub.hidden]
    rows = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None or getattr(param, "hidden", False) or param.name == "help":
            continue
        rows.append((record[0], record[1]))
    pieces = " ".join(command.collect_usage_pieces(ctx))
    yield CommandDoc(
        path=path,
        usage=" ".join(("legion", *path, pieces)),
        help=_text(command.help or ""),
        rows=tuple(rows),
        example=_example(command.epilog or ""),
        subcommands=tuple(name for name, _ in subs),
    )
    for name, sub in subs:
        sub_ctx = sub.make_context(name, [], parent=ctx, resilient_parsing=True)
        yield from _walk(sub, sub_ctx, (*path, name))


def _text(help_text: str) -> str:
    """A docstring's paragraphs, each on one line (they were wrapped for a terminal)."""
    paragraphs = [" ".join(part.split()) for part in help_text.replace("\b", "").split("\n\n")]
    return "\n\n".join(part for part in paragraphs if part)


def _example(epilog: str) -> tuple[str, ...]:
    """The commands of an epilog's `Example:` block (`legion.cli.common.example`)."""
    lines = epilog.replace("\b", "").splitlines()
    if "Example:" not in [line.strip() for line in lines]:
        return ()
    at = [line.strip() for line in lines].index("Example:")
    return tuple(line.strip() for line in lines[at + 1 :] if line.strip())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _anchor(name: str) -> str:
    """GitHub's anchor for a heading `` `legion issue create` ``."""
    return re.sub(r"[^a-z0-9 _-]", "", name.lower()).replace(" ", "-")


def commands_markdown() -> str:
    from legion.cli.reference_notes import COMMAND_EXITS, COMMAND_NOTES

    docs = list(walk_commands())
    out = ["## Index", ""]
    for doc in docs:
        first = doc.help.split("\n\n")[0]
        depth = "  " * max(len(doc.path) - 1, 0)
        out.append(f"{depth}- [`{doc.name}`](#{_anchor(doc.name)}): {first}")
    out.append("")
    for doc in docs:
        out += [f"{'#' * min(len(doc.path) + 2, 4)} `{doc.name}`", ""]
        out += ["```text", doc.usage, "```", ""]
        if doc.help:
            out += [doc.help, ""]
        if doc.subcommands:
            listed = ", ".join(
                f"[`{sub}`](#{_anchor(f'{doc.name} {sub}')})" for sub in doc.subcommands
            )
            out += [f"Commands: {listed}.", ""]
        if doc.rows:
            out += ["| argument or option | meaning |", "|---|---|"]
            out += [f"| `{_cell(spec)}` | {_cell(meaning) or ' '} |" for spec, meaning in doc.rows]
            out.append("")
        key = " ".join(doc.path)
        if key in COMMAND_NOTES:
            out += [COMMAND_NOTES[key], ""]
        if not doc.subcommands:
            exits = COMMAND_EXITS.get(key, "")
            out += [f"Exit codes: 0 done; the [usual ones](#exit-codes) otherwise{exits}.", ""]
        if doc.example:
            out += ["Example:", "", "```sh", *doc.example, "```", ""]
    return "\n".join(out).rstrip("\n") + "\n"


# -- settings --------------------------------------------------------------------------------


def _default(spec: Any, *, short: bool = False) -> str:
    from legion.cli.reference_settings import SETTINGS
    from legion.cli.render import UNSET_MEANING, toml_literal

    given = SETTINGS[spec.name].default
    if given:
        return given
    if spec.default is None:
        return UNSET_MEANING.get(spec.name, "none")
    value = spec.default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    literal = toml_literal(value)
    return f"[below](#{spec.name})" if short and len(literal) > 40 else f"`{literal}`"


def _in_repo(spec: Any) -> str:
    if spec.repo_only:
        return "yes (the project's own: never in your user config)"
    if spec.user_only:
        return "never: your user config or the variable"
    if spec.widens:
        return "only once you `legion trust` it (unless it sets the default)"
    if spec.caps:
        return "to lower it; to raise it above yours, once you `legion trust` it"
    return "yes"


def settings_markdown() -> str:
    from legion.cli.reference_settings import SETTINGS
    from legion.config.settings import SPECS

    out = [
        "| setting | type | default | variable | in a repository's config |",
        "|---|---|---|---|---|",
    ]
    for spec in SPECS:
        doc = SETTINGS[spec.name]
        out.append(
            f"| [`{spec.name}`](#{spec.name}) | {_cell(doc.kind)} "
            f"| {_cell(_default(spec, short=True))} | `{spec.env_var}` | {_in_repo(spec)} |"
        )
    out.append("")
    for spec in SPECS:
        doc = SETTINGS[spec.name]
        out += [f"### `{spec.name}`", ""]
        out.append(
            f"Type: {doc.kind}. Default: {_default(spec)}. Variable: `{spec.env_var}`"
            f"{doc.env or ''}. In a repository's config: {_in_repo(spec)}."
        )
        out += ["", doc.meaning, ""]
    return "\n".join(out).rstrip("\n") + "\n"


# -- the files -------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[3]
GENERATED: dict[str, tuple[str, Callable[[], str]]] = {
    "commands": ("docs/commands.md", commands_markdown),
    "settings": ("docs/configuration.md", settings_markdown),
}


def replaced(text: str, name: str, generated: str) -> str:
    """`text` with its block `name` holding `generated`; a ValueError when it has none."""
    begin, end = _begin(name), _end(name)
    if text.count(begin) != 1 or text.count(end) != 1:
        raise ValueError(f"needs one {begin} and one {end}")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n\n{generated}\n{end}{tail}"


def stale(root: Path = ROOT) -> list[str]:
    """The generated files that differ from what this module writes now."""
    out = []
    for name, (where, generate) in GENERATED.items():
        text = (root / where).read_text(encoding="utf-8")
        if replaced(text, name, generate()) != text:
            out.append(where)
    return out


def write(root: Path = ROOT) -> list[str]:
    """Regenerate every block; the files that changed."""
    changed = []
    for name, (where, generate) in GENERATED.items():
        path = root / where
        text = path.read_text(encoding="utf-8")
        new = replaced(text, name, generate())
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(where)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m legion.cli.reference",
        description="Regenerate (--write) or check docs/commands.md and docs/configuration.md.",
    )
    parser.add_argument("--write", action="store_true", help="rewrite the generated blocks")
    args = parser.parse_args(argv)
    if args.write:
        changed = write()
        print("\n".join(f"{where}: regenerated" for where in changed) or "up to date")
        return 0
    out_of_date = stale()
    for where in out_of_date:
        print(f"{where} is out of date: run `{REGENERATE}`", file=sys.stderr)
    return 1 if out_of_date else 0


if __name__ == "__main__":
    sys.exit(main())
