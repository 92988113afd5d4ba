"""docs/commands.md and docs/configuration.md are generated from the command tree and the
settings spec (`legion.cli.reference`): they hold what the code says, every command and every
setting, and nothing that is not there."""

from __future__ import annotations

from legion.cli import reference
from legion.cli.reference_notes import COMMAND_EXITS, COMMAND_NOTES
from legion.cli.reference_settings import SETTINGS
from legion.config.settings import SPECS


def test_the_generated_docs_are_up_to_date() -> None:
    stale = reference.stale()
    assert not stale, (
        f"{', '.join(stale)} differ from the command tree and the settings spec: "
        f"run `{reference.REGENERATE}` and commit the result"
    )


def test_every_command_and_subcommand_is_in_the_reference() -> None:
    docs = list(reference.walk_commands())
    names = {doc.name for doc in docs}
    assert {"legion", "legion issue create", "legion skills install", "legion host drain"} <= names
    text = reference.commands_markdown()
    for doc in docs:
        assert f"`{doc.name}`\n" in text, doc.name
        assert doc.example, f"{doc.name} has no example"


def test_every_setting_has_a_meaning_and_every_note_names_something() -> None:
    names = {spec.name for spec in SPECS}
    assert names - set(SETTINGS) == set(), "settings with no meaning in reference_settings.SETTINGS"
    assert set(SETTINGS) - names == set(), "reference_settings.SETTINGS names no such setting"
    paths = {" ".join(doc.path) for doc in reference.walk_commands()}
    assert set(COMMAND_NOTES) - paths == set(), "COMMAND_NOTES names no such command"
    assert set(COMMAND_EXITS) - paths == set(), "COMMAND_EXITS names no such command"
    text = reference.settings_markdown()
    for spec in SPECS:
        assert f"### `{spec.name}`" in text and f"`{spec.env_var}`" in text


def test_a_block_is_replaced_between_its_markers_and_a_missing_one_is_refused() -> None:
    begin = "<!-- generated: x (by `" + reference.REGENERATE + "`; do not edit) -->"
    text = f"intro\n{begin}\nold\n<!-- end generated: x -->\noutro\n"
    assert reference.replaced(text, "x", "new\n") == (
        f"intro\n{begin}\n\nnew\n\n<!-- end generated: x -->\noutro\n"
    )
    try:
        reference.replaced("no markers", "x", "new\n")
    except ValueError as exc:
        assert "generated: x" in str(exc)
    else:
        raise AssertionError("a file without markers was accepted")
