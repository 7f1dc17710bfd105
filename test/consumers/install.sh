#!/usr/bin/env bash
# Installs the locked npm dependencies of jobbuf's real-consumer tests (test/consumers/node:
# ioredis, exactly as package-lock.json pins it) with `npm ci`, only when node_modules is missing
# or was installed from a different lockfile. Idempotent; needs node and npm on PATH (installed by
# scripts/install-deps.sh). The Ruby consumer (Sidekiq) comes from Debian packages.
set -euo pipefail
cd "$(dirname "$0")/node"

stamp=node_modules/.jobbuf-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -d node_modules ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "test/consumers/install.sh: node and npm are required (run scripts/install-deps.sh)" >&2
  exit 1
fi

echo "jobbuf: installing the Node consumer's locked dependencies (npm ci in test/consumers/node)"
npm ci --no-audit --no-fund --loglevel=error >/dev/null
echo "$want" >"$stamp"
