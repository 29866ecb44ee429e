#!/usr/bin/env bash
# Install headless Chromium (the Debian package) for the report's browser test, when missing.
#
# Always exits 0: tests/test_report_browser.py skips with its own reason when no chromium binary
# is on PATH, so a slow or unreachable apt mirror never breaks CI.
set -u

say() { echo "install-chromium: $*" >&2; }

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" != "0" ]; then
  say "chromium is missing and apt-get is not usable as root; the report's browser test will skip"
  exit 0
fi
say "installing chromium with apt-get (a few minutes on a cold mirror)"
if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq chromium) >/dev/null 2>&1; then
  say "apt-get could not install chromium; the report's browser test will skip"
fi
exit 0
