"""`legion doctor`'s checks of GitHub Issues: the token, the repository and the access it
gives, the statuses (project options or labels), Legion's labels."""

from __future__ import annotations

from legion.config import Project
from legion.errors import LegionError
from legion.graphql_client import GraphQLClient
from legion.trackers.github_issues import documents as docs
from legion.trackers.github_issues.adapter import open_tracker
from legion.trackers.github_issues.repository import STATUS_PREFIX

DoctorCheck = tuple[str, bool, str]


def doctor_checks(project: Project, *, client: GraphQLClient | None = None) -> list[DoctorCheck]:
    """What `legion doctor` reports about GitHub Issues: (name, ok, what is there or how to fix
    it). The token's source is named, never its value."""
    from legion.github.client import find_token, github_client

    source = ""
    if client is None:
        token = find_token(project.env)
        if token is None:
            return [
                (
                    "GitHub Issues",
                    False,
                    "no GitHub token: set GITHUB_TOKEN or GH_TOKEN, or log in with `gh auth login`",
                )
            ]
        source = f" (token from {token.source})"
        client = github_client(project.env, token=token, timeout=10.0)
    try:
        tracker = open_tracker(project, None, client=client)
        info = tracker.info(max_age=0)
    except LegionError as exc:
        return [("GitHub Issues", False, str(exc))]
    checks: list[DoctorCheck] = []
    writable = info.permission in ("ADMIN", "MAINTAIN", "WRITE", "TRIAGE")
    if not info.has_issues:
        off = f"{info.name_with_owner} has issues turned off in its settings"
        checks.append(("GitHub Issues", False, off))
    elif not writable:
        checks.append(
            (
                "GitHub Issues",
                False,
                f"{info.name_with_owner}: the token can only read (permission "
                f"{info.permission or 'none'}); it needs triage or write access to label and "
                "close issues",
            )
        )
    else:
        checks.append(
            (
                "GitHub Issues",
                True,
                f"{info.name_with_owner}, issues {tracker.issue_key}-N; authenticated as "
                f"{info.viewer}{source}",
            )
        )
    statuses = tracker.statuses
    names = tracker.status_store.names(info)
    if info.project is not None:
        board = info.project
        closed = " (closed)" if board.closed else ""
        checks.append(
            (
                "GitHub project",
                True,
                f"#{board.number} {board.title}{closed}: {docs.STATUS_FIELD} options "
                f"{', '.join(board.option_names())}",
            )
        )
        missing = statuses.missing(names)
        unmapped = statuses.unmapped(names)
        not_legions = f"; not Legion's: {', '.join(unmapped)}" if unmapped else ""
        if missing:
            example = unmapped[0] if unmapped else board.option_names()[0]
            checks.append(
                (
                    "GitHub statuses",
                    False,
                    f"no option of the {docs.STATUS_FIELD} field maps to "
                    f"{', '.join(s.value for s in missing)}: add the options to project "
                    f"#{board.number}, or map one in the [statuses] table of "
                    f'.legion/config.toml, e.g. "{example}" = "{missing[0].value}"{not_legions}',
                )
            )
        else:
            mapped = ", ".join(
                f"{name} = {status.value}"
                for name in names
                if (status := statuses.to_legion(name)) is not None
            )
            checks.append(("GitHub statuses", True, f"{mapped}; no status = Triage{not_legions}"))
    else:
        existing = info.status_label_names()
        detail = (
            f"labels {STATUS_PREFIX} <status>; present: {', '.join(existing)}"
            if existing
            else f"labels {STATUS_PREFIX} <status>, created when first used"
        )
        checks.append(("GitHub statuses", True, f"{detail}; no status = Triage"))
    absent = [name for name in tracker.known_labels if info.find_label(name) is None]
    checks.append(
        (
            "GitHub issue labels",
            True,
            f"missing {', '.join(absent)}: Legion creates them when first used"
            if absent
            else f"all present: {', '.join(tracker.known_labels)}",
        )
    )
    return checks
