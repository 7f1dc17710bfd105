#!/usr/bin/env bash
# Settings a database owner plants for every session of its database (ALTER DATABASE ... SET)
# reach the drain worker's superuser session when it connects. The worker drops them all, back to
# the server's built-in defaults, before it runs anything: session_authorization (which would
# make it act as the owner: every batch refused), exit_on_error (every caught error would end the
# worker: a restart loop), synchronous_commit = off (a batch's delete could be lost in a crash
# after the next unit overwrote the marker: a duplicate), planner switches (full scans), and the
# timeouts. The owner's settings keep applying to everyone else. The worker keeps only the
# jobbuf.redis_* settings of its database, which only a superuser can set there: the owner can
# neither point the worker at another Redis nor change another setting the worker uses, and no
# one can put a Redis password where every role can read it (pg_db_role_setting).
source "$(dirname "$0")/tools/lib.sh"

faults_start "" "jobbuf.poll_interval = '200ms'"
jb_psql -q -o /dev/null <<'SQL'
CREATE ROLE hostile_owner LOGIN;
ALTER DATABASE jobbuf_test OWNER TO hostile_owner;
SELECT jobbuf_create_queue('settings', 'list');
SELECT jobbuf_create_queue('grouped', 'list', '{"delivery": "group"}');
SQL
planted="session_authorization = hostile_owner|exit_on_error = on|synchronous_commit = off|enable_indexscan = off|enable_indexonlyscan = off|enable_nestloop = off|statement_timeout = 1|lock_timeout = 1|work_mem = 64"
IFS='|' read -ra settings <<<"$planted"
for s in "${settings[@]}"; do
  out=$(psql -X -h "$JB_PGHOST" -p "$JB_PGPORT" -U hostile_owner -d "$JB_DB" -qtAX \
          -c "ALTER DATABASE jobbuf_test SET ${s%% = *} = '${s#* = }'" 2>&1) ||
    fail "the owner could not plant $s: $out"
done
# The test's own sessions override what the owner planted (a 1 ms statement_timeout would
# otherwise cancel them on a slow machine).
export PGOPTIONS="-c session_authorization=postgres -c exit_on_error=off -c statement_timeout=0 -c lock_timeout=0"
expect_eq "the owner planted its settings for the database" \
  "$(jb_sql "SELECT cardinality(setconfig) FROM pg_db_role_setting WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = 'jobbuf_test')")" \
  "${#settings[@]}"
expect_eq "the settings reach a new session of the database" \
  "$(PGOPTIONS= psql -X -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres -d "$JB_DB" -qtAX -c "SHOW synchronous_commit")" off

# A worker that connects now gets them.
mark=$(log_mark)
old=$(worker_pid)
jb_sql "SELECT pg_terminate_backend($old)" >/dev/null
check "the drain worker comes back" jb_wait_until "[ -n \"\$(worker_pid)\" ] && [ \"\$(worker_pid)\" != $old ]" 20
new=$(worker_pid)

jb_sql "SELECT count(jobbuf_stage('settings', jsonb_build_object('n', n))) FROM generate_series(1, 500) n" >/dev/null
check "jobs are delivered by the worker that connected with the owner's settings" \
  jb_wait_until '[ "$(jb_redis LLEN jobbuf:settings)" = 500 ]' 15
wait_staged 0 "WHERE queue = 'settings'"
expect_eq "each once, and deleted" \
  "$(jb_redis LRANGE jobbuf:settings 0 -1 | sort -u | wc -l) $(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'settings'")" "500 0"
jb_sql "SELECT jobbuf_stage('grouped', '{\"g\": 1}')" >/dev/null
check "group delivery works too" jb_wait_until '[ "$(jb_redis LLEN jobbuf:grouped)" = 1 ]' 15
# A table lock held while a job waits: with the planted lock_timeout and exit_on_error, the worker
# would error and exit; it waits for the lock instead and delivers.
jb_psql -q -o /dev/null -c "BEGIN" -c "LOCK TABLE jobbuf.queue_stats IN ACCESS EXCLUSIVE MODE" \
  -c "SELECT jobbuf_stage('settings', '{\"locked\": true}')" -c "SELECT pg_sleep(1)" -c "COMMIT"
check "a job staged behind a held lock is delivered once the lock goes" \
  jb_wait_until '[ "$(jb_redis LLEN jobbuf:settings)" = 501 ]' 15
expect_eq "the worker kept its process" "$(worker_pid)" "$new"
# (A storage rotation's own lock_timeout, which gives up on the lock held above and tries later,
# logs "gave up waiting for a lock (canceling statement due to lock timeout)": not the owner's.)
offending=$(log_since "$mark" | grep -v "PID $old" | grep -v 'storage rotation of jobbuf\.[a-z_]* gave up waiting for a lock' |
  grep -E 'permission denied|statement timeout|lock timeout|exited with exit code|terminated by signal' || true)
[ -z "$offending" ] || say "offending log lines: $offending"
expect_eq "no permission error, timeout or worker exit in the log" "$(count_lines '.' "$offending")" 0
expect_eq "the owner's settings still apply to other sessions" \
  "$(PGOPTIONS= psql -X -h "$JB_PGHOST" -p "$JB_PGPORT" -U postgres -d "$JB_DB" -qtAX -c "SHOW work_mem")" 64kB

# The owner closes the database to connections: a worker that has to start again waits, with one
# line, instead of failing to connect in a loop; it comes back when the database opens again.
mark=$(log_mark)
old=$(worker_pid)
PGOPTIONS= psql -X -h "$JB_PGHOST" -p "$JB_PGPORT" -U hostile_owner -d postgres -qtAX \
  -c "ALTER DATABASE jobbuf_test ALLOW_CONNECTIONS false" >/dev/null
jb_psql_db postgres -qtAX -c "SELECT pg_terminate_backend($old)" >/dev/null
check "the launcher says the database allows no connections" \
  jb_wait_until "log_since $mark | grep -q 'does not allow connections'" 15
sleep 3   # several launcher checks
expect_eq "one line, and no failed start" \
  "$(count_lines 'does not allow connections' "$(log_since "$mark")") $(count_lines 'exited with exit code [1-9]|is not currently accepting connections' "$(log_since "$mark" | grep -v "PID $old")")" "1 0"
jb_psql_db postgres -qtAX -c "ALTER DATABASE jobbuf_test ALLOW_CONNECTIONS true" >/dev/null
check "the worker starts once the database opens again" jb_wait_until '[ -n "$(worker_pid)" ]' 20
jb_sql "SELECT jobbuf_stage('settings', '{\"reopened\": true}')" >/dev/null
check "and delivers" jb_wait_until '[ "$(jb_redis LLEN jobbuf:settings)" = 502 ]' 15
# The jobbuf settings per database: superuser-only; the owner is refused each of them.
for s in "jobbuf.redis_url = redis://127.0.0.1:1/0" "jobbuf.redis_password_file = /etc/hostname" \
         "jobbuf.redis_timeout = 10" "jobbuf.enabled = off" "jobbuf.batch_size = 1" "jobbuf.poll_interval = 100000"; do
  out=$(PGOPTIONS= psql -X -h "$JB_PGHOST" -p "$JB_PGPORT" -U hostile_owner -d postgres -qtAX \
          -c "ALTER DATABASE jobbuf_test SET ${s%% = *} = '${s#* = }'" 2>&1)
  expect_match "the owner cannot ALTER DATABASE SET ${s%% = *}" "$out" 'permission denied to set parameter|cannot be changed now'
done
# The password as the parser reads it (up to the last '@'): '/', '?' and '#' in it change nothing.
for url in 'redis://:secret@127.0.0.1:1/0' 'redis://:s3cr/et@127.0.0.1:1/0' 'redis://:s3cr?et@127.0.0.1:1/0' \
           'redis://u:s#3cret@127.0.0.1:1/0' 'unix://:s3c/ret@/tmp/redis.sock'; do
  expect_match "a Redis password in a per-database jobbuf.redis_url is refused, superuser or not (${url%%@*}@...)" \
    "$(jb_psql_db postgres -qtAX -c "ALTER DATABASE jobbuf_test SET jobbuf.redis_url = '$url'" 2>&1)" \
    'readable by every role'
done
expect_eq "no jobbuf setting reached pg_db_role_setting" \
  "$(jb_sql "SELECT count(*) FROM pg_db_role_setting, unnest(setconfig) c WHERE c LIKE 'jobbuf.%'")" 0
jb_sql "SELECT pg_reload_conf()" >/dev/null
jb_sql "SELECT jobbuf_stage('settings', '{\"after_refusals\": true}')" >/dev/null
check "the worker still delivers to its Redis" jb_wait_until '[ "$(jb_redis LLEN jobbuf:settings)" = 503 ]' 15
faults_done
