"""A scripted model that plays every role of the swarm: what `legion demo` runs on, and what
the end-to-end tests drive the real Claude Code CLI with.

Each worker's turns are shell commands that do the mode's job through `legion` commands, the
way the skills tell a real model to: post the plan, commit and open the PR, record the review
verdict before `worker-done`, commit the retro under docs/solutions/, merge and close. Scenarios
match the skill invocation's arguments exactly (`<command-args>implement mode for LEG-1…`), so
the skill's own text never selects one by accident.

The same script serves every agent CLI: its `flavor` is the runtime whose CLI it drives, and its
blocks are those of that runtime's scripted server (its `DemoPlugin.server` in the registry):
for Claude Code the Anthropic server's (`Bash` tool calls, prompts matched on the slash
command's `<command-args>`), for Codex the Responses server's (`exec_command` calls, prompts
matched on the `$legion-worker …` skill mention). A mixed swarm runs both servers, each with its
flavor of the one script.

The controller plays its Oracle for a worker that asked a question: woken for `LEG-1:oracle`, it
loads the `legion-oracle` skill (the Skill tool, as a real model would), then either comments its
reasoning and answers (`legion answer`), or asks a human (`legion escalate`).
"""

from __future__ import annotations

import importlib
import itertools
import re
import shlex
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from legion.demo import model_server
from legion.demo.model_server import ask_user_question, tool_use
from legion.plugins import DEFAULT_RUNTIME, RUNTIMES, runtime_plugin

# The runtimes a script can drive: those the demo runs (`DemoPlugin`).
FLAVORS = tuple(plugin.name for plugin in RUNTIMES if plugin.demo is not None)

DONE = "--add worker-done --remove worker-active"


def scripted_server(flavor: str) -> ModuleType:
    """The module of the scripted server runtime `flavor`'s CLI talks to."""
    demo = runtime_plugin(flavor).demo if flavor in FLAVORS else None
    if demo is None:
        raise ValueError(f"unknown flavor {flavor!r} (known: {', '.join(FLAVORS)})")
    return importlib.import_module(demo.server.partition(":")[0])


def _asks(server: ModuleType) -> bool:
    """Whether the CLI that server's API serves has a question tool (the Anthropic server's
    `AskUserQuestion`, and the Skill tool the Oracle loads its skill with)."""
    return server is model_server


# The controller's skill invocation, on any CLI (as `worker_prompt`'s).
CONTROLLER_PROMPT = (
    r"(?:<command-name>/legion-controller</command-name>|\$legion-controller\b"
    r"|the legion-controller skill\b)"
)


def worker_prompt(mode: str, issue: str, then: str = "") -> str:
    """The worker's skill invocation: Claude Code's expanded slash command, Codex's `$`
    mention, or Gemini's request in words; `then`: what the prompt says after it (a resumed
    worker's news)."""
    tail = f"[^<]*{then}" if then else ""
    invocation = r"(?:<command-args>|\$legion-worker |legion-worker skill and follow it: )"
    return rf"{invocation}{mode} mode for {re.escape(issue)}\b{tail}"


def _one(command: str, summary: str, flavor: str = DEFAULT_RUNTIME) -> list[Any]:
    server = scripted_server(flavor)
    return [[server.bash(command, summary)], [server.text(summary)]]


def issue_scenarios(
    issue: str,
    *,
    review_rounds: int = 2,
    ask: bool = False,
    flavor: str = DEFAULT_RUNTIME,
    implement_pause: float = 0.0,
) -> list[Any]:
    """Every mode of one issue. With `review_rounds=2` the first review requests changes and
    the second approves; with `ask`, the planner first asks a question with AskUserQuestion
    (Claude Code only: `codex exec` has no question tool); with `implement_pause`, the
    implementer works that many seconds before it writes (the fleet demo kills its host
    meanwhile, whichever CLI runs it)."""
    server = scripted_server(flavor)
    if ask and not _asks(server):
        raise ValueError("only a Claude Code planner asks with AskUserQuestion")
    n = issue.split("-")[1]
    low = issue.lower()
    plan = (
        f'legion issue comment {issue} --body "## Plan\n\n1. Add src/feature_{n}.py.\n'
        f'2. Test it." && legion issue label {issue} {DONE}'
    )
    implement = (
        (f"sleep {implement_pause:g} && " if implement_pause > 0 else "")
        + f"mkdir -p src && printf 'def feature_{n}():\\n    return {n}\\n' > src/feature_{n}.py"
        f" && git add -A && {_commit(f'{issue}: feature {n}')}"
        f" && (legion pr view {issue} --json >/dev/null 2>&1"
        f" || legion pr create --issue {issue} --branch legion/{low})"
        f" && legion issue label {issue} {DONE}"
    )
    changes = (
        f'(grep -q \'^"""Feature\' src/feature_{n}.py'
        f' || sed -i \'1i """Feature {n}."""\' src/feature_{n}.py)'
        f" && git add -A && {_commit(f'{issue}: docstring')}"
        f" && legion issue label {issue} --remove worker-active"
    )
    if review_rounds > 1:
        review = (
            f"if legion pr view {issue} --json | grep -q changes_requested; "
            f'then legion pr review {issue} --approve --body "Looks good now."; '
            f'else legion pr review {issue} --request-changes --body "Please add a docstring."; fi'
            f" && legion issue label {issue} {DONE}"
        )
    else:
        review = (
            f'legion pr review {issue} --approve --body "Looks good."'
            f" && legion issue label {issue} {DONE}"
        )
    retro = (
        f"mkdir -p docs/solutions && printf '# {issue}\\n\\nSmall features with a test each merge "
        f"cleanly.\\n' > docs/solutions/{low}.md && git add -A"
        f" && {_commit(f'{issue}: retro')} && legion issue label {issue} {DONE}"
    )
    finish = (
        f"legion pr ready {issue} && legion pr merge {issue} && legion issue move {issue} Done"
        f" && legion issue label {issue} --remove worker-active"
    )
    architect = (
        f'legion issue comment {issue} --body "## Design\n\nSmall enough for one change."'
        f" && legion issue label {issue} {DONE}"
    )
    plan_turns = _one(plan, "Plan posted.", flavor)
    if ask:
        question = ask_user_question("Which greeting should the feature use?", ["Hello", "Hi"])
        plan_turns = [
            [question],
            [server.bash(plan, "Plan posted.")],
            [server.text("Plan posted.")],
        ]
    plays = [
        ("implement", "requested changes", "changes", _one(changes, "Changes made.", flavor)),
        ("plan", "A human answered", "plan-answered", _one(plan, "Plan posted.", flavor)),
        ("architect", "", "architect", _one(architect, "Design posted.", flavor)),
        ("plan", "", "plan", plan_turns),
        ("implement", "", "implement", _one(implement, "PR opened.", flavor)),
        ("review", "", "review", _one(review, "Review recorded.", flavor)),
        ("retro", "", "retro", _one(retro, "Learnings committed.", flavor)),
        ("finish", "", "finish", _one(finish, "Merged and closed.", flavor)),
    ]
    # More specific first: the first scenario that matches the prompt plays.
    return [
        server.Scenario(worker_prompt(mode, issue, then), turns, name=f"{issue}:{name}", regex=True)
        for mode, then, name, turns in plays
    ]


# The epic the demo's architect splits (`legion demo --epic`), and its two children: each is
# one pull request, and the second waits for the first (`--blocked-by`), as the architect's
# workflow asks of an order that is unavoidable.
EPIC = (
    "Greet in two languages",
    "greet_en(name) and greet_fr(name), each with a test. Too big for one change: split it.",
)
EPIC_CHILDREN = (
    ("Add greet_en()", "greet_en(name) returns 'Hello, <name>!'. With a test."),
    ("Add greet_fr()", "greet_fr(name) returns 'Bonjour, <name> !'. With a test."),
)


def epic_children(epic: str) -> tuple[str, str]:
    """The identifiers the tracker gives the two children of `epic`, its last issue."""
    key, number = epic.rsplit("-", 1)
    return f"{key}-{int(number) + 1}", f"{key}-{int(number) + 2}"


def epic_architect_scenario(
    epic: str, children: tuple[str, str], flavor: str = DEFAULT_RUNTIME
) -> Any:
    """The architect of `epic` splits it into `EPIC_CHILDREN` (which the tracker numbers
    `children`), the second blocked by the first, posts its design and finishes: the epic then
    waits for them and closes once both are Done (`docs/state-machine.md`, "Epics")."""
    server = scripted_server(flavor)
    (first_title, first_body), (second_title, second_body) = EPIC_CHILDREN
    first, second = children
    design = (
        f"## Design\n\nTwo changes, one per language.\n\n**Children**: {first}: English; "
        f"{second}: French, blocked by {first}.\n\n**Left for this issue**: nothing."
    )
    command = (
        f"C1=$(legion issue create {shlex.quote(first_title)} --parent {epic} --status Todo"
        f" --body {shlex.quote(first_body)})"
        f" && C2=$(legion issue create {shlex.quote(second_title)} --parent {epic}"
        f' --status Todo --blocked-by "$C1" --body {shlex.quote(second_body)})'
        f' && test "$C1 $C2" = {shlex.quote(f"{first} {second}")}'
        f' && legion issue comment {epic} --body "{design}"'
        f" && legion issue label {epic} {DONE}"
    )
    return server.Scenario(
        worker_prompt("architect", epic),
        _one(command, "Split into two children.", flavor),
        name=f"{epic}:architect",
        regex=True,
    )


def _oracle_command(issue: str, answer: str | None) -> str:
    """What the controller's Oracle runs for `issue`: with an `answer` it comments its
    reasoning and answers the worker's question; without one it hands the question to a
    human."""
    if answer is None:
        reason = (
            "The issue, its comments and docs/solutions/ do not say which greeting to use; "
            "that is the product owner's choice."
        )
        return f"legion escalate {issue} --reason {shlex.quote(reason)}"
    comment = (
        f"## Oracle\n\n**Answer:** {answer}\n\n"
        "**Evidence:** the issue body names it.\n\n"
        "**Why no other answer fits:** the body leaves no other reading."
    )
    return (
        f"legion issue comment {issue} --body {shlex.quote(comment)}"
        f" && legion answer {issue} {shlex.quote(answer)}"
    )


def oracle_scenarios(answers: Mapping[str, str | None]) -> list[model_server.Scenario]:
    """The controller woken for `<issue>:oracle` items: it loads the legion-oracle skill, then
    deals with every question the wake names, as a real model would (`_oracle_command`). Two
    questions asked close together come in one wake, so each set of two or more issues has a
    scenario of its own, the larger sets first."""
    scenarios: list[model_server.Scenario] = []
    issues = list(answers)
    for size in range(len(issues), 0, -1):
        for together in itertools.combinations(issues, size):
            command = " && ".join(_oracle_command(issue, answers[issue]) for issue in together)
            summary = "; ".join(
                f"{issue}: asked a human." if answers[issue] is None
                else f"{issue}: answered {answers[issue]}."
                for issue in together
            )  # fmt: skip
            turns: list[model_server.Turn] = [
                [tool_use("Skill", {"skill": "legion-oracle", "args": ", ".join(together)})],
                [model_server.bash(command, summary)],
                [model_server.text(summary)],
            ]
            # Every issue named in the one prompt (a lookahead each), and no other asker.
            named = "".join(rf"(?=[^<]*\b{re.escape(issue)}:oracle\b)" for issue in together)
            others = "".join(
                rf"(?![^<]*\b{re.escape(issue)}:oracle\b)"
                for issue in issues
                if issue not in together
            )
            scenarios.append(
                model_server.Scenario(
                    rf"<command-args>{named}{others}",
                    turns,
                    name=":".join(together) + ":oracle",
                    regex=True,
                )
            )
    return scenarios


def controller_scenarios(mode: str, flavor: str = DEFAULT_RUNTIME) -> list[Any]:
    """The controller: in `llm` mode it reconciles on every wake; in `auto` mode it only has
    judgment calls to make, and the demo poses none."""
    server = scripted_server(flavor)
    match = CONTROLLER_PROMPT
    if mode == "llm":
        turns = _one("legion state --json > /dev/null && legion reconcile", "Reconciled.", flavor)
    else:
        turns = [[server.text("Nothing needs my judgment.")]]
    return [server.Scenario(match, turns, name="controller", regex=True)]


def swarm_script(
    issues: list[str],
    *,
    mode: str = "auto",
    review_rounds: int = 2,
    ask: tuple[str, ...] = (),
    oracle: Mapping[str, str] | None = None,
    flavor: str = DEFAULT_RUNTIME,
    implement_pause: float = 0.0,
    epics: Mapping[str, tuple[str, str]] | None = None,
) -> Any:
    """The whole swarm, as a `flavor` server's script. The planners of the issues in `ask` ask
    a question first; the controller's Oracle answers it with `oracle[issue]`, or asks a human
    when the issue has no answer there. `implement_pause`: as `issue_scenarios` takes it.
    `epics`: each epic's architect splits it into the two children named (`issues` lists the
    children; an epic itself has only its architect)."""
    answers = dict(oracle or {})
    scenarios: list[Any] = []
    if _asks(scripted_server(flavor)):
        scenarios += oracle_scenarios({issue: answers.get(issue) for issue in ask})
    scenarios += controller_scenarios(mode, flavor)
    for epic, children in (epics or {}).items():
        scenarios.append(epic_architect_scenario(epic, children, flavor))
    for issue in issues:
        scenarios += issue_scenarios(
            issue,
            review_rounds=review_rounds,
            ask=issue in ask,
            flavor=flavor,
            implement_pause=implement_pause,
        )
    return scripted_server(flavor).Script(scenarios)


def _commit(message: str) -> str:
    """A commit of what is staged, or nothing when nothing is (the step ran before: a worker
    restarted after its session died goes through its steps again, and ends where it would)."""
    return f'(git diff --cached --quiet || git commit -qm "{message}")'
