"""The Gemini runtime (`runtime = "gemini"`): Google's Gemini CLI as headless turns run by a
turn loop in the session's window, resumed by Legion's own session id; which `gemini` runs,
its settings, how the model proxy serves it, and its doctor checks (`legion.plugins` names
each). docs/gemini-cli.md says what the pinned CLI was seen to do.

Nothing is imported here: a project on another runtime never loads Gemini's code.
"""
