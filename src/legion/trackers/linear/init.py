"""What `legion init --tracker linear --team ENG` writes: the team, whose key is the issues'."""

from __future__ import annotations

from legion.errors import InputError
from legion.plugins import InitChoice, InitRequest


def init_settings(request: InitRequest) -> InitChoice:
    team = request.options.get("team")
    if team is None:
        raise InputError("--tracker linear needs the team: add --team KEY (e.g. --team ENG)")
    checked = request.check("linear_team", team, "option --team")
    # Linear's identifiers are the team's: ENG-12
    return InitChoice({"linear_team": checked}, key=checked)
