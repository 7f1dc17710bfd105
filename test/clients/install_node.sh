#!/usr/bin/env bash
# Installs the locked npm dependencies of the jobbuf Node client's tests (clients/node: pg, Knex,
# Drizzle, Sequelize, TypeORM, TypeScript, as package-lock.json pins them) with `npm ci`, only
# when node_modules is missing or came from another lockfile; and those of the real consumers
# (test/consumers/install.sh: BullMQ, ioredis).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash test/consumers/install.sh
cd clients/node
stamp=node_modules/.jobbuf-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -d node_modules ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "jobbuf: installing the Node client's locked test dependencies (npm ci in clients/node)"
npm ci --no-audit --no-fund --loglevel=error >/dev/null
echo "$want" >"$stamp"
