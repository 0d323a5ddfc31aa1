#!/usr/bin/env bash
# One command for a fresh machine: install, then run the service with embedded defaults
# (PGlite under ./data, port 8080). Configuration comes from the environment (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec node --import tsx runtime/main.ts
