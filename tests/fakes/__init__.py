"""Test doubles: a scripted Anthropic-compatible model server and an offline Claude Code env."""
