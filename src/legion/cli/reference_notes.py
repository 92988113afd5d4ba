"""What the generated references say of commands beyond what the code holds
(`legion.cli.reference`): `COMMAND_NOTES` and `COMMAND_EXITS`, what a command's `--help` does not
say, by command path (`"issue show"`); a test fails when a path names no command. A command
without a note is documented by its help. (The settings' meanings: `reference_settings`.)
"""

from __future__ import annotations

# What a command's --help does not say, by its path below `legion`.
COMMAND_NOTES: dict[str, str] = {
    "init": (
        "It needs a repository with at least one commit (workers branch from it; in a fresh "
        "`git init` it says so and writes nothing). With a real backend it checks the key, the "
        "team and the repository before it writes anything, and warns about what can wait (a "
        'Linear team has no "Retro" state by default: add one, or map one in `[statuses]`). '
        "On a project already made, the same options (or none) are a no-op; others are refused "
        "with the settings to edit in `.legion/config.toml`: `init` never changes a project. "
        "It trusts what it writes itself (`--tracker linear --team ENG`, `--forge github "
        "--repo …`)."
    ),
    "issue create": (
        "`--blocked-by`: an issue it waits for (see [Blocked by](concepts.md#blocked-by))."
    ),
    "issue list": (
        "One line each, fitted to the terminal like `legion state` (a long title is cut with "
        "`…`; a pipe gets 200 columns; `--json` has every title whole)."
    ),
    "issue show": (
        "The latest 100 comments (a line says when there are earlier ones; `--json`: "
        "`earlier_comments`), the pull request, the issues it is blocked by with each one's "
        "status (`--json`: `blocked_by`, identifiers, and `blockers`, each `{identifier, "
        "status}`, status null when it cannot be read), and the tokens its workers used (in, "
        "out, cached; in total and by phase), read from the sessions' own transcripts."
    ),
    "issue label": "Idempotent.",
    "issue comments": (
        "Every comment, oldest first; `--last N`: the latest N, read from the end; a session "
        "reads at most its latest 500."
    ),
    "pr create": "Prints `#N`. With the GitHub forge it pushes the branch to `remote` first.",
    "pr view": (
        "REF: `3`, `#3`, or an issue id. Shows the CI checks (`Checks: failing`, then each "
        "failing or pending check with its log link; `--json`: `checks`, `check_runs`, "
        "`failing_checks` with `name`, `state`, `status`, `conclusion` and `url`)."
    ),
    "pr checks": (
        "REF: `3`, `#3`, or an issue id. One line per check on the PR's head: its state "
        "(`passing`, `failing`, `pending`), name, what the forge says (`completed/failure`) and "
        "its link; `--json`: a list of `{name, state, status, conclusion, url}`. The embedded "
        "forge runs no CI: `no checks: the embedded forge runs no CI`. `--log NAME` prints the "
        "end of that check's log (a GitHub Actions job's), at most its last 200 lines and 64 "
        "KiB (a line on stderr says when earlier lines were left out; `--json`: `{number, "
        "head, check, log, cut}`), every control character escaped (`\\x1b`): it is CI's "
        "text. In a session the daemon fetches it (the token stays there; GitHub's redirect to "
        "its log storage is followed without the token), and a worker reads only its own "
        "issue's pull request."
    ),
    "pr review": "Says what was recorded and, when it differs, the PR's review outcome.",
    "pr merge": (
        "A real git merge into the base branch (`Merge PR #N: LEG-1: title`) on the embedded "
        "forge, by `merge_method` on GitHub; conflicts are reported, never forced."
    ),
    "state": (
        "Observe, decide, report: one row per issue, fitted to the terminal (a long title is "
        "cut with `…`, labels go under it, the next action is in words; a Backlog issue "
        "without an opt-in label reads `skip (no opt-in label)`, a blocked one `skip (blocked "
        "by LEG-3)`, an approved PR waiting for CI `skip (checks pending)`; the PR column says "
        "`checks failing` or `checks pending`). In `--json` (what the controller reads) each "
        "issue has the `review` outcome the decision table saw (`unknown` when the forge did "
        "not answer), the PR's CI `checks` (`passing`, `failing`, `pending`, `none`, or "
        "`unknown`), `waiting` (why an issue whose worker finished waits, e.g. `checks "
        "pending`, or `null`), `blocked_by` (its blockers that are not Done) and its `pr` "
        "(`number`, `is_draft`, `review`), or `null`."
    ),
    "start": (
        "Refuses a second daemon for the project, and refuses in one line when no session "
        "could reach a model (see [troubleshooting](troubleshooting.md#no-model-login)). "
        "`--mode manual`: it hosts the sessions you start by hand and runs no controller and "
        "no reconcile pass. It prints its pid, its log and how to watch the swarm: `tmux -S "
        "<socket> attach -t legion-…` (`tmux attach -t legion-…` without a private socket). "
        "In the foreground, Ctrl-C (or SIGTERM) says what it stops and stops it within a "
        "moment (it does not wait out a worker's start; a second Ctrl-C stops mid-pass), "
        "leaving the controller and workers running. The next `legion start` clears a "
        "dispatch pause."
    ),
    "stop": (
        "`--all` also closes the controller and worker windows, and marks their agents "
        '*failed*, "stopped by `legion stop --all`". Without it, sessions go on, but their '
        "model calls wait for the next `legion start`."
    ),
    "status": (
        "Daemon (`starting` until its relay and model proxy are up, when no session starts "
        "yet: `serving` in `--json`), heartbeat, controller, who holds the model key "
        "(`model:` the daemon's proxy; "
        "with no daemon, that no session starts; `model_proxy` in `--json`), whether model "
        "requests are held (the provider's rate limit, the day's budget: `model: HELD: …`, "
        "`model_held` in `--json`), whether workers run confined (`sandbox:`, loudly `NONE` "
        "when not; `sandbox` in `--json`), where confined sessions may connect besides the "
        "model and what the egress proxy refused lately, by session and destination, with how "
        "often (`egress:`, when `sandbox_egress` is set or something was refused; `egress` in "
        "`--json`: `allowed`, `refused`), the fleet's hosts when there is more than one "
        "(`hosts:` each one's state, sessions of its capacity and the leader; `hosts` in "
        "`--json`, always), workers (with the agent CLI each runs on, the host on a fleet of "
        "more than one, and the tokens of each one's issue), WIP, whether dispatch is paused "
        "(and why), the judgment queue, Done workspaces kept (and why), last actions; "
        "`unknown` where tmux does not answer, `not started` for a controller that never ran, "
        "`none (manual mode)` in manual mode."
    ),
    "reconcile": (
        "One pass of the reconciler: every mechanical action, idempotently; with no daemon "
        "running, its worker starts are deferred (`no daemon runs to host the worker`). A "
        "lock keeps two passes apart. A pass you run by hand tries again every step the "
        "daemon is backing off from."
    ),
    "log": "The append-only action log (`No actions logged yet.` when it is empty).",
    "usage": (
        "The tokens the model reported for each response that passed through the daemon's "
        "model proxy, by issue, phase and model (the controller's as `-`), with the total, "
        "and what they cost where `[prices]` names the model (`cost` in `--json`, null "
        "without a price). A response whose usage could not be read is counted as unread, "
        "never as zero (`unread_responses` in `--json`)."
    ),
    "hosts": (
        "Each host's state (`up`, `draining`, `stopped` when its daemon stopped, `lost` after "
        "`host_timeout` without a heartbeat), heartbeat age, live sessions of its capacity, "
        "and which one leads (`*`, with the lease's epoch); see [the fleet](fleet.md)."
    ),
    "host drain": "`--undo` takes it back (so does its daemon's next start).",
    "feedback": (
        "Comment + `user-feedback-given`; refused unless the issue is labelled "
        "`user-input-needed`. It is also how a spent `token_budget` or `idle_spend_limit` is "
        'raised (`"go on"`).'
    ),
    "skills install": (
        "Puts the skills where your own Claude Code (or, with `--runtime codex`, Codex: "
        "`$CODEX_HOME/skills`) finds them, for your own use: Legion's sessions have them in "
        "their own homes."
    ),
    "dispatch": (
        "One live worker per issue. An issue blocked by one that is not Done is refused with "
        "one line naming the blockers unless `--force`. Like `legion resume`, refused to a "
        "worker's own session: only `@legion` and the human start sessions, a worker asks "
        "`@legion`. Refused in one line, nothing made, while no daemon runs for the project: "
        "a session starts only under one (`legion start`, or `legion start --mode manual` to "
        "start workers only by hand). If a first-run dialog shows anyway, it answers it from "
        "the pane, and waits until the session has recorded its first prompt."
    ),
    "resume": (
        "Types into the session if it runs, else restarts it with `--resume` (same session "
        "id). Refused while no daemon runs, as `dispatch` is."
    ),
    "escalate": (
        "Posts the question (and why it needs one) and adds `user-input-needed`; an issue "
        "already waiting is left as it is. Credited to whoever ran it: a blocked worker's own "
        'question to that worker, else the controller ("Legion\'s Oracle") from its session, '
        "a worker from its own, and a person by name (`LEGION_AUTHOR`, else the login name)."
    ),
    "workers": (
        "Every worker: running, idle, blocked (with its question) or dead; in a fleet the host "
        "whose daemon runs it (`Host`; `host` in `--json`; another host's worker in the state "
        "that host last reported, and dead once that host is lost); the agent CLI it runs on "
        "(`claude-code`, `codex`); when it last did something; and its Claude Code task "
        "list's progress, read from the session's own Claude Code home (`Tasks` `2/5`; in "
        "`--json`, `tasks`: done, total and what is in progress, or null: a session gets task "
        "tools only for some models unless `CLAUDE_CODE_ENABLE_TODO_TOOLS=1` is in its "
        "environment)."
    ),
    "workspace clean": (
        "Removes the workspaces of Done issues that hold no unsaved or unmerged work and no "
        "ignored file that exists nowhere else (`--rescue`: moves such ignored files to "
        "`<state_dir>/rescued/<time>/<issue>/` first, and says where)."
    ),
    "say": (
        "`@agent`, `@branch/agent`, `@project/branch/agent`, `@legion` (the controller) and "
        "`@human` are resolved, and an unknown or ambiguous one is refused; a worker posts "
        "only in its own project's channels, to its own project's agents, and reads only its "
        "own project's channels (the controller and you reach any project); the same `--id` "
        "twice posts once. Each addressee is woken (see [the event bus](concepts.md#the-event-"
        "bus)); with no daemon for its project, `say` delivers itself and says so (`delivered "
        "to @x`, `@x is busy: … at the end of its turn`, `@x is not running: the message "
        "waits for legion start`; `--json`: `delivery`)."
    ),
    "ask": (
        "The agent is *blocked* until the answer comes back as its next prompt, in the same "
        "session; `@legion` answers, or passes the question on to the human with `--about` "
        "(the human's answer then goes straight back to the asker)."
    ),
    "reply": "The reply to a question is its answer, to every asker down the chain of hand-overs.",
    "complete": (
        "A worker's issue gets the completion protocol's labels (`worker-done`, "
        "`-worker-active`), the summary is posted, the agent is *complete*."
    ),
    "kill": (
        "A *busy* agent needs `-f` (SIGKILL at once). The tracker still decides what runs "
        "next: the reconciler may start the issue's worker again."
    ),
    "attach": (
        "Opens the agent's tmux window, on Legion's tmux server (private socket included), "
        "read-write. Inside a tmux client of the same server it switches that client to the "
        "window; inside another tmux it nests."
    ),
    "archive": "It is back as soon as it is started or prompted again.",
    "messages": (
        "`--follow` streams new messages until Ctrl-C. A `--channel` (here, or with `say` and "
        "`task`) whose project the bus does not know is refused."
    ),
    "agents": "Statuses are read from the sessions where no daemon keeps them.",
    "events": (
        "Every agent on this machine: sessions started (`agent_registered`), blocked, "
        "completed, failed, archived, compactions (`--kind message` adds one per message "
        "posted, which `legion messages` shows); `--json` is a list, or with `--follow` one "
        "object per line."
    ),
    "task": "A task is pending, assigned or done (derived, never stored).",
    "tui": (
        "The control centre (Textual): every project's `project/branch` channels with their "
        "agents (`*` busy, `?` blocked, "
        "`o` complete, `x` failed, `-` idle; archived ones folded away) and unread counts, the "
        "selected channel's live messages, a chat line with `@agent` completion, the inbox of "
        "questions waiting for you (answered in place, back into the asking session), the "
        "project's board by phase, an agent's screen, task list and transcript tail, the "
        "action log with its agents' events; `o` attaches the highlighted agent's live "
        "session as `legion attach` does, `a` archives, `k`/`K` kills (each asks y/n first), "
        "`?` or F1 lists every key. Keyboard first, mouse works, `NO_COLOR` honoured, usable "
        "at 80x24. See [the TUI](tui.md)."
    ),
    "config": "A setting with no value shows as `# name: unset (what that means)`.",
    "trust": (
        "Prints the settings it widens, then records the file's SHA-256 in your state folder; "
        "see [configuration](configuration.md#a-repositorys-config-cannot-widen-what-runs)."
    ),
    "demo": (
        "See the [README's Quickstart](../README.md#quickstart). The first run installs the "
        "pinned Claude Code into `~/.cache/legion/claude-code` with npm. It stops at once, "
        "with the cause and the fix, if a worker cannot start (the worker's last screen is "
        "saved in the demo folder, since `legion peek` goes with the demo's tmux server). "
        "`--runtime codex` runs every session on Codex "
        "(installed the same way into `~/.cache/legion/codex`); offline, each CLI talks to "
        "its own scripted server; with `--real`, Codex uses OpenAI's API with your "
        "`OPENAI_API_KEY`, in a private `CODEX_HOME` (that path has not been run against the "
        "real service). `--runtime gemini` runs every session on Google's Gemini CLI "
        "(`~/.cache/legion/gemini`), offline against a scripted Gemini-API server; with "
        "`--real`, with your `GEMINI_API_KEY` (not run against the real service either)."
    ),
    "doctor": (
        "Checks git, tmux, Claude Code, npm, bubblewrap (a warning when missing: sessions "
        'would run unconfined; required with `sandbox = "bwrap"`), and the Codex CLI '
        "(required only when a role runs on it), its `config.toml` (model, provider, where its "
        "key comes from, never the key), the Gemini CLI and its `GEMINI_API_KEY` (likewise), "
        "and whether Claude Code's sessions have a credential "
        "(a key the daemon holds, else your login); in a project, its store (`store`: the "
        "SQLite file, or the PostgreSQL server by host, port and database, never its user or "
        "password, reachable and migrated, with this machine's clock against the server's: a "
        "warning past 2 s) and its backends (the credential and where it came from, never its "
        "value, that it is accepted, the team or repository, statuses and labels, and what "
        "Legion will pick up)."
    ),
}

# Exit codes particular to a command, after "0 done; the usual ones otherwise".
COMMAND_EXITS: dict[str, str] = {
    "init": "; 2 for options that differ from the project's, or a repository with no commit",
    "issue block": "; 2 for a blocker that does not exist, the issue itself or a cycle",
    "usage": "; 2 for a `--since` that is not an ISO date or time, or an unknown issue",
    "host drain": "; 2 for an unknown host",
    "dispatch": "; 2 for a blocked issue without `--force`; 1 while no daemon runs",
    "resume": "; 1 while no daemon runs",
    "complete": "; 1 (`ignored: …`) from a session Legion has since replaced",
    "attach": "; 2 for an unknown agent; 1 for one with no live window",
    "messages": "; 2 for a `--channel` whose project the bus does not know",
    "trust": "; 1 for a broken file (nothing is recorded)",
    "demo": "; 130 when interrupted, 143 when stopped by SIGTERM",
    "feedback": "; 1 for an issue that asked nothing",
    "pr merge": "; 1 for a draft or a conflict",
    "pr checks": (
        "; 2 for a PR or a check that does not exist, or a check with no log to read (a "
        "commit status, a job GitHub keeps no log of)"
    ),
    "start": "; 1 for a second daemon, or when no session could reach a model",
}
