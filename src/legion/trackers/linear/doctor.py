"""`legion doctor`'s checks of Linear: the API key, the API, the team, its states against
Legion's statuses, Legion's labels."""

from __future__ import annotations

from legion.config import Project
from legion.errors import BackendError, ConfigError
from legion.graphql_client import GraphQLClient
from legion.trackers.linear import documents as docs
from legion.trackers.linear.adapter import open_tracker
from legion.trackers.linear.team import find_label

DoctorCheck = tuple[str, bool, str]


def doctor_checks(project: Project, *, client: GraphQLClient | None = None) -> list[DoctorCheck]:
    """What `legion doctor` reports about Linear: (name, ok, what is there or how to fix it)."""
    from legion.trackers.linear.client import API_KEY_VAR, linear_client

    checks: list[DoctorCheck] = []
    if client is None:
        try:
            client = linear_client(project.env, timeout=10.0)
        except ConfigError as exc:
            return [("Linear API key", False, str(exc))]
    checks.append(("Linear API key", True, f"{API_KEY_VAR} is set"))
    try:
        viewer = client.execute(docs.VIEWER)["viewer"]
    except BackendError as exc:
        return [*checks, ("Linear API", False, str(exc))]
    who = viewer.get("displayName") or viewer.get("name") or viewer.get("id")
    checks.append(("Linear API", True, f"{client.url} answers; authenticated as {who}"))
    try:
        tracker = open_tracker(project, None, client=client)
        team = tracker.team(max_age=0)
    except (ConfigError, BackendError) as exc:
        return [*checks, ("Linear team", False, str(exc))]
    checks.append(("Linear team", True, f"{team.key} ({team.name})"))
    names = team.state_names()
    statuses = tracker.statuses
    missing = statuses.missing(names)
    unmapped = statuses.unmapped(names)
    not_legions = f"; not Legion's: {', '.join(unmapped)}" if unmapped else ""
    if missing:
        example = unmapped[0] if unmapped else "Name"
        checks.append(
            (
                "Linear statuses",
                False,
                f"no Linear state maps to {', '.join(s.value for s in missing)}: add the "
                f"state to team {team.key} in Linear, or map one in the [statuses] table of "
                f'.legion/config.toml, e.g. "{example}" = "{missing[0].value}"{not_legions}',
            )
        )
    else:
        mapped = ", ".join(
            f"{name} = {status.value}"
            for name in names
            if (status := statuses.to_legion(name)) is not None
        )
        checks.append(("Linear statuses", True, f"{mapped}{not_legions}"))
    absent = [name for name in tracker.known_labels if find_label(team, name) is None]
    detail = (
        f"missing {', '.join(absent)}: Legion creates them on team {team.key} when first used"
        if absent
        else f"all present: {', '.join(tracker.known_labels)}"
    )
    checks.append(("Linear labels", True, detail))
    return checks
