#!/usr/bin/env bash
# Install the pinned Claude Code CLI into a private npm prefix and print the path of `claude`.
#
#   scripts/install-claude.sh            # installs into <repo>/.cache/claude-code
#   LEGION_CLAUDE_CACHE=/some/dir scripts/install-claude.sh
#
# Idempotent: when the pinned version is already installed and runs, nothing is fetched.
# The version lives in scripts/claude-code-version (read by tests/fakes/claude_env.py too).
#
# The npm package ships the native binary inside a per-platform optional dependency
# (@anthropic-ai/claude-code-linux-x64 etc.), which npm fetches from the registry like any
# other package; its postinstall (install.cjs) only hard-links/copies that binary over the
# bin/claude.exe placeholder. Nothing is downloaded from outside the npm registry. If the
# postinstall did not run (--ignore-scripts, a policy that blocks scripts) this script runs
# install.cjs itself; Node >= 18 is enough for that although the package declares >= 22.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
version="$(tr -d '[:space:]' < "$here/claude-code-version")"
prefix="${LEGION_CLAUDE_CACHE:-$repo/.cache/claude-code}"
pkg_dir="$prefix/node_modules/@anthropic-ai/claude-code"
claude="$prefix/node_modules/.bin/claude"

log() { printf 'install-claude: %s\n' "$*" >&2; }

installed_version() {
    [[ -x "$claude" ]] || return 1
    # `claude --version` prints e.g. "2.1.328 (Claude Code)"; it makes no network request.
    "$claude" --version 2>/dev/null | awk 'NR==1 {print $1}'
}

if [[ "$(installed_version || true)" == "$version" ]]; then
    printf '%s\n' "$claude"
    exit 0
fi

command -v npm >/dev/null || { log "npm is required (apt-get install npm)"; exit 1; }
mkdir -p "$prefix"
log "installing @anthropic-ai/claude-code@$version into $prefix"
# The package declares engines.node >= 22; the native binary does not use the local node,
# so an older node only yields an EBADENGINE warning.
npm install --no-audit --no-fund --no-update-notifier --save-exact --loglevel=error \
    --prefix "$prefix" "@anthropic-ai/claude-code@$version" >&2

if [[ "$(installed_version || true)" != "$version" ]]; then
    # bin/claude.exe is still the shell placeholder: run the postinstall by hand.
    log "postinstall did not place the native binary; running install.cjs"
    (cd "$pkg_dir" && node install.cjs >&2)
fi

got="$(installed_version || true)"
if [[ "$got" != "$version" ]]; then
    log "expected Claude Code $version at $claude, got '${got:-nothing}'"
    exit 1
fi
printf '%s\n' "$claude"
