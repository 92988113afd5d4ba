"""The Claude Code runtime (`runtime = "claude-code"`): the runtime itself (command, environment,
first-run preparation), its question screen, the hooks Legion installs and their entry point,
where the CLI keeps its files, reading its transcripts and task lists, which `claude` runs, its
settings and its doctor checks (`legion.plugins` names each).

Nothing is imported here: a project on Codex alone never loads Claude Code's code.
"""
