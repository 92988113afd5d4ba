"""`legion doctor`'s checks of the GitHub forge: the token (where from, never its value), who
it is, the repository and whether the token can push, and the review labels."""

from __future__ import annotations

from legion.config import Project
from legion.errors import LegionError
from legion.forges.github.connection import RepositoryConnection
from legion.forges.github.reviews import APPROVED_LABEL, CHANGES_LABEL
from legion.github.client import Token, find_token, github_client
from legion.graphql_client import GraphQLClient


def doctor_checks(
    project: Project, *, client: GraphQLClient | None = None
) -> list[tuple[str, bool, str]]:
    """(name, ok, detail) for `legion doctor`: the token (where from, never its value), who it
    is, the repository and whether the token can push, and the review labels."""
    checks: list[tuple[str, bool, str]] = []
    token: Token | None = None
    if client is None:
        token = find_token(project.env)
        if token is None:
            return [
                (
                    "GitHub token",
                    False,
                    "not found: set GITHUB_TOKEN or GH_TOKEN, or log in with `gh auth login`",
                )
            ]
        checks.append(("GitHub token", True, f"from {token.source}"))
        client = github_client(project.env, token=token, timeout=10.0)
    connection = RepositoryConnection(project, client=client)
    try:
        slug = connection.slug
    except LegionError as exc:
        return [*checks, ("GitHub repository", False, str(exc))]
    try:
        context = connection.fetch_context()
    except LegionError as exc:
        return [*checks, ("GitHub authentication", False, str(exc))]
    checks.append(("GitHub authentication", True, f"authenticated as {context.viewer_login}"))
    if context.id is None:
        checks.append(("GitHub repository", False, f"{slug} not found, or the token cannot see it"))
        return checks
    can_push = context.permission in ("ADMIN", "MAINTAIN", "WRITE")
    checks.append(
        (
            "GitHub repository",
            can_push,
            f"{context.name_with_owner}: the token can push"
            if can_push
            else f"{context.name_with_owner}: the token cannot push (permission "
            f"{context.permission or 'none'}); it needs write access",
        )
    )
    missing = [name for name in (APPROVED_LABEL, CHANGES_LABEL) if name not in context.label_ids]
    if not missing:
        checks.append(("GitHub review labels", True, f"{APPROVED_LABEL}, {CHANGES_LABEL}"))
    else:
        checks.append(
            (
                "GitHub review labels",
                can_push,
                f"{', '.join(missing)} missing: created at the first review"
                if can_push
                else f"{', '.join(missing)} missing, and the token cannot create labels",
            )
        )
    return checks
