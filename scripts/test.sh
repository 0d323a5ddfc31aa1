#!/usr/bin/env bash
# One command for a fresh machine: install, type-check, then run every test.
# Tests use embedded PGlite unless DATABASE_URL points at a PostgreSQL server.
set -euo pipefail
cd "$(dirname "$0")/.."
SPEECH_TEST_APT_PACKAGES="pocketsphinx-testdata nginx-light chromium" bash scripts/setup.sh
npx tsc -p .
# At least two test files at a time: tap's default leaves one CPU free, which on a 2-core machine
# ran the files one by one (21 min of wall time, 15 of them the tests' own; 17 min with two).
jobs=""
if [ "$(nproc)" -le 3 ]; then jobs="--jobs=2"; fi
# shellcheck disable=SC2086 # empty or one word
npx tap $jobs "$@"
