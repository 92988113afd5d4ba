"""Presentation: JSON shapes and rich tables for issues, pull requests and state."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from legion.core.model import ChecksState, Mode, Status
from legion.core.stamps import utc_stamp
from legion.core.text import for_display
from legion.core.usage import Usage, total
from legion.forges.base import Check, PrChecks, PullRequest, Review
from legion.reconcile.observe import Snapshot
from legion.trackers.base import Comment, Issue

# Everything a tracker or a forge wrote (titles, bodies, comments, authors, labels, branch
# names, identifiers) is printed through `for_display`, here, and as rich `Text` or through
# `common.console()`, which reads no markup: `[red]` in a comment is text.


def issue_json(issue: Issue) -> dict[str, Any]:
    return {
        "identifier": issue.identifier,
        "title": issue.title,
        "body": issue.body,
        "status": issue.status.value,
        "labels": sorted(issue.labels),
        "parent": issue.parent,
        "children": list(issue.children),
        "blocked_by": list(issue.blocked_by),
        "created_at": utc_stamp(issue.created_at),
        "updated_at": utc_stamp(issue.updated_at),
    }


def comment_json(comment: Comment) -> dict[str, Any]:
    return {
        "id": comment.id,
        "issue": comment.issue,
        "author": comment.author,
        "body": comment.body,
        "created_at": utc_stamp(comment.created_at),
    }


def pr_json(pr: PullRequest) -> dict[str, Any]:
    return {
        "number": pr.number,
        "issue": pr.issue,
        "title": pr.title,
        "body": pr.body,
        "branch": pr.branch,
        "base": pr.base,
        "state": pr.state.value,
        "is_draft": pr.is_draft,
        "review": pr.review.value,
        "reviews": [review_json(review) for review in pr.reviews],
        "merge_commit": pr.merge_commit,
        "created_at": utc_stamp(pr.created_at),
        "updated_at": utc_stamp(pr.updated_at),
        # The CI checks on the head commit: passing, failing, pending or none; each check
        # with its own state and log link, and the failing ones again for a quick look.
        "checks": pr.checks.value,
        "check_runs": [check_json(check) for check in pr.check_runs],
        "failing_checks": [check_json(check) for check in pr.failing_checks],
    }


def check_json(check: Check) -> dict[str, Any]:
    return {
        "name": check.name,
        "state": check.state.value,
        "status": check.status,
        "conclusion": check.conclusion,
        "url": check.url,
    }


def check_lines(checks: Sequence[Check]) -> list[str]:
    """One line per check: its state, name, what the forge says of it, and its link
    (unescaped: printed through `common.echo`)."""
    said = ["/".join(part for part in (check.status, check.conclusion) if part) for check in checks]
    width = max(len(check.name) for check in checks) if checks else 0
    return [
        f"{check.state.value:<8} {check.name:<{min(width, 40)}}  {words}"
        + (f"  {check.url}" if check.url else "")
        for check, words in zip(checks, said, strict=True)
    ]


def check_log_json(found: PrChecks) -> dict[str, Any]:
    """`legion pr checks REF --log NAME --json`: the PR, the check, and the end of its log."""
    assert found.log is not None
    check = next((c for c in found.checks if c.name == found.log.name), None)
    return {
        "number": found.number,
        "head": found.head,
        "check": None if check is None else check_json(check),
        "log": found.log.text,
        "cut": found.log.cut,
    }


def review_json(review: Review) -> dict[str, Any]:
    """One review: its own `outcome` (approved, changes_requested or commented); the PR's
    resulting review outcome is the PR's `review`."""
    return {
        "outcome": review.outcome,
        "author": review.author,
        "body": review.body,
        "created_at": utc_stamp(review.created_at),
    }


def issues_table(issues: list[Issue], width: int = 80) -> Any:
    """`legion issue list`, fitted to `width` columns as `legion state` is: one line per issue
    where the labels fit, a long title cut with an ellipsis (the whole of it is in `--json`)."""
    from rich.cells import cell_len
    from rich.table import Table

    def natural(header: str, cells: list[str]) -> int:
        return max([cell_len(header), *(cell_len(cell) for cell in cells)])

    id_w = natural("ID", [issue.identifier for issue in issues])
    status_w = natural("Status", [issue.status.value for issue in issues])
    title_w = natural("Title", [for_display(issue.title) for issue in issues])
    labels_w = natural("Labels", [", ".join(sorted(issue.labels)) for issue in issues])
    room = width - id_w - status_w - 3 * _GAP
    if title_w + labels_w > room:  # the labels wrap in a moderate column; the title is cut
        labels_w = min(labels_w, max(12, room // 3))
        title_w = max(room - labels_w, 8)
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("ID", no_wrap=True, width=id_w)
    table.add_column("Status", no_wrap=True, width=status_w)
    table.add_column("Title", no_wrap=True, overflow="ellipsis", width=title_w)
    table.add_column("Labels", overflow="fold", width=labels_w)
    for issue in issues:
        table.add_row(
            for_display(issue.identifier),
            issue.status.value,
            for_display(issue.title),
            for_display(", ".join(sorted(issue.labels))),
        )
    return table


def usage_json(phases: Mapping[str, Usage]) -> dict[str, Any]:
    """An issue's tokens: the total, and by phase (mode) in the order they run."""
    order = {mode.value: n for n, mode in enumerate(Mode)}
    ordered = sorted(phases.items(), key=lambda item: order.get(item[0], len(order)))
    return {
        "total": total(phases.values()).to_json(),
        "phases": {mode: used.to_json() for mode, used in ordered},
    }


def usage_line(phases: Mapping[str, Usage]) -> str:
    """`Tokens: 12.3k in, 1.2k out, 40.0k cached (plan 2.1k, implement 51.0k)`."""
    order = {mode.value: n for n, mode in enumerate(Mode)}
    ordered = sorted(phases.items(), key=lambda item: order.get(item[0], len(order)))
    each = ", ".join(f"{mode} {_tokens(used.total)}" for mode, used in ordered)
    return f"Tokens: {total(phases.values()).describe()} ({each})"


def _tokens(count: int) -> str:
    return Usage(input=count).describe().split(" in,")[0]


def issue_detail(
    issue: Issue,
    comments: list[Comment],
    pr: PullRequest | None,
    usage: Mapping[str, Usage] | None = None,
    blockers: Sequence[tuple[str, Status | None]] = (),
    earlier: bool = False,
) -> Any:
    """`earlier`: the issue has comments before `comments` (the latest), not shown."""
    from rich.console import Group
    from rich.text import Text

    parts: list[Any] = [
        Text.assemble((for_display(issue.identifier), "bold"), "  ", for_display(issue.title)),
        Text(f"Status: {issue.status.value}"),
    ]
    if issue.labels:
        parts.append(shown(f"Labels: {', '.join(sorted(issue.labels))}"))
    if issue.parent:
        parts.append(shown(f"Parent: {issue.parent}"))
    if issue.children:
        parts.append(shown(f"Children: {', '.join(issue.children)}"))
    if blockers:
        listed = ", ".join(
            f"{name} ({'unknown' if status is None else status.value})" for name, status in blockers
        )
        parts.append(shown(f"Blocked by: {listed}"))
    if pr is not None:
        draft = ", draft" if pr.is_draft else ""
        checks = "" if pr.checks is ChecksState.NONE else f", checks {pr.checks.value}"
        parts.append(
            shown(
                f"PR: #{pr.number} {pr.branch} → {pr.base} "
                f"({pr.state.value}{draft}, review {pr.review.value}{checks})"
            )
        )
    if usage:
        parts.append(Text(usage_line(usage)))
    if issue.body:
        parts += [Text(""), shown(issue.body)]
    if earlier:
        parts += [
            Text(""),
            Text(
                f"(the latest {len(comments)} comments; every one: "
                f"`legion issue comments {issue.identifier}`)",
                style="dim",
            ),
        ]
    for comment in comments:
        parts += [
            Text(""),
            Text.assemble(
                (for_display(comment.author), "bold"),
                " ",
                (for_display(utc_stamp(comment.created_at)), "dim"),
            ),
            shown(comment.body),
        ]
    return Group(*parts)


def shown(text: str) -> Any:
    """Text a tracker, a forge or a worker wrote, as rich prints it: escaped (`for_display`;
    newlines and tabs kept), and never read as markup."""
    from rich.text import Text

    return Text(for_display(text))


def pr_detail(pr: PullRequest) -> Any:
    from rich.console import Group
    from rich.text import Text

    draft = " (draft)" if pr.is_draft else ""
    parts: list[Any] = [
        Text.assemble((f"PR #{pr.number}", "bold"), "  ", for_display(pr.title), draft),
        shown(f"Issue: {pr.issue}   Branch: {pr.branch} → {pr.base}   State: {pr.state.value}"),
        Text(f"Review: {pr.review.value}"),
        Text(f"Checks: {pr.checks.value}"),
    ]
    for check in pr.check_runs:
        if check.state is not ChecksState.PASSING:
            where = f"  {check.url}" if check.url else ""
            parts.append(shown(f"  {check.state.value}: {check.name}{where}"))
    if pr.merge_commit:
        parts.append(shown(f"Merge commit: {pr.merge_commit}"))
    if pr.body:
        parts += [Text(""), shown(pr.body)]
    for review in pr.reviews:
        parts += [
            Text(""),
            shown(f"{review.author} {review.outcome} at {utc_stamp(review.created_at)}"),
            shown(review.body),
        ]
    return Group(*parts)


def prs_table(prs: list[PullRequest]) -> Any:
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("PR", "Issue", "State", "Review", "Branch", "Title"):
        table.add_column(column, overflow="fold")
    for pr in prs:
        state = pr.state.value + (" (draft)" if pr.is_draft else "")
        table.add_row(
            f"#{pr.number}",
            for_display(pr.issue),
            state,
            pr.review.value,
            for_display(pr.branch),
            for_display(pr.title),
        )
    return table


def state_json(snapshot: Snapshot) -> dict[str, Any]:
    """`legion state --json`: issues keyed by identifier, each also carrying its `identifier`."""
    data = snapshot.to_json()
    data["issues"] = {
        identifier: {"identifier": identifier, **entry}
        for identifier, entry in data["issues"].items()
    }
    return data


_GAP = 2  # rich's padding between two columns of a box-less table
# The checks states `legion state` shows beside a PR (none is the absence of CI: not shown).
_SHOWN_CHECKS = frozenset({ChecksState.PASSING, ChecksState.FAILING, ChecksState.PENDING})


def _words(name: str) -> str:
    """`transition_to_retro` as a table shows it: words that can wrap."""
    return name.replace("_", " ")


def _pack(items: list[str], width: int) -> str:
    """`items` joined by ", ", broken into lines of at most `width` cells between items."""
    from rich.cells import cell_len

    lines: list[str] = []
    line = ""
    for index, item in enumerate(items):
        piece = item + ("," if index < len(items) - 1 else "")
        if line and cell_len(line) + 1 + cell_len(piece) > width:
            lines.append(line)
            line = piece
        else:
            line = f"{line} {piece}" if line else piece
    if line:
        lines.append(line)
    return "\n".join(lines)


def _state_widths(
    naturals: tuple[int, int, int, int, int], width: int
) -> tuple[int, int, int, int, int]:
    """Column widths for `legion state` within `width`: (id, status, title, pr, next)."""
    id_w, status_w, title_nat, pr_nat, next_nat = naturals
    room = width - id_w - status_w - 4 * _GAP  # for the title, the PR and the next action
    if title_nat + pr_nat + next_nat <= room:
        return naturals
    # Narrow: the PR and the next action wrap into moderate columns; the title takes the rest,
    # down to a readable minimum, before they wrap further.
    pr_w, next_w = min(pr_nat, 13), min(next_nat, 20)
    title_w = room - pr_w - next_w
    if title_w < 16:
        shrink = 16 - title_w
        cut = min(shrink, next_w - min(next_nat, 12))
        next_w -= cut
        pr_w -= max(0, min(shrink - cut, pr_w - min(pr_nat, 9)))
        title_w = room - pr_w - next_w
    title_w = max(title_w, 8)
    spare = title_w - title_nat
    if spare > 0:  # short titles: give the room back to the columns that wrap
        title_w = title_nat
        extra = min(spare, next_nat - next_w)
        next_w += extra
        pr_w += min(spare - extra, pr_nat - pr_w)
    return id_w, status_w, title_w, pr_w, next_w


def state_table(snapshot: Snapshot, width: int = 80) -> Any:
    """The issues of `legion state`, fitted to `width` columns.

    Each row: the identifier; the status (with "live worker" under it when one runs); the title,
    cut with an ellipsis, with the labels under it; the pull request and its review outcome;
    the next action in words, with its worker mode. Only the title is cut: the other columns
    wrap between words.
    """
    from rich.cells import cell_len
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    rows = []
    for state in snapshot.issues:
        pr = "-"
        if state.pr is not None:
            pr = f"#{state.pr.number} {_words(state.pr_review.value)}" + (
                " (draft)" if state.pr.is_draft else ""
            )
            if state.checks in _SHOWN_CHECKS:
                pr += f", checks {state.checks.value}"
        elif state.pr_review.value == "unknown":
            pr = "unknown"
        action = state.decision.words
        if state.note:
            action += f" ({state.note})"
        rows.append((state, pr, action))

    def natural(header: str, cells: list[str]) -> int:
        return max([cell_len(header), *(cell_len(cell) for cell in cells)])

    issues = [state.issue for state, _, _ in rows]
    id_w, status_w, title_w, pr_w, next_w = _state_widths(
        (
            natural("ID", [for_display(issue.identifier) for issue in issues]),
            natural(
                "Status",
                [issue.status.value for issue in issues]
                + ["live worker" for state, _, _ in rows if state.has_live_worker],
            ),
            natural(
                "Title",
                [for_display(issue.title) for issue in issues]
                + [for_display(", ".join(sorted(issue.labels))) for issue in issues],
            ),
            natural("PR", [pr for _, pr, _ in rows]),
            natural("Next action", [action for _, _, action in rows]),
        ),
        width,
    )
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("ID", no_wrap=True, width=id_w)
    table.add_column("Status", no_wrap=True, width=status_w)
    table.add_column("Title", width=title_w)
    table.add_column("PR", width=pr_w, overflow="fold")
    table.add_column("Next action", width=next_w, overflow="fold")
    for state, pr, action in rows:
        status: list[Any] = [Text(state.issue.status.value)]
        if state.has_live_worker:
            status.append(Text("live worker", style="dim"))
        title: list[Any] = [Text(for_display(state.issue.title), no_wrap=True, overflow="ellipsis")]
        if state.issue.labels:
            labels = _pack([for_display(label) for label in sorted(state.issue.labels)], title_w)
            title.append(Text(labels, style="dim", overflow="fold"))
        table.add_row(
            for_display(state.issue.identifier), Group(*status), Group(*title), pr, action
        )
    return table


# -- `legion config` ---------------------------------------------------------------------------

# What an unset setting means (`legion config`; docs/configuration.md shows it as the default).
UNSET_MEANING = {
    "base_branch": "the branch checked out in the repository",
    "linear_team": "none: needed only with the Linear tracker",
    "github_repo": "the `origin` remote's, when the tracker or forge is GitHub",
    "github_project": "none: `status: …` labels hold a GitHub issue's phase",
    "token_budget": "unlimited",
    "daily_token_budget": "unlimited",
    "idle_spend_limit": "unlimited: a session may spend without progress",
    "prices": "none: tokens only",
    "codex_bin": "the Codex CLI Legion finds for you",
    "wip_limit": "unlimited",
    "tmux_socket": "tmux's default server",
    "tmux_config": "tmux's default configuration",
    "claude_bin": "the Claude Code CLI Legion finds for you",
    "claude_config_dir": "$CLAUDE_CONFIG_DIR, else ~/.claude",
    "codex_home": "$CODEX_HOME, else ~/.codex",
    "gemini_bin": "the Gemini CLI Legion finds for you",
    "gemini_home": "$GEMINI_CLI_HOME, else ~",
    "state_dir": "under $XDG_STATE_HOME/legion",
    "sandbox": "sessions confined by bubblewrap where it works, else unconfined",
    "workspace_root": "beside the repository",
    "store": "SQLite, in the state folder",
    "host_name": "this machine's hostname",
    "max_sessions": "two a core, half a GiB of memory each, whichever is fewer",
}


def toml_literal(value: Any) -> str:
    """A setting's value as TOML writes it: `"text"`, `60.0`, `3`, `true`, `["a", "b"]`."""
    from pathlib import PurePath

    from legion.config.files import toml_value

    if isinstance(value, PurePath):
        value = str(value)
    if isinstance(value, float):
        return repr(value)  # 600.0, 1e+20, inf and nan are TOML floats as Python prints them
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_literal(item) for item in value) + "]"
    if isinstance(value, Mapping):
        pairs = (f"{toml_value(str(key))} = {toml_literal(item)}" for key, item in value.items())
        return "{ " + ", ".join(pairs) + " }" if value else "{}"
    return toml_value(value)


def source_text(source: str, env_var: str) -> str:
    """Where a setting's value comes from, as a user would look for it."""
    if source == "env":
        return env_var
    if source == "flag":
        return "command line"
    return source  # "default", or the configuration file's path


def config_lines(root: str, rows: list[tuple[str, Any, str]]) -> list[str]:
    """`legion config` for people: valid TOML, one line per setting, its source in a comment.

    An unset setting (no value anywhere, and no default value) is a comment line,
    `# name: unset (what that means)`, so the output stays valid TOML throughout.
    """
    lefts = []
    for name, value, _ in rows:
        if value is None:
            meaning = UNSET_MEANING.get(name)
            lefts.append(f"# {name}: unset" + (f" ({meaning})" if meaning else ""))
        else:
            lefts.append(f"{name} = {toml_literal(value)}")
    column = min(max(len(left) for left in lefts), 40) if lefts else 0
    lines = [f"# project: {root}"]
    for left, (_, _, source) in zip(lefts, rows, strict=True):
        lines.append(f"{left.ljust(column)}  # {source}")
    return lines
