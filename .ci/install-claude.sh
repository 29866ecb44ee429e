#!/usr/bin/env bash
# Install the pinned Claude Code CLI into <repo>/.e2e-cache (gitignored) for the e2e tests.
#
# Prints the binary path on stdout. Always exits 0: the e2e suite skips with the reason this
# script prints when the binary cannot be installed, so a missing registry never breaks CI.
set -u

VERSION="${CLAUDE_CODE_VERSION:-2.1.332}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${E2E_CACHE_DIR:-$REPO_ROOT/.e2e-cache}"
BIN="$CACHE/node_modules/@anthropic-ai/claude-code-linux-x64/claude"

say() { echo "install-claude: $*" >&2; }

# The interactive e2e case drives the TUI through tmux; install it when apt is usable.
if ! command -v tmux >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
    say "installing tmux with apt-get"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux) >/dev/null 2>&1 \
      || say "tmux could not be installed; the interactive e2e case will skip"
  else
    say "tmux is missing and apt-get is not usable; the interactive e2e case will skip"
  fi
fi

installed_version() {
  "$BIN" --version 2>/dev/null | awk '{print $1}'
}

if [ -x "$BIN" ] && [ "$(installed_version)" = "$VERSION" ]; then
  echo "$BIN"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  say "npm not found; cannot install @anthropic-ai/claude-code@$VERSION"
  exit 0
fi

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) say "only linux-x64 is wired up here (got $(uname -s)-$(uname -m))"; exit 0 ;;
esac

mkdir -p "$CACHE"
# A private package.json keeps npm from walking up into the repository's own files.
[ -f "$CACHE/package.json" ] || echo '{"name":"e2e-cache","private":true}' >"$CACHE/package.json"

say "installing @anthropic-ai/claude-code@$VERSION into $CACHE"
if ! (cd "$CACHE" && npm install --no-audit --no-fund --loglevel=error \
      "@anthropic-ai/claude-code@$VERSION" >&2); then
  say "npm install failed (offline or registry unreachable)"
  exit 0
fi

if [ -x "$BIN" ] && [ "$(installed_version)" = "$VERSION" ]; then
  echo "$BIN"
else
  say "installed, but $BIN is missing or not version $VERSION"
fi
exit 0
