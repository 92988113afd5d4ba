"""The pinned Codex CLI for the tests that drive it (`legion.runtime.codex.binary`).

`find_codex` returns the CLI in Legion's cache as the real HOME sees it (tests/conftest.py
gives every test its own HOME), installing the pinned version there first when it is missing
(`scripts/test` installs it with `legion doctor --install --codex`). When it cannot be had, the
calling test fails, never skips, and says why.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import pytest

from legion.errors import ToolMissingError
from legion.runtime.codex import binary as codex_bin

_ENV_AT_IMPORT = dict(os.environ)


@cache
def _installed_codex() -> Path | str:
    try:
        return codex_bin.install(_ENV_AT_IMPORT, lambda _: None)
    except ToolMissingError as error:
        return str(error)


def find_codex() -> Path:
    found = _installed_codex()
    if isinstance(found, str):
        pytest.fail(
            f"Codex CLI {codex_bin.PINNED_VERSION} is not installed and cannot be: {found}",
            pytrace=False,
        )
    return found
