"""The Codex runtime (`runtime = "codex"`): the runtime itself (`codex exec` turns, the link from
Legion's session id to Codex's rollout, reading a rollout), a session's window process that
runs its turns, which `codex` runs, its settings and its doctor checks (`legion.plugins` names
each).

Nothing is imported here: a project on Claude Code alone never loads Codex's code.
"""
