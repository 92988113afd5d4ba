"""The daemon's watch for spend without progress: a worker that keeps asking the model with
nothing to show for it (a loop, a session stuck re-reading) is stopped, and its issue asks a
human once, with the figures.

Cheap at every tick: one sum over the ledger per worker not retired (from the registry), of
what its session spent since its last known progress (its start, at first). Only a worker past
`idle_spend_limit` is looked at closer (live or not, then), for the newest of: a commit or a
file change in its workspace (`legion.workspaces.activity`), a message it posted on the bus, a
comment on its issue (but Legion's own questions). Progress after the mark moves the mark;
none, and it is stopped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from legion.core.marks import LEGION_AUTHOR
from legion.core.model import Label
from legion.core.stamps import instant, stamp_at
from legion.errors import LegionError
from legion.git import GitPlace
from legion.proxy.ledger import UsageLedger
from legion.reconcile.answers import idle_question
from legion.reconcile.humans import ask_human
from legion.sessions.roster import WorkerView
from legion.sessions.workers import WorkerManager
from legion.store.actionlog import ActionLog, OutcomeKind
from legion.trackers.base import RECENT_COMMENTS, Tracker
from legion.workspaces.activity import last_change

from .steps import DONE, StepResult


class IdleSpendWatch:
    def __init__(
        self,
        workers: WorkerManager,
        tracker: Tracker,
        log: ActionLog,
        limit: int | None,
        regenerable: Sequence[str],
        last_post: Callable[[str], float | None],
    ) -> None:
        """`last_post`: when the session (by id) last posted on the bus, or None."""
        self.workers = workers
        self.tracker = tracker
        self.log = log
        self.limit = limit
        self.regenerable = tuple(regenerable)
        self.last_post = last_post
        self._marks: dict[int, float] = {}  # by worker record: its last known progress

    def run(self) -> StepResult:
        limit = self.limit
        if limit is None:
            return DONE
        ledger = UsageLedger(self.log.db)
        # The workers not retired, from the registry alone: whether each is live (its window,
        # its transcript) is looked at only for one past the limit.
        current = self.workers.registry.current()
        self._marks = {r.id: m for r in current if (m := self._marks.get(r.id))}
        for record in current:
            mark = self._marks.get(record.id) or instant(record.started_at)
            # The ledger is stamped to the second, and a response in the mark's own second may
            # be from before the progress: count from the next whole second (a few responses
            # too few, never a working session's spend taken for idle).
            spent = ledger.total(session=record.session_id, since=stamp_at(math.floor(mark) + 1))
            if spent < limit:
                continue
            views = self.workers.roster.views_of(record.issue)
            live = [v for v in views if v.record.id == record.id and v.state.is_live]
            if not live:
                continue
            progress = self._progress(live[0])
            if progress is not None and progress > mark:
                self._marks[record.id] = progress
                continue
            self._stop(live[0], spent, mark, limit)
        return DONE

    def _progress(self, view: WorkerView) -> float | None:
        """The newest sign of progress of the worker's session, or None."""
        workspace = view.record.workspace
        try:
            place: GitPlace | None = self.workers.workspaces.place_at(workspace)
        except LegionError:
            place = None  # tampered (the checkpoint step says so), or not git's: files only
        signs = [
            last_change(workspace, self.regenerable, place),
            self.last_post(view.record.session_id),
        ]
        comments = self.tracker.list_comments(view.record.issue, newest=RECENT_COMMENTS)
        signs += [instant(c.created_at) for c in comments if c.asked is None]
        found = [sign for sign in signs if sign is not None]
        return max(found) if found else None

    def _stop(self, view: WorkerView, spent: int, mark: float, limit: int) -> None:
        issue, mode = view.record.issue, view.record.mode.value
        self.workers.retire(view)
        self._marks.pop(view.record.id, None)
        since = stamp_at(mark)
        self.log.append(
            issue,
            "idle_spend_stop",
            OutcomeKind.DONE,
            f"{view.record.window}: {spent:,} tokens since {since} without progress "
            f"(idle_spend_limit {limit:,})",
        )
        if Label.USER_INPUT_NEEDED.value in self.tracker.get_issue(issue).labels:
            return  # a human is asked already
        ask_human(
            self.tracker,
            issue,
            idle_question(issue, mode, spent, since, limit),
            author=LEGION_AUTHOR,
        )
        self.log.append(issue, "ask_human", OutcomeKind.DONE, "spending without progress")
