"""The GitHub Issues tracker backend (`tracker = "github"`, `github_repo = "OWNER/NAME"`, and
optionally `github_project = N` for a Projects (v2) board whose Status field is the status).

Nothing is imported here: `legion.plugins` names the adapter and the doctor checks, imported
only when a project uses GitHub Issues (and httpx later still, at the first request).
"""
