"""The workers' read model: every worker Legion started and has not retired, as observed now
(the registry says which session runs in which window and workspace, tmux whether the window
lives, the transcript whether it is mid-turn, idle or waiting on a question), the tokens each
phase of an issue used, a worker's screen and its task list. It reads; it starts nothing.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from legion.core.fleet import remote_session_state
from legion.core.liveness import START_S, SessionState
from legion.core.model import Mode, normalize_identifier
from legion.core.stamps import instant
from legion.core.task_list import TaskList
from legion.core.usage import Usage, larger_per_phase
from legion.errors import NotFoundError
from legion.fleet.hosts import Fleet
from legion.proxy.ledger import UsageLedger
from legion.proxy.questions import AskedQuestions
from legion.runtime.tmux import Window
from legion.runtime.transcript import (
    PendingQuestion,
    TranscriptSummary,
    Turn,
    question_from_input,
)
from legion.sessions.observer import classify
from legion.sessions.placement import HostSessions
from legion.sessions.registry import Registry, WorkerRecord
from legion.sessions.runtimes import RuntimeChoice
from legion.sessions.windows import SessionWindows


@dataclass(frozen=True)
class WorkerView:
    record: WorkerRecord
    window: Window | None
    state: SessionState
    transcript: Path
    last_activity: float | None
    question: PendingQuestion | None
    # What its CLI said when it could not reach the model (`TranscriptSummary.unreachable`).
    unreachable: str | None = None

    def to_json(self, now: float) -> dict[str, Any]:
        age = None if self.last_activity is None else round(max(0.0, now - self.last_activity), 1)
        question = None
        if self.question is not None:
            question = {
                "text": self.question.text,
                "items": [
                    {
                        "question": item.question,
                        "header": item.header,
                        "options": list(item.options),
                        "multi_select": item.multi_select,
                    }
                    for item in self.question.items
                ],
            }
        return {
            "issue": self.record.issue,
            "mode": self.record.mode.value,
            "session_id": self.record.session_id,
            "runtime": self.record.runtime,
            "window": self.record.window,
            "host": self.record.host or None,  # the fleet host whose daemon started it
            "state": self.state.value,
            "workspace": str(self.record.workspace),
            "transcript": str(self.transcript),
            "transcript_age_s": age,
            "question": question,
            "started_at": self.record.started_at,
        }


class WorkerRoster:
    def __init__(
        self,
        registry: Registry,
        windows: SessionWindows,
        runtimes: RuntimeChoice,
        env: Mapping[str, str],
        *,
        here: str | None = None,
        host_timeout: float = 0.0,
    ) -> None:
        """`env`: the sessions' environment, which says where each CLI keeps its files.
        `here`: this host's name in a fleet (None: no fleet, every worker is this machine's);
        a worker recorded under another host is seen through that host's reports
        (`legion.sessions.placement`), as of `host_timeout`."""
        self.registry = registry
        self.windows = windows
        self.runtimes = runtimes
        self.env = env
        self.here = here
        self.host_timeout = host_timeout

    def views(self, *, here_only: bool = False) -> list[WorkerView]:
        """Every worker in the registry, with its state (`here_only`: only those this host
        runs). Raises `TmuxUnavailable` when tmux cannot say which windows run: that is
        unknown, never "all dead"."""
        records = self.registry.current()
        here = self.here
        if here_only and here is not None:
            records = [r for r in records if r.host in ("", here)]
        if not records:
            return []
        elsewhere = [] if here is None else [r for r in records if r.host not in ("", here)]
        remote = self._remote_views(elsewhere) if elsewhere else {}
        windows = {window.name: window for window in self.windows.list()}
        views = []
        for record in records:
            if record.id in remote:
                views.append(remote[record.id])
                continue
            window = windows.get(record.window)
            alive = window is not None and not window.pane_dead
            runtime = self.runtimes.of(record)
            transcript = runtime.transcript(record.workspace, record.session_id)
            summary = runtime.summarize(transcript) if alive else None
            if summary is not None:
                summary = self._with_asked_question(record.session_id, summary)
            state = classify(alive, summary)
            question = summary.pending_question if summary is not None else None
            views.append(
                WorkerView(
                    record,
                    window,
                    state,
                    transcript,
                    runtime.last_activity(transcript),
                    question,
                    summary.unreachable if summary is not None else None,
                )
            )
        return views

    def _remote_views(self, records: list[WorkerRecord]) -> dict[int, WorkerView]:
        """Workers other hosts run (by record id), as their hosts last reported them; a host
        that never joined the fleet runs none (a record from before it, or from a stopped
        fleet): those are left to this host's own look."""
        hosts, _ = Fleet(self.registry.db).hosts(self.host_timeout)
        states = {host.name: host.state for host in hosts}
        reports = HostSessions(self.registry.db).reports()
        found: dict[int, WorkerView] = {}
        for record in records:
            if record.host not in states:
                continue
            report = reports.get(record.id)
            state = remote_session_state(
                states[record.host],
                report.state if report is not None and report.host == record.host else None,
                max(0.0, time.time() - instant(record.started_at)),
                START_S + self.host_timeout,
            )
            activity = report.last_activity if report is not None else None
            question = report.question if report is not None else None
            found[record.id] = WorkerView(record, None, state, record.workspace, activity, question)
        return found

    def _with_asked_question(
        self, session_id: str, summary: TranscriptSummary
    ) -> TranscriptSummary:
        """`summary`, with the question the session's model asked where its transcript does
        not say it yet: the model proxy saw the question pass and the session has not asked
        the model since (`legion.proxy.questions`), and the transcript waits on the model."""
        if summary.pending_question is not None or summary.turn is not Turn.OPEN:
            return summary
        asked = AskedQuestions(self.registry.db).last(session_id)
        if asked is None:
            return summary
        question = question_from_input(asked.tool_use_id, asked.input)
        return replace(summary, pending_question=question)

    def _elsewhere(self, record: WorkerRecord) -> bool:
        """Whether the worker was started on another host of the fleet than this one."""
        return self.here is not None and record.host not in ("", self.here)

    def views_of(self, issue: str) -> list[WorkerView]:
        """The workers of `issue` (its identifier, normalized)."""
        return [view for view in self.views() if view.record.issue == issue]

    def live_issues(self) -> set[str]:
        return {view.record.issue for view in self.views() if view.state.is_live}

    def latest_modes(self) -> dict[str, Mode]:
        return self.registry.latest_modes()

    def records(self) -> list[WorkerRecord]:
        """The current worker records."""
        return self.registry.current()

    def record_of(self, sid: str) -> WorkerRecord | None:
        """The current worker record of session `sid` (None: the controller, or retired)."""
        return self.registry.by_session(sid)

    def latest_record(self, issue: str) -> WorkerRecord | None:
        """The issue's latest worker record, current or retired."""
        return self.registry.latest(issue)

    def task_list(self, record: WorkerRecord) -> TaskList | None:
        """The worker's own task list, as its CLI keeps it (Claude Code's TaskCreate files);
        None when it has none. Read with the sessions' environment, so a project that names
        its CLI's home (the demo's) shows its workers' lists to whoever asks."""
        return self.runtimes.of(record).task_list(record.session_id)

    def usage(self, issue: str | None = None) -> dict[str, dict[str, Usage]]:
        """Tokens by issue and phase (mode): what the daemon's model proxy metered as each
        response passed (`legion.proxy.ledger`), or what the sessions' own records say where
        that is more (a session that ran while no daemon did, or on a runtime the proxy does
        not serve): each counts what was spent, never more. `issue`: that issue's only."""
        wanted = None if issue is None else normalize_identifier(issue)
        metered = UsageLedger(self.registry.db).by_phase(wanted)
        return larger_per_phase(metered, self.transcript_usage(wanted))

    def transcript_usage(self, issue: str | None = None) -> dict[str, dict[str, Usage]]:
        """Tokens by issue and phase (mode), from the sessions' own records: each worker's
        share of its session's transcript is the responses recorded from its start to the
        next start of the same session (a retro resumes the implementer's session, a
        resumed worker is a new record). `issue`: that issue's only."""
        wanted = None if issue is None else normalize_identifier(issue)
        by_session: dict[str, list[WorkerRecord]] = {}
        for record, _ in self.registry.history():
            if wanted is None or record.issue == wanted:
                by_session.setdefault(record.session_id, []).append(record)
        found: dict[str, dict[str, Usage]] = {}
        for records in by_session.values():
            records.sort(key=lambda r: (r.started_at, r.id))
            runtime = self.runtimes.of(records[-1])
            transcript = runtime.transcript(records[0].workspace, records[0].session_id)
            starts = [instant(r.started_at) for r in records]
            for when, used in runtime.usage(transcript):
                at = instant(when)
                index = max(0, bisect.bisect_right(starts, at) - 1)
                record = records[index]
                phases = found.setdefault(record.issue, {})
                phases[record.mode.value] = phases.get(record.mode.value, Usage()) + used
        return found

    def peek(self, issue: str, lines: int = 40) -> tuple[WorkerView, str]:
        """The issue's worker (its live one, else its last) and its window's last `lines`."""
        identifier = normalize_identifier(issue)
        every = self.views_of(identifier)
        views = [view for view in every if view.window is not None]
        # In a fleet, a worker on another host has its window there.
        remote = [view for view in every if self._elsewhere(view.record)]
        live = [view for view in views if view.state.is_live]
        live_remote = [view for view in remote if view.state.is_live]
        if (live_remote and not live) or (remote and not views):
            there = (live_remote or remote)[-1].record.host
            verb = "runs" if live_remote else "ran"
            raise NotFoundError(
                f"{identifier}'s worker {verb} on host {there}: run `legion peek {identifier}` "
                "there"
            )
        if not views:
            raise NotFoundError(f"{identifier} has no worker window (see `legion workers`)")
        view = (live or views)[-1]
        assert view.window is not None
        return view, self.windows.screen(view.window.id, lines=lines)
