#!/usr/bin/env bash
# One command for a fresh machine: install, type-check, then run every test.
# Tests use embedded PGlite unless DATABASE_URL points at a PostgreSQL server.
set -euo pipefail
cd "$(dirname "$0")/.."
SPEECH_TEST_APT_PACKAGES="pocketsphinx-testdata nginx-light chromium" bash scripts/setup.sh
npx tsc -p .
npx tap "$@"
