#!/usr/bin/env bash
# `make demo`: builds and installs jobbuf, starts a throwaway PostgreSQL (with the jobbuf worker)
# and a throwaway redis-server on free loopback ports, and stages one job per target in one
# committed transaction (plus one in a rolled-back transaction): each job runs in its real
# consumer (Sidekiq, a BullMQ Worker, a Celery worker, a list and a stream reader). Then it
# measures the commit → Redis latency and shows the worker's jobbuf_worker_status() row.
# KEEP=1 leaves PostgreSQL and Redis running and prints how to connect and how to stop them;
# otherwise both are stopped and their files removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }

step "Building and installing the extension"
make -s >/dev/null
if [ -w "$(pg_config --pkglibdir)" ]; then make -s install >/dev/null; else sudo make -s install >/dev/null; fi
echo "installed jobbuf into $(pg_config --sharedir)/extension and $(pg_config --pkglibdir)"
bash test/consumers/install.sh     # the BullMQ Worker's locked npm packages, only when missing

step "Starting a throwaway Redis and a throwaway PostgreSQL with the jobbuf worker"
# shellcheck source=../test/harness/servers.sh
source test/harness/servers.sh
# shellcheck source=../test/consumers/sidekiq/sidekiq.sh
source test/consumers/sidekiq/sidekiq.sh
# shellcheck source=../test/consumers/celery/celery.sh
source test/consumers/celery/celery.sh
BULLMQ_PID=
stop_consumers() {
  jb_stop_sidekiq
  jb_stop_celery >/dev/null 2>&1 || true
  [ -z "$BULLMQ_PID" ] || jb_stop_pids "$BULLMQ_PID"
}
[ -z "${KEEP:-}" ] || export JB_KEEP=1
jb_start_redis
jb_start_postgres "jobbuf.database = '*'"   # as a server configured by the README
if [ -n "${KEEP:-}" ]; then
  trap 'stop_consumers' EXIT
else
  trap 'stop_consumers; jb_stop_all; echo "PostgreSQL and redis-server stopped, their files removed"' EXIT
fi
echo "redis-server on 127.0.0.1:$JB_REDIS_PORT, PostgreSQL on 127.0.0.1:$JB_PGPORT (database $JB_DB)"
jb_wait_until '[ "$(jb_sql "SELECT running FROM jobbuf_worker_status()")" = t ]' 15 || {
  echo "the jobbuf drain worker did not start; server log:"; tail -n 20 "$JB_RUN/postgres.log"; exit 1; }

run_sql() {  # shows the SQL, then runs it
  sed 's/^/    /' <<<"$1"
  jb_psql -q -o /dev/null -c "$1"
}

step "One queue per target"
run_sql "SELECT jobbuf_create_queue('default', 'sidekiq');   -- Sidekiq queue \"default\"
SELECT jobbuf_create_queue('mail', 'bullmq');       -- BullMQ queue \"mail\"
SELECT jobbuf_create_queue('tasks', 'celery');      -- Celery queue \"celery\"
SELECT jobbuf_create_queue('emails', 'list');       -- Redis list jobbuf:emails
SELECT jobbuf_create_queue('events', 'stream');     -- Redis stream jobbuf:events"

step "Starting the consumers: Sidekiq, a BullMQ Worker, a Celery worker"
jb_start_sidekiq "$JB_RUN/sidekiq.jsonl" default
node test/consumers/node/bullmq_worker.js --url "redis://127.0.0.1:$JB_REDIS_PORT/0" --queue mail \
  --out "$JB_RUN/bullmq.jsonl" >"$JB_RUN/bullmq.log" 2>&1 &
BULLMQ_PID=$!
jb_start_celery "$JB_RUN/celery.jsonl" celery
jb_wait_sidekiq_ready 30 || { echo "Sidekiq did not start:"; tail -n 20 "$JB_SIDEKIQ_LOG"; exit 1; }
jb_wait_celery_ready 30 || { echo "Celery did not start:"; tail -n 20 "$JB_CELERY_LOG"; exit 1; }
jb_wait_until "grep -q ready '$JB_RUN/bullmq.log'" 30 || { echo "BullMQ did not start:"; cat "$JB_RUN/bullmq.log"; exit 1; }
echo "Sidekiq $(ruby -rsidekiq -e 'print Sidekiq::VERSION'), BullMQ $(node -p 'require("./test/consumers/node/node_modules/bullmq/package.json").version'), Celery $(/usr/bin/python3 -c 'import celery; print(celery.__version__)'): running"

step "One transaction (COMMIT): an order and one job per target"
run_sql "BEGIN;
CREATE TEMP TABLE orders (id int, customer text);
INSERT INTO orders VALUES (1001, 'grace@example.com');
SELECT jobbuf_stage('default', '{\"class\": \"HardJob\", \"args\": [1001]}');
SELECT jobbuf_stage('mail', '{\"name\": \"welcome\", \"data\": {\"order\": 1001}}');
SELECT jobbuf_stage('tasks', '{\"task\": \"jobbuf_e2e.record\", \"args\": [1001]}');
SELECT jobbuf_stage('emails', '{\"to\": \"grace@example.com\", \"order\": 1001}');
SELECT jobbuf_stage('events', '{\"type\": \"order_placed\", \"order\": 1001}');
COMMIT;"

step "Another transaction (ROLLBACK): its job must never reach Redis"
run_sql "BEGIN;
SELECT jobbuf_stage('emails', '{\"to\": \"mallory@example.com\", \"order\": 666}');
ROLLBACK;"

step "What each consumer got"
status=0
# What each consumer recorded of the job it ran (its first line), or nothing yet.
sidekiq_got() { [ -s "$JB_RUN/sidekiq.jsonl" ] && ruby -rjson -e 'j = JSON.parse(ARGF.readline)
  puts "HardJob.perform(#{j["args"].join(", ")}), jid #{j["jid"]}"' "$JB_RUN/sidekiq.jsonl"; }
bullmq_got() { [ -s "$JB_RUN/bullmq.jsonl" ] && node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8").split("\n")[0]);
  console.log(`Worker ran "${j.name}" with ${JSON.stringify(j.data)}, job id ${j.id}`)' "$JB_RUN/bullmq.jsonl"; }
celery_got() { [ -s "$JB_RUN/celery.jsonl" ] && /usr/bin/python3 -c 'import json, sys
j = json.loads(open(sys.argv[1]).readline()); print("task", j["task"], j["args"], "task id", j["task_id"])' "$JB_RUN/celery.jsonl"; }
list_got() { jb_redis LINDEX jobbuf:emails 0; }
stream_got() { jb_redis XRANGE jobbuf:events - + | tr '\n' ' '; }
got() {  # got WHAT FUNCTION: waits up to 30 s for FUNCTION to print something, shows it
  local out=""
  jb_wait_until "[ -n \"\$($2 2>/dev/null)\" ]" 30 && out=$($2)
  if [ -n "$out" ]; then printf '%-8s %s\n' "$1" "$out"
  else printf '%-8s FAIL: nothing arrived within 30 s\n' "$1"; status=1; fi
}
got Sidekiq sidekiq_got
got BullMQ bullmq_got
got Celery celery_got
got list list_got
got stream stream_got
sleep 0.3   # anything that should not be there would have arrived by now
if [ "$(jb_redis LRANGE jobbuf:emails 0 -1 | grep -c mallory)" = 0 ]; then echo "ok       the rolled-back job (mallory@example.com) is not in Redis"
else echo "FAIL     the rolled-back job reached Redis"; status=1; fi
left=$(jb_sql "SELECT count(*) FROM jobbuf.jobs")
if [ "$left" = 0 ]; then echo "ok       jobbuf.jobs is empty: every committed job was delivered"
else echo "FAIL     $left jobs still staged"; status=1; fi
stop_consumers

step "Commit → Redis latency: 200 transactions of one job each, a client waiting in BLPOP"
run_sql "SELECT jobbuf_create_queue('latency', 'list');"
PGHOST=$JB_PGHOST PGPORT=$JB_PGPORT PGUSER=postgres PGDATABASE=$JB_DB REDIS_PORT=$JB_REDIS_PORT \
  /usr/bin/python3 - <<'PY'
import os, time
import psycopg2, redis
pg = psycopg2.connect("")
r = redis.Redis(port=int(os.environ["REDIS_PORT"]))
cur = pg.cursor()
samples = []
for i in range(200):
    cur.execute("SELECT jobbuf_stage('latency', %s::jsonb)", ('{"n": %d}' % i,))
    t0 = time.perf_counter()
    pg.commit()
    r.blpop("jobbuf:latency")
    samples.append((time.perf_counter() - t0) * 1000)
samples.sort()
print("from sending COMMIT to the job returned by BLPOP (includes the commit and one Redis round trip):")
print("  p50 %.2f ms, p99 %.2f ms, max %.2f ms" % (samples[99], samples[197], samples[-1]))
PY

step "SELECT * FROM jobbuf_worker_status()"
jb_psql -c "SELECT * FROM jobbuf_worker_status()" -x | sed '/^$/d'

if [ -n "${KEEP:-}" ]; then
  step "The servers keep running (KEEP=1)"
  stop_pg="$JB_PGBIN/pg_ctl -D $JB_PGDATA stop -m fast"
  [ "$(id -u)" -ne 0 ] || stop_pg="runuser -u postgres -- $stop_pg"
  cat <<EOF
connect:  psql -h 127.0.0.1 -p $JB_PGPORT -U postgres $JB_DB
          redis-cli -p $JB_REDIS_PORT
stop:     $stop_pg; kill $JB_REDIS_PID; rm -rf $JB_RUN
EOF
else
  step "Stopping the servers"
fi
exit $status
