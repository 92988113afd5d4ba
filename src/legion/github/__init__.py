"""GitHub, shared by its two integrations: the one client (token, API address, error kinds)
and the repository a project works on. GitHub Issues (`legion.trackers.github_issues`) and
GitHub pull requests (`legion.forges.github`) both use it, and neither imports the other."""
