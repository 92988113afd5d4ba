"""An issue's tokens by phase, from its workers' transcripts, through `legion issue show`: a
retro resumes the implementer's session, and each phase gets the responses of its own time."""

from __future__ import annotations

import json
import os
from pathlib import Path

from legion.backends import open_backends, open_workers
from legion.config import load_project
from legion.core.ids import session_id
from legion.core.model import Mode
from tests.support.cli import LegionRunner


def _response(message_id: str, when: str, out: int) -> str:
    message = {"id": message_id, "usage": {"input_tokens": 1000, "output_tokens": out}}
    return json.dumps({"type": "assistant", "timestamp": when, "message": message}) + "\n"


def test_each_phase_gets_the_tokens_of_its_own_time(legion: LegionRunner, project: Path) -> None:
    legion("issue", "create", "Counted")
    loaded = load_project(project)
    backends = open_backends(loaded)
    workers = open_workers(loaded, backends, dict(os.environ))
    implement = session_id(loaded.settings.project_id, "LEG-1", Mode.IMPLEMENT)
    with backends.db.write() as conn:
        for mode, started, ended in (
            ("implement", "2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z"),
            ("retro", "2026-01-01T12:00:00Z", None),  # the same session, resumed
        ):
            conn.execute(
                "INSERT INTO workers (issue, mode, session_id, window, workspace, started_at, "
                "ended_at) VALUES ('LEG-1', ?, ?, 'w', ?, ?, ?)",
                (mode, implement, str(project), started, ended),
            )
    transcript = workers.runtimes.default.transcript(project, implement)
    transcript.parent.mkdir(parents=True, exist_ok=True)
    transcript.write_text(
        _response("a", "2026-01-01T10:05:00.000Z", 100)
        + _response("b", "2026-01-01T10:50:00.000Z", 200)
        + _response("c", "2026-01-01T12:01:00.000Z", 7)
    )
    shown = json.loads(legion("issue", "show", "LEG-1", "--json").stdout)["usage"]
    assert shown["phases"]["implement"]["output"] == 300
    assert shown["phases"]["retro"]["output"] == 7
    assert shown["total"]["total"] == 3000 + 307
    text = legion("issue", "show", "LEG-1").stdout
    assert "Tokens: 3.0k in, 307 out, 0 cached (implement 2.3k, retro 1.0k)" in text


def test_a_spent_budget_starts_no_worker_and_asks_a_human_whose_answer_allows_one_more(
    legion: LegionRunner, project: Path
) -> None:
    from legion.reconcile import BUDGET_HEADING, Reconciler
    from legion.store.actionlog import ActionLog

    legion("issue", "create", "Expensive")
    loaded = load_project(project, flags={"token_budget": 2000})
    backends = open_backends(loaded)
    workers = open_workers(loaded, backends, dict(os.environ))
    plan = session_id(loaded.settings.project_id, "LEG-1", Mode.PLAN)
    with backends.db.write() as conn:
        conn.execute(
            "INSERT INTO workers (issue, mode, session_id, window, workspace, started_at, "
            "ended_at) VALUES ('LEG-1', 'plan', ?, 'w', ?, '2026-01-01T10:00:00Z', "
            "'2026-01-01T11:00:00Z')",
            (plan, str(project)),
        )
    transcript = workers.runtimes.default.transcript(project, plan)
    transcript.parent.mkdir(parents=True, exist_ok=True)
    transcript.write_text(_response("a", "2026-01-01T10:05:00.000Z", 1500))  # 2,500 tokens
    reconciler = Reconciler(
        loaded, backends.tracker, backends.forge, workers, ActionLog(backends.db)
    )

    [outcome] = [o for o in reconciler.run() if o.issue == "LEG-1"]
    assert outcome.action == "dispatch_planner", outcome
    assert "token budget spent (2,500 of 2,000): asked a human" in outcome.detail
    issue = backends.tracker.get_issue("LEG-1")
    assert "user-input-needed" in issue.labels
    [question] = backends.tracker.list_comments("LEG-1")
    assert question.by_legion and question.body.startswith(BUDGET_HEADING)
    assert 'legion feedback LEG-1 "go on"' in question.body
    assert workers.roster.views() == []  # nothing started
    again = [o for o in reconciler.run() if o.issue == "LEG-1"]
    assert len(backends.tracker.list_comments("LEG-1")) == 1  # asked once, whatever the passes
    assert all("asked a human" not in o.detail for o in again)

    from legion.reconcile import budget_allowed

    backends.tracker.add_comment("LEG-1", "go on", author="sami")
    assert budget_allowed(backends.tracker.list_comments("LEG-1"), 2000) == 4500


def test_a_codex_sessions_tokens_come_from_its_rollout(
    legion: LegionRunner, project: Path, tmp_path: Path
) -> None:
    """Per phase, as for Claude Code: from the `token_count` events of the rollout Legion's
    session id links to, with cached input apart."""
    legion("issue", "create", "Counted on Codex")
    codex_home = tmp_path / "codex-home"
    env = dict(os.environ, CODEX_HOME=str(codex_home))
    loaded = load_project(project, env)
    backends = open_backends(loaded)
    workers = open_workers(loaded, backends, env)
    implement = session_id(loaded.settings.project_id, "LEG-1", Mode.IMPLEMENT)
    with backends.db.write() as conn:
        for mode, started, ended in (
            ("implement", "2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z"),
            ("retro", "2026-01-01T12:00:00Z", None),
        ):
            conn.execute(
                "INSERT INTO workers (issue, mode, session_id, window, workspace, started_at, "
                "ended_at, runtime) VALUES ('LEG-1', ?, ?, 'w', ?, ?, ?, 'codex')",
                (mode, implement, str(project), started, ended),
            )
    link = workers.runtimes.named("codex").transcript(project, implement)
    rollout = (
        link.parents[1]  # the session's own CODEX_HOME
        / "sessions"
        / "2026"
        / "01"
        / "01"
        / ("rollout-2026-01-01T10-00-00-01a208cc-6f6d-75b2-a519-a8de2a4bcf78.jsonl")
    )
    rollout.parent.mkdir(parents=True)
    lines, total = [], 0
    for when, fresh, cached, out in (
        ("2026-01-01T10:05:00.000Z", 1000, 400, 100),
        ("2026-01-01T12:01:00.000Z", 500, 0, 7),
    ):
        total += fresh + cached
        last = {"input_tokens": fresh + cached, "cached_input_tokens": cached, "output_tokens": out}
        info = {"last_token_usage": last, "total_token_usage": {"input_tokens": total}}
        event = {"type": "token_count", "info": info}
        lines.append(json.dumps({"timestamp": when, "type": "event_msg", "payload": event}))
    rollout.write_text("\n".join(lines) + "\n")
    link.parent.mkdir(parents=True)
    link.symlink_to(rollout)
    shown = json.loads(
        legion("issue", "show", "LEG-1", "--json", env={"CODEX_HOME": str(codex_home)}).stdout
    )["usage"]
    assert shown["phases"]["implement"] == {
        "input": 1000, "output": 100, "cache_read": 400, "cache_write": 0, "total": 1500,
    }  # fmt: skip
    assert shown["phases"]["retro"]["output"] == 7


def test_a_spent_budget_keeps_the_labels_that_say_which_worker_is_due(
    legion: LegionRunner, project: Path
) -> None:
    """Retro + worker-done with the budget spent: the finisher is due. Legion asks before it
    clears anything, so the answer starts the finisher, not the retro again (issue 24, 20)."""
    from legion.core.decide import Observation, due_after_answer
    from legion.core.model import Label, Status
    from legion.reconcile import BUDGET_HEADING, Reconciler, legion_asked
    from legion.store.actionlog import ActionLog

    legion("issue", "create", "Finishing", "--status", "Retro", "--label", "worker-done")
    loaded = load_project(project, flags={"token_budget": 2000})
    backends = open_backends(loaded)
    workers = open_workers(loaded, backends, dict(os.environ))
    implement = session_id(loaded.settings.project_id, "LEG-1", Mode.IMPLEMENT)
    with backends.db.write() as conn:
        conn.execute(
            "INSERT INTO workers (issue, mode, session_id, window, workspace, started_at, "
            "ended_at) VALUES ('LEG-1', 'retro', ?, 'w', ?, '2026-01-01T10:00:00Z', "
            "'2026-01-01T11:00:00Z')",
            (implement, str(project)),
        )
    transcript = workers.runtimes.default.transcript(project, implement)
    transcript.parent.mkdir(parents=True, exist_ok=True)
    transcript.write_text(_response("a", "2026-01-01T10:05:00.000Z", 1500))
    reconciler = Reconciler(
        loaded, backends.tracker, backends.forge, workers, ActionLog(backends.db)
    )
    [outcome] = [o for o in reconciler.run() if o.issue == "LEG-1"]
    assert outcome.action == "dispatch_finisher", outcome
    assert "asked a human" in outcome.detail
    issue = backends.tracker.get_issue("LEG-1")
    assert issue.labels == {"worker-done", "user-input-needed"}
    comments = backends.tracker.list_comments("LEG-1")
    assert comments[-1].body.startswith(BUDGET_HEADING) and legion_asked(comments)
    labels = frozenset(filter(None, map(Label.from_name, issue.labels))) | {
        Label.USER_FEEDBACK_GIVEN
    }
    due = due_after_answer(Observation(Status.RETRO, labels, latest_mode=Mode.RETRO))
    assert (due.action.value, due.mode) == ("dispatch_finisher", Mode.FINISH)
