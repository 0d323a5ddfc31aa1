#!/usr/bin/env bash
# One command for a fresh machine: install, then run the service with embedded defaults
# (PGlite under ./data, port 8080). Configuration comes from the environment (see README).
# It runs the production build (dist/, made by scripts/build.mjs when missing or older than the
# sources), not the TypeScript through tsx; `node --import tsx runtime/main.ts` still runs the sources.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
node scripts/build.mjs --if-stale
exec node dist/runtime/main.js
