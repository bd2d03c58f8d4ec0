#!/usr/bin/env bash
# System packages the test suite starts for real (Debian): tmux drives the CLI as a person
# types it; headless chromium loads the web example's page; PostgreSQL backs the durable
# runs' multi-worker tests. Idempotent: installs only what is missing; needs root (or sudo) to install.
set -euo pipefail
need=()
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# PostgreSQL for the durable-execution tests (a throwaway cluster each test run starts)
command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "install-system-deps: need root to install ${need[*]}; the tests that use them will skip" >&2
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
