"""A pass's admission of worker starts, alone: no tracker, no tmux, no pass around it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from legion.core.liveness import SessionState
from legion.core.model import Mode
from legion.reconcile.context import PassContext
from legion.reconcile.starts import Starts
from legion.store.actionlog import OutcomeKind


def _view(mode: Mode, state: SessionState) -> Any:
    return SimpleNamespace(record=SimpleNamespace(mode=mode), state=state)


def _starts(views: list[Any], wip_limit: int | None) -> tuple[Starts, Any]:
    guard = SimpleNamespace(paused=None)
    workers = SimpleNamespace(in_fleet=False)
    ctx = cast(PassContext, SimpleNamespace(guard=guard, dry_run=False, workers=workers))
    return Starts(ctx, views, wip_limit=wip_limit, token_budget=None), guard


def test_the_wip_limit_counts_live_workers_but_reviewers_and_frees_a_closed_ones_place() -> None:
    views = [
        _view(Mode.IMPLEMENT, SessionState.RUNNING),
        _view(Mode.REVIEW, SessionState.RUNNING),
        _view(Mode.PLAN, SessionState.DEAD),
    ]
    starts, _ = _starts(views, wip_limit=1)
    full = starts.blocked("LEG-1", Mode.PLAN)
    assert full is not None and full.kind is OutcomeKind.DEFERRED
    assert full.detail == "WIP limit 1 reached"
    assert starts.blocked("LEG-1", Mode.REVIEW) is None  # reviewers are exempt
    starts.closed(Mode.IMPLEMENT)
    assert starts.blocked("LEG-1", Mode.PLAN) is None


def test_nothing_starts_while_dispatch_is_paused_and_no_limit_means_none() -> None:
    starts, guard = _starts([_view(Mode.IMPLEMENT, SessionState.RUNNING)] * 5, wip_limit=None)
    assert starts.blocked("LEG-1", Mode.IMPLEMENT) is None
    guard.paused = "dispatch paused: two starts failed"
    paused = starts.blocked("LEG-1", Mode.REVIEW)
    assert paused is not None and paused.kind is OutcomeKind.DEFERRED
    assert paused.detail == "dispatch paused (`legion status` says why)"
