"""How GitHub's check runs and commit statuses read as Legion's checks (`ChecksState`), and
the one line that names a PR's unfinished ones. Pure."""

from __future__ import annotations

from typing import Any

from legion.core.model import ChecksState
from legion.forges.base import Check, PullRequest

FAILED_CONCLUSIONS = frozenset(
    {"FAILURE", "TIMED_OUT", "CANCELLED", "ACTION_REQUIRED", "STARTUP_FAILURE"}
)
_STATUS_STATES = {
    "SUCCESS": ChecksState.PASSING,
    "FAILURE": ChecksState.FAILING,
    "ERROR": ChecksState.FAILING,
    "PENDING": ChecksState.PENDING,
    "EXPECTED": ChecksState.PENDING,  # a required status nothing has reported yet
}


def check_of(node: Any) -> Check | None:
    """One node of a `statusCheckRollup`'s contexts as a `Check`; None for a null node (one
    GitHub could not resolve) or a kind Legion does not know.

    A check run that has not completed (queued, in progress, waiting, ...) is pending; a
    completed one failed if its conclusion is one of `FAILED_CONCLUSIONS`, else it passed
    (success, neutral, skipped, stale). A commit status is failing on FAILURE or ERROR,
    pending on PENDING or EXPECTED, else passing."""
    if not isinstance(node, dict):
        return None
    kind = node.get("__typename")
    if kind == "CheckRun":
        if node.get("status") != "COMPLETED" or node.get("conclusion") is None:
            state = ChecksState.PENDING
        elif node.get("conclusion") in FAILED_CONCLUSIONS:
            state = ChecksState.FAILING
        else:
            state = ChecksState.PASSING
        # A GitHub Actions job's id is its check run's: its log is the job's
        # (`GitHubForge.pr_checks`); another app's check run has none there.
        job = node.get("databaseId")
        return Check(
            str(node.get("name") or "check"),
            state,
            str(node.get("detailsUrl") or ""),
            status=str(node.get("status") or "").lower(),
            conclusion=str(node.get("conclusion") or "").lower(),
            log_id=str(job) if isinstance(job, int) and not isinstance(job, bool) else "",
        )
    if kind == "StatusContext":
        state = _STATUS_STATES.get(str(node.get("state")), ChecksState.PASSING)
        return Check(
            str(node.get("context") or "status"),
            state,
            str(node.get("targetUrl") or ""),
            conclusion=str(node.get("state") or "").lower(),
        )
    return None


def checks_of(rollup: Any, pr_url: str = "") -> tuple[Check, ...]:
    """The checks of a head commit's `statusCheckRollup` (null: no checks). When there are more
    than one page of them and the rollup's own state says failing or pending while the page
    shows no such check, one more check stands for the rest (linking to the PR's checks tab),
    so the state Legion reads agrees with GitHub's."""
    if not isinstance(rollup, dict):
        return ()
    contexts = rollup.get("contexts") or {}
    found = [c for node in contexts.get("nodes") or [] if (c := check_of(node)) is not None]
    unseen = int(contexts.get("totalCount") or 0) - len(contexts.get("nodes") or [])
    overall = _STATUS_STATES.get(str(rollup.get("state")))
    if (
        unseen > 0
        and overall in (ChecksState.FAILING, ChecksState.PENDING)
        and all(check.state is not overall for check in found)
    ):
        rest = f"{unseen} more check{'s' if unseen != 1 else ''}"
        found.append(Check(rest, overall, f"{pr_url}/checks" if pr_url else ""))
    return tuple(found)


def checks_line(pr: PullRequest) -> str:
    """The PR's failing and pending checks in one line, each failing one with its log link
    ("failing: lint <url>, test <url>; pending: build"); "" when none is either."""
    parts = []
    if pr.failing_checks:
        named = (f"{c.name} <{c.url}>" if c.url else c.name for c in pr.failing_checks)
        parts.append(f"failing: {', '.join(named)}")
    if pr.pending_checks:
        parts.append(f"pending: {', '.join(c.name for c in pr.pending_checks)}")
    return "; ".join(parts)
