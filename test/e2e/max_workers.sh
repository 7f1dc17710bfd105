#!/usr/bin/env bash
# jobbuf.max_workers caps the drain workers: a database with the extension left without one is
# named in one WARNING and in jobbuf_worker_status() (pid NULL, running false, the reason), its
# jobs wait staged; when a worker slot frees up (DROP EXTENSION elsewhere) it gets it and drains.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.database = '*'
jobbuf.max_workers = 1
jobbuf.poll_interval = '30s'"
jb_sql "SELECT jobbuf_create_queue('main', 'list')" >/dev/null
mark=$(log_mark)
jb_psql_db postgres -q -c "CREATE DATABASE capped"
jb_psql_db capped -q -o /dev/null -c "CREATE EXTENSION jobbuf" -c "SELECT jobbuf_create_queue('capped', 'list')" \
  -c "SELECT jobbuf_stage('capped', '{\"n\": 1}')"
check "a WARNING names the database left out" \
  jb_wait_until "log_since $mark | grep -q 'database \"capped\" has the jobbuf extension but gets no drain worker'" 15
# The launcher logs the WARNING, then publishes the left-out list: wait for the list.
jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf_worker_status() WHERE database = '"'capped'"'")" = 1 ]' 10 || true
expect_eq "jobbuf_worker_status() names it: no pid, not running, why" \
  "$(jb_psql_db capped -qtAX -c "SELECT coalesce(pid::text, 'null') || ' ' || running || ' ' || last_error FROM jobbuf_worker_status() WHERE database = 'capped'")" \
  "null false no drain worker: all jobbuf.max_workers (1) are in use"
expect_eq "the same rows from every database" \
  "$(jb_sql "SELECT string_agg(database || '=' || running, ',' ORDER BY database) FROM jobbuf_worker_status()")" \
  "capped=false,$JB_DB=true"
sleep 2   # more launcher rounds: no repeated WARNING, no worker for it
expect_eq "one WARNING only" "$(count_lines 'database "capped" has the jobbuf extension but gets no drain worker' "$(log_since "$mark")")" 1
expect_eq "its job waits staged" "$(jb_psql_db capped -qtAX -c "SELECT count(*) FROM jobbuf.jobs") $(jb_redis LLEN jobbuf:capped)" "1 0"

jb_psql -q -c "DROP EXTENSION jobbuf"
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:capped)" = 1 ]' 10; then
  pass "once a slot frees up (DROP EXTENSION in $JB_DB), the left-out database gets a worker and drains"
else
  fail "the left-out database did not drain within 10 s of the slot freeing up (poll 30 s)"
fi
expect_eq "jobbuf_worker_status(): its worker runs" \
  "$(jb_psql_db capped -qtAX -c "SELECT string_agg(database || '=' || running, ',') FROM jobbuf_worker_status()")" "capped=true"
e2e_done
