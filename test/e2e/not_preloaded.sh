#!/usr/bin/env bash
# Without jobbuf in shared_preload_libraries (the library is then loaded by the first backend
# that calls a jobbuf function), the SQL API works - queues, staging - and jobbuf_worker_status()
# says that no worker runs, instead of failing; CREATE EXTENSION and jobbuf_schedule say so in a
# WARNING.
source "$(dirname "$0")/tools/lib.sh"

jb_start_redis || exit 1
trap e2e_cleanup EXIT
if jb_start_postgres "shared_preload_libraries = ''" >"$JB_RUN/start.out" 2>&1; then
  pass "CREATE EXTENSION jobbuf without preloading"
else
  fail "CREATE EXTENSION jobbuf without preloading: $(head -n 1 "$JB_RUN/start.out")"
  [ -f "$JB_PGDATA/postmaster.pid" ] || e2e_done
  # A second try in a fresh backend; without the extension the remaining checks are moot.
  jb_psql -q -c "CREATE EXTENSION IF NOT EXISTS jobbuf" >/dev/null 2>&1 || e2e_done
fi
status() { jb_sql "SELECT $1 FROM jobbuf_worker_status()" 2>&1; }

expect_eq "the library is not preloaded" "$(jb_sql "SHOW shared_preload_libraries")" ""
expect_eq "worker status: running false, pid NULL" "$(status "running || ' ' || coalesce(pid::text, 'null')")" "false null"
expect_match "worker status: last_error says why" "$(status last_error)" 'not in shared_preload_libraries'
expect_eq "create a queue" "$(jb_sql "SELECT jobbuf_create_queue('np', 'list')" 2>&1)" ""
expect_eq "stage a job" "$(jb_sql "SELECT jobbuf_stage('np', '{\"n\": 1}'::jsonb) IS NOT NULL" 2>&1)" t
expect_eq "plain INSERT" "$(jb_sql "INSERT INTO jobbuf.jobs (queue, payload) VALUES ('np', '{}')" 2>&1)" ""
expect_eq "jobbuf_stats: no worker, no census: 0 ready" "$(jb_sql "SELECT ready FROM jobbuf_stats()" 2>&1)" 0
expect_eq "jobbuf_stats after a census by hand (what the worker runs): 2 ready" \
  "$(jb_psql -qtAX -c "SELECT jobbuf.take_census()" -c "SELECT ready FROM jobbuf_stats()" 2>&1 | tail -n 1)" 2
out=$(jb_psql_db postgres -q -c "CREATE DATABASE np2" 2>&1 && jb_psql_db np2 -q -c "CREATE EXTENSION jobbuf" 2>&1)
expect_match "CREATE EXTENSION warns that the library is not preloaded, naming the line to add" "$out" \
  "WARNING:  jobbuf: the jobbuf library is not in shared_preload_libraries.*HINT:  add jobbuf to shared_preload_libraries in postgresql.conf \(shared_preload_libraries = 'jobbuf'\)"
out=$(jb_psql -qtAX -c "SELECT jobbuf_schedule('np_tick', '@hourly', 'np', '{}') IS NOT NULL" 2>&1)
expect_match "jobbuf_schedule warns that no drain worker fires its ticks" "$out" \
  "WARNING:  jobbuf: no drain worker runs in database \"?$JB_DB\"?: schedule 'np_tick' fires no tick until one does"
expect_eq "the schedule is kept (it fires once a worker runs)" "$(jb_sql "SELECT count(*) FROM jobbuf_schedules()")" 1
expect_eq "no jobbuf process" "$(jb_sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'jobbuf%'")" 0
expect_eq "no backend died loading the library" "$(count_lines 'FATAL' "$(cat "$JB_RUN/postgres.log")")" 0

e2e_done
