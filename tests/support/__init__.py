"""What the tests share, beside the fixtures in the conftest.py files (which use these):

- `cli`: the real `legion` console script and `git`, run as a user runs them
- `cli_forks`: each `legion` a test runs, forked from a server that imported Legion once
- `waits`: waiting for a condition under a deadline, and for a daemon's ticks (its heartbeat)
- `tmux`: a private tmux server per test, and a `tmux` that misbehaves on cue
- `claude_env`, `codex_env`: the real Claude Code and Codex CLIs wired to the scripted model
  servers (`tests/fakes/`), offline
- `linear_github`: a project on Linear and GitHub (the fake servers)
- `swarm`: a project wired to all of it (the `swarm` fixture's environment), its daemon, and
  the questions end-to-end tests ask of it
- `reader`, `legion_reader`: one long-lived `legion` process per swarm that answers the
  read-only commands tests poll with (`legion workers --json`...), sparing a new interpreter
  and Legion's imports each poll
- `processes`: which processes run a session, sampled while a test runs
- `campaign`: the kill campaign (tests/e2e/test_kill_campaign.py, bench/faults.py)
- `reaper`: every process a test started ends with it
- `hostile`: the hostile-text corpus every surface is tested with
"""
