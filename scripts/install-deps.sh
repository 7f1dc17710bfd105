#!/usr/bin/env bash
# Installs every system package jobbuf needs to build, test, demo and benchmark on Debian 12.
# Run as root (or with sudo available). Idempotent: installs only what is missing.
#   scripts/install-deps.sh [--system]   --system: no npm packages
set -euo pipefail

packages=(
  build-essential g++ make pkg-config
  postgresql-15 postgresql-server-dev-15 postgresql-contrib
  postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl
  libhiredis-dev redis-server redis-tools
  libssl-dev openssl redis-sentinel
  libgtest-dev
  ruby ruby-sidekiq ruby-pg ruby-redis
  procps iproute2 util-linux
  ruby-activejob ruby-activerecord ruby-globalid ruby-minitest
  python3-celery python3-redis
  python3-psycopg2 python3-psycopg python3-sqlalchemy python3-django python3-venv python3-setuptools python3-pip-whl python3-setuptools-whl
)

# Node.js: the machine image may ship its own node/npm (which conflicts with Debian's npm
# package); install Debian's only when no npm is present at all.
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "jobbuf: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --system: the Debian packages only (make demo installs the one npm consumer it runs itself).
[ "${1:-}" != --system ] || exit 0

# Node consumer used by the end-to-end tests (ioredis, pinned by package-lock.json).
bash "$(dirname "$0")/../test/consumers/install.sh"
# The Node client's test dependencies (pg, Knex, Drizzle, Sequelize, TypeORM: clients/node's lockfile).
bash "$(dirname "$0")/../test/clients/install_node.sh"

# Debian's redis-server package starts a system instance on port 6379; jobbuf's tests never use
# it (they start their own on a free port), so leave it as the administrator configured it.
exit 0
