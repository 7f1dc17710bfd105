#!/usr/bin/env bash
# DROP DATABASE of jobbuf.database, WITH (FORCE) and plain: the drop succeeds, the launcher notes
# the missing database once instead of restarting the worker in a loop, and after CREATE
# DATABASE + CREATE EXTENSION the worker drains again.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '200ms'"
jb_sql "SELECT jobbuf_create_queue('q', 'list')" >/dev/null
jb_sql "SELECT jobbuf_stage('q', '{\"n\": 1}'::jsonb)" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN jobbuf:q)" = 1 ]' 5
expect_eq "delivering before the drop" "$(jb_redis LLEN jobbuf:q)" 1

in_postgres() { jb_psql_db postgres -qtAX -c "$1" 2>&1; }
workers() { in_postgres "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'jobbuf drain worker'"; }

mark=$(log_mark)
t0=$(now_ms)
out=$(in_postgres "DROP DATABASE $JB_DB WITH (FORCE)")
check "DROP DATABASE ... WITH (FORCE) succeeds ($(( $(now_ms) - t0 )) ms) ${out}" [ -z "$out" ]
say "watching the log for 13 s (the launcher keeps the worker away for 10 s after a drop)"
sleep 13
log=$(log_since "$mark")
missing=$(count_lines 'jobbuf: database "'"$JB_DB"'" .*does not exist' "$log")
expect_le "'database does not exist' lines in 13 s" "$missing" 1
expect_eq "no drain worker started meanwhile (no restart loop)" "$(count_lines 'drain worker started|starting the drain worker' "$log")" 0
expect_le "drain worker exits" "$(count_lines 'jobbuf drain worker.*exited with exit code' "$log")" 1
expect_eq "no crash" "$(count_lines 'terminated by signal|PANIC' "$log")" 0
expect_eq "no drain worker process" "$(workers)" 0
say "jobbuf lines logged meanwhile:"
grep -E 'jobbuf' <<<"$log" | sed 's/^[^]]*] /    /' | head -n 8

t0=$(now_ms)
in_postgres "CREATE DATABASE $JB_DB" >/dev/null
jb_psql -q -o /dev/null <<'SQL'
CREATE EXTENSION jobbuf;
SELECT jobbuf_create_queue('q', 'list');
SELECT jobbuf_stage('q', '{"n": 2}'::jsonb);
SQL
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:q)" = 2 ]' 10; then
  pass "after CREATE DATABASE + CREATE EXTENSION the worker drains again ($(( $(now_ms) - t0 )) ms)"
else
  fail "after CREATE DATABASE + CREATE EXTENSION: nothing delivered within 10 s"
fi
expect_eq "the new job arrived" "$(jb_redis LINDEX jobbuf:q -1)" '{"n": 2}'
expect_eq "jobbuf_worker_status: running, connected" \
  "$(jb_sql "SELECT running || ' ' || redis_connected FROM jobbuf_worker_status()")" "true true"

# A plain DROP DATABASE (no FORCE) is not blocked by the worker's connection either.
t0=$(now_ms)
out=$(timeout 20 bash -c "$(declare -f jb_psql_db); JB_PGHOST='$JB_PGHOST' JB_PGPORT='$JB_PGPORT'; jb_psql_db postgres -qtAX -c 'DROP DATABASE $JB_DB'" 2>&1)
rc=$?
check "plain DROP DATABASE succeeds while the worker was connected ($(( $(now_ms) - t0 )) ms) ${out}" [ "$rc" -eq 0 ]
expect_eq "database gone" "$(in_postgres "SELECT count(*) FROM pg_database WHERE datname = '$JB_DB'")" 0
expect_eq "no crash" "$(count_lines 'terminated by signal|PANIC' "$(cat "$JB_RUN/postgres.log")")" 0

e2e_done
