#!/usr/bin/env bash
# `make demo`: builds and installs jobbuf, starts a throwaway PostgreSQL (with the jobbuf worker)
# and a throwaway redis-server on free loopback ports, stages jobs in three committed transactions
# and one rolled-back transaction, shows what arrived in Redis, and stops both servers on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }

step "Building and installing the extension"
make -s >/dev/null
if [ -w "$(pg_config --pkglibdir)" ]; then make -s install >/dev/null; else sudo make -s install >/dev/null; fi
echo "installed jobbuf into $(pg_config --sharedir)/extension and $(pg_config --pkglibdir)"

step "Starting a throwaway Redis and a throwaway PostgreSQL with the jobbuf worker"
# shellcheck source=../test/harness/servers.sh
source test/harness/servers.sh    # stops both servers and removes their files on exit
jb_start_redis
jb_start_postgres
trap 'jb_stop_all; echo "PostgreSQL and redis-server stopped, their files removed"' EXIT
echo "redis-server on 127.0.0.1:$JB_REDIS_PORT, PostgreSQL on 127.0.0.1:$JB_PGPORT (database $JB_DB)"
jb_wait_until '[ "$(jb_sql "SELECT running FROM jobbuf_worker_status()")" = t ]' 15 || {
  echo "the jobbuf drain worker did not start; server log:"; tail -n 20 "$JB_RUN/postgres.log"; exit 1; }

run_sql() {  # shows the SQL, then runs it
  sed 's/^/    /' <<<"$1"
  jb_psql -q -o /dev/null -c "$1"
}

step "Creating a queue: Redis list jobbuf:emails"
run_sql "SELECT jobbuf_create_queue('emails', 'list');"

step "Transaction 1 (COMMIT): one job"
run_sql "BEGIN;
INSERT INTO jobbuf.jobs (queue, payload) VALUES ('emails', '{\"to\": \"ada@example.com\", \"template\": \"welcome\"}');
COMMIT;"

step "Transaction 2 (COMMIT): two jobs, staged with jobbuf_stage next to the application's own work"
run_sql "BEGIN;
CREATE TEMP TABLE orders (id int, customer text);
INSERT INTO orders VALUES (1001, 'grace@example.com');
SELECT jobbuf_stage('emails', '{\"to\": \"grace@example.com\", \"template\": \"order_confirmation\", \"order\": 1001}');
SELECT jobbuf_stage('emails', '{\"to\": \"ops@example.com\", \"template\": \"new_order\", \"order\": 1001}');
COMMIT;"

step "Transaction 3 (ROLLBACK): this job must never reach Redis"
run_sql "BEGIN;
SELECT jobbuf_stage('emails', '{\"to\": \"mallory@example.com\", \"template\": \"rolled_back\"}');
ROLLBACK;"

step "Transaction 4 (COMMIT): one job"
run_sql "BEGIN;
SELECT jobbuf_stage('emails', '{\"to\": \"linus@example.com\", \"template\": \"password_reset\"}');
COMMIT;"

jb_wait_until '[ "$(jb_redis LLEN jobbuf:emails)" -ge 4 ] && [ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]' 10 || true
sleep 0.3  # anything that should not be there would have arrived by now

step "What arrived in Redis: LRANGE jobbuf:emails 0 -1"
jb_redis LRANGE jobbuf:emails 0 -1 | nl -w4 -s'  '

step "SELECT queue, target, ready, delivered_total, last_delivery_at FROM jobbuf_stats()"
jb_psql -c "SELECT queue, target, ready, delivered_total, last_delivery_at FROM jobbuf_stats()" | sed '/^$/d' 

step "Checks"
status=0
arrived=$(jb_redis LLEN jobbuf:emails)
left=$(jb_sql "SELECT count(*) FROM jobbuf.jobs")
rolled_back=$(jb_redis LRANGE jobbuf:emails 0 -1 | grep -c mallory || true)
if [ "$arrived" = 4 ]; then echo "ok    the 4 jobs of the 3 committed transactions are in Redis"
else echo "FAIL  $arrived jobs in Redis, expected the 4 committed ones"; status=1; fi
if [ "$rolled_back" = 0 ]; then echo "ok    the job of the rolled-back transaction (mallory@example.com) is not in Redis"
else echo "FAIL  the rolled-back job reached Redis"; status=1; fi
if [ "$left" = 0 ]; then echo "ok    jobbuf.jobs is empty: every committed job was drained"
else echo "FAIL  $left jobs still staged"; status=1; fi

step "Stopping the servers"
exit $status
