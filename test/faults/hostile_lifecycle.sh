#!/usr/bin/env bash
# The extension and its database pulled from under a draining worker:
#   A. DROP EXTENSION jobbuf while the worker drains 50,000 jobs: completes promptly, the worker
#      survives (same pid, no crash loop), at most one line about the missing extension, and
#      nothing it had delivered is in Redis twice;
#   B. CREATE EXTENSION again: delivery resumes with the same worker;
#   C. ALTER EXTENSION jobbuf UPDATE (a no-op at 1.0) breaks nothing;
#   D. ids reused after DROP + CREATE EXTENSION: jobs staged in the new installation whose ids
#      equal those of the old installation's last batch (which the Redis marker still names) must
#      still be delivered after a restart — the marker of another installation is not theirs;
#   E. DROP DATABASE of jobbuf.database (plain, no FORCE): succeeds, no crash loop of the jobbuf
#      workers, at most one line about the missing database;
#   F. CREATE DATABASE + CREATE EXTENSION again: a worker comes back and delivers.
source "$(dirname "$0")/tools/lib.sh"

faults_start "" "jobbuf.poll_interval = '200ms'"
KEY=jobbuf:lc
jb_sql "SELECT jobbuf_create_queue('lc', 'list', '{\"batch_size\": 500}')" >/dev/null
pid=$(worker_pid)
launcher=$(children_named "jobbuf launcher" | head -n 1)
say "drain worker pid $pid, launcher pid $launcher"

arrived_dupes() { jb_redis LRANGE "$KEY" 0 -1 | ruby -rjson -ne 'puts JSON.parse($_)["n"] unless $_.strip.empty?' | sort | uniq -d | wc -l; }
worker_exits() { count_lines 'jobbuf (drain worker|launcher).*exited with exit code' "$(log_since "$1")"; }

# --- A. DROP EXTENSION while draining
mark=$(log_mark)
jb_sql "SELECT count(jobbuf_stage('lc', jsonb_build_object('n', g))) FROM generate_series(1, 50000) g" >/dev/null
sleep 0.2
before_drop=$(jb_redis LLEN "$KEY")
t0=$(now_ms)
drop_out=$(PGOPTIONS="-c statement_timeout=20s" jb_psql -qtAX -c "DROP EXTENSION jobbuf" 2>&1)
drop_rc=$?
drop_ms=$(( $(now_ms) - t0 ))
if [ $drop_rc -eq 0 ]; then
  pass "DROP EXTENSION while draining succeeded in $drop_ms ms ($before_drop of 50000 delivered when it began)"
else
  fail "DROP EXTENSION while draining failed after $drop_ms ms: $(tr '\n' ' ' <<<"$drop_out")"
  for _ in 1 2 3 4 5; do
    PGOPTIONS="-c statement_timeout=20s" jb_psql -qtAX -c "DROP EXTENSION jobbuf" >/dev/null 2>&1 && break
    sleep 1
  done
fi
sleep 3
a_log=$(log_since "$mark")
expect_eq "A: the extension is gone" "$(jb_sql "SELECT count(*) FROM pg_extension WHERE extname = 'jobbuf'")" 0
expect_eq "A: the drain worker survived (same pid)" "$(children_named 'jobbuf drain worker' | head -n 1)" "$pid"
# One WARNING says the extension is missing; if the drop lands inside a worker transaction, the
# error it causes there ("relation jobbuf.queues does not exist") may add one more.
expect_le "A: at most one warning that the extension is not installed" "$(count_lines 'WARNING: +jobbuf:.*not installed' "$a_log")" 1
expect_le "A: at most two jobbuf WARNINGs for the drop" "$(count_lines 'WARNING: +jobbuf:' "$a_log")" 2
expect_eq "A: no jobbuf worker exited" "$(worker_exits "$mark")" 0
expect_eq "A: nothing delivered twice" "$(arrived_dupes)" 0
say "A: $(jb_redis LLEN "$KEY") of the 50000 jobs reached Redis before the drop; jobbuf log lines: $(grep -E 'jobbuf' <<<"$a_log" | sed -E 's/^[^]]*\] //' | head -n 3 | tr '\n' '|')"

# --- B. CREATE EXTENSION again
base=$(jb_redis LLEN "$KEY")
jb_sql "CREATE EXTENSION jobbuf" >/dev/null
jb_sql "SELECT jobbuf_create_queue('lc', 'list', '{\"batch_size\": 500}')" >/dev/null
jb_sql "SELECT count(jobbuf_stage('lc', jsonb_build_object('n', g))) FROM generate_series(100001, 100100) g" >/dev/null
if jb_wait_until "[ \"\$(jb_redis LLEN $KEY)\" = $(( base + 100 )) ]" 10; then
  pass "B: delivery resumes after CREATE EXTENSION"
else
  fail "B: $(( $(jb_redis LLEN "$KEY") - base )) of 100 jobs delivered after CREATE EXTENSION"
fi
expect_eq "B: same drain worker" "$(worker_pid)" "$pid"

# --- C. ALTER EXTENSION UPDATE
update_out=$(jb_psql -qtAX -c "ALTER EXTENSION jobbuf UPDATE" 2>&1)
check "C: ALTER EXTENSION jobbuf UPDATE succeeds ($(tr '\n' ' ' <<<"$update_out" | sed -E 's/ +/ /g'))" [ $? -eq 0 ]
jb_sql "SELECT count(jobbuf_stage('lc', jsonb_build_object('n', g))) FROM generate_series(100101, 100110) g" >/dev/null
if jb_wait_until "[ \"\$(jb_redis LLEN $KEY)\" = $(( base + 110 )) ]" 10; then
  pass "C: delivery continues after ALTER EXTENSION UPDATE"
else
  fail "C: jobs not delivered after ALTER EXTENSION UPDATE"
fi
expect_eq "C: same drain worker" "$(worker_pid)" "$pid"
last_batch_ids=$(jb_redis --scan --pattern 'jobbuf:marker:*' | head -n 1 | xargs redis-cli -p "$JB_REDIS_PORT" GET)
say "C: the Redis marker now names ids: $last_batch_ids"

# --- D. reused ids after DROP + CREATE EXTENSION, then a restart before the first batch
jb_sql "DROP EXTENSION jobbuf" >/dev/null
jb_sql "CREATE EXTENSION jobbuf" >/dev/null
jb_sql "SELECT jobbuf_create_queue('lc', 'list', '{\"batch_size\": 500}')" >/dev/null
set_and_reload jobbuf.enabled off || fail "D: jobbuf.enabled = off was not reloaded"
base=$(jb_redis LLEN "$KEY")
jb_sql "SELECT count(jobbuf_stage('lc', jsonb_build_object('n', g))) FROM generate_series(200001, 200200) g" >/dev/null
sleep 0.5   # the disabled worker has its chance to misbehave
expect_eq "D: the disabled worker leaves the 200 jobs staged" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 200
say "D: new installation staged ids $(jb_sql "SELECT min(id) || '..' || max(id) FROM jobbuf.jobs") while the worker is disabled"
mark=$(log_mark)
jb_pg_ctl restart -m fast
set_and_reload jobbuf.enabled on || fail "D: jobbuf.enabled = on was not reloaded"
jb_wait_until '[ "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" = 0 ]' 15
sleep 0.5
delivered=$(( $(jb_redis LLEN "$KEY") - base ))
expect_eq "D: all 200 jobs of the new installation delivered after the restart" "$delivered" 200
removed=$(log_since "$mark" | grep -E 'already in Redis when the last batch was interrupted' | sed -E 's/.*jobbuf: //' || true)
[ -n "$removed" ] && say "D: the worker logged: $removed"
launcher=$(children_named "jobbuf launcher" | head -n 1)  # new after the restart

# --- E. DROP DATABASE of the worker's database
mark=$(log_mark)
t0=$(now_ms)
dropdb_out=$(PGOPTIONS="-c statement_timeout=30s" jb_psql_db postgres -qtAX -c "DROP DATABASE $JB_DB" 2>&1)
dropdb_rc=$?
if [ $dropdb_rc -eq 0 ]; then
  pass "E: plain DROP DATABASE $JB_DB succeeded in $(( $(now_ms) - t0 )) ms"
else
  fail "E: DROP DATABASE $JB_DB failed: $(tr '\n' ' ' <<<"$dropdb_out")"
fi
sleep 8
e_log=$(log_since "$mark")
expect_eq "E: no jobbuf worker exited with an error code (no crash loop)" "$(worker_exits "$mark")" 0
expect_le "E: at most one line about the missing database" "$(count_lines "jobbuf.*database \"$JB_DB\".*(does not exist|not exist)|FATAL: +database \"$JB_DB\" does not exist" "$e_log")" 1
expect_eq "E: the launcher survived (same pid)" "$(children_named 'jobbuf launcher' | head -n 1)" "$launcher"
expect_eq "E: no drain worker without its database" "$(children_named 'jobbuf drain worker' | wc -l)" 0
say "E: jobbuf log lines: $(grep -E 'jobbuf' <<<"$e_log" | sed -E 's/^[^]]*\] //' | tr '\n' '|')"

# --- F. the database comes back
jb_psql_db postgres -qtAX -c "CREATE DATABASE $JB_DB" >/dev/null
jb_sql "CREATE EXTENSION jobbuf" >/dev/null
jb_sql "SELECT jobbuf_create_queue('back', 'list')" >/dev/null
jb_sql "SELECT jobbuf_stage('back', '{\"n\": 1}')" >/dev/null
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:back)" = 1 ]' 30; then
  pass "F: after CREATE DATABASE + CREATE EXTENSION a worker delivers again"
else
  fail "F: nothing delivered 30 s after the database came back"
fi
faults_done
