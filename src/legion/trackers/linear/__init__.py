"""The Linear tracker backend (`tracker = "linear"`, `linear_team = "ENG"`): adapter, client,
documents, settings, init options and doctor checks (`legion.plugins` names each).

Nothing is imported here: the settings are read by every command, the adapter only when a
project uses Linear (and httpx later still, at the first request).
"""
