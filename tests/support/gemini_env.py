"""The pinned Gemini CLI for the tests that drive it (`legion.runtime.gemini.binary`).

`find_gemini` returns the CLI in Legion's cache as the real HOME sees it (tests/conftest.py
gives every test its own HOME), installing the pinned version there first when it is missing
(`legion doctor --install --runtime gemini` installs it). When it cannot be had, the
calling test fails, never skips, and says why.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import pytest

from legion.errors import ToolMissingError
from legion.runtime.gemini import binary as gemini_bin

_ENV_AT_IMPORT = dict(os.environ)


@cache
def _installed_gemini() -> Path | str:
    try:
        return gemini_bin.install(_ENV_AT_IMPORT, lambda _: None)
    except ToolMissingError as error:
        return str(error)


def find_gemini() -> Path:
    found = _installed_gemini()
    if isinstance(found, str):
        pytest.fail(
            f"Gemini CLI {gemini_bin.PINNED_VERSION} is not installed and cannot be: {found}",
            pytrace=False,
        )
    return found
