"""The roles (`legion.core.roles`), row by row: which worker mode may make which pull-request
call on its own issue."""

from __future__ import annotations

import pytest

from legion.core.model import Mode
from legion.core.roles import PR_ROLES, controller_refusal, refusal

ALLOWED = {
    ("implement", "create_pr"),
    ("finish", "set_draft"),
    ("review", "add_review"),
    ("finish", "merge"),
}


@pytest.mark.parametrize("mode", [m.value for m in Mode] + ["", "controller", "REVIEW"])
@pytest.mark.parametrize("operation", sorted(PR_ROLES))
def test_each_mode_may_make_only_its_roles_calls(mode: str, operation: str) -> None:
    why = refusal(mode, operation)
    if (mode, operation) in ALLOWED:
        assert why is None
    else:
        who = mode or "worker"
        article = "an" if who[:1].lower() in "aeiou" else "a"
        assert why is not None and why.startswith(f"{article} {who} session may not")


def test_an_operation_that_is_not_a_roles_is_not_refused_here() -> None:
    assert refusal("plan", "get_pr") is None


def test_the_controller_opens_and_readies_but_neither_reviews_nor_merges() -> None:
    assert controller_refusal("create_pr") is None and controller_refusal("set_draft") is None
    for operation in ("add_review", "merge"):
        why = controller_refusal(operation)
        assert why is not None and why.startswith("the controller may not")
    assert controller_refusal("get_pr") is None
