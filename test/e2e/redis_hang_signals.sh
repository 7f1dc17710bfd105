#!/usr/bin/env bash
# A hung Redis (SIGSTOP, redis_timeout 60 s) must not make the worker deaf:
#  - SIGHUP: a reload that points jobbuf.redis_url at another Redis takes effect within seconds,
#    and the jobs that were stuck, plus new ones, are delivered there;
#  - postmaster death: kill -9 of the postmaster makes the drain worker exit within seconds.
# (SIGTERM while Redis hangs: shutdown.sh.)
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.redis_timeout = '60s'"
start_extra_redis || { fail "second redis-server did not start"; e2e_done; }
jb_sql "SELECT jobbuf_create_queue('h', 'list')" >/dev/null
jb_sql "SELECT jobbuf_stage('h', '{\"n\": 0}'::jsonb)" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN jobbuf:h)" = 1 ]' 5
expect_eq "delivering to the first Redis" "$(jb_redis LLEN jobbuf:h)" 1

kill -STOP "$JB_REDIS_PID"
jb_sql "SELECT jobbuf_stage('h', jsonb_build_object('n', n)) FROM generate_series(1, 10) n" >/dev/null
sleep 1
expect_eq "the worker waits on the frozen Redis" \
  "$(jb_sql "SELECT query FROM pg_stat_activity WHERE backend_type = 'jobbuf drain worker'")" "jobbuf: delivering a batch"

t0=$(now_ms)
jb_psql -q -o /dev/null -c "ALTER SYSTEM SET jobbuf.redis_url = 'redis://127.0.0.1:$EXTRA_REDIS_PORT/0'" -c "SELECT pg_reload_conf()"
jb_sql "SELECT jobbuf_stage('h', jsonb_build_object('n', n)) FROM generate_series(11, 20) n" >/dev/null
if jb_wait_until '[ "$(redis-cli -p "$EXTRA_REDIS_PORT" LLEN jobbuf:h)" -ge 20 ]' 10; then
  pass "after SIGHUP the stuck and the new jobs reach the second Redis ($(( $(now_ms) - t0 )) ms; redis_timeout is 60 s)"
else
  fail "after SIGHUP: $(redis-cli -p "$EXTRA_REDIS_PORT" LLEN jobbuf:h) of 20 jobs in the second Redis within 10 s"
fi
expect_eq "jobs 1..20 in the second Redis, in order" \
  "$(redis-cli -p "$EXTRA_REDIS_PORT" LRANGE jobbuf:h 0 -1 | ruby -rjson -ne 'print JSON.parse($_)["n"], " "' 2>/dev/null)" "$(seq -s ' ' 1 20) "
expect_eq "jobbuf.jobs empty" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0

# Postmaster death while the worker waits on a hung Redis.
jb_psql -q -o /dev/null -c "ALTER SYSTEM RESET jobbuf.redis_url" -c "SELECT pg_reload_conf()"
sleep 0.5
jb_sql "SELECT jobbuf_stage('h', '{\"n\": 21}'::jsonb)" >/dev/null
sleep 1
worker=$(jb_sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'jobbuf drain worker'")
# It waits either in a batch or in its reconnect (the reset closed the connection it had).
expect_eq "the worker waits on the frozen Redis again" \
  "$(jb_sql "SELECT query IN ('jobbuf: delivering a batch', 'jobbuf: connecting to Redis') FROM pg_stat_activity WHERE pid = $worker")" "t"
postmaster=$(head -n 1 "$JB_PGDATA/postmaster.pid")
kill -9 "$postmaster"
t0=$(now_ms)
if jb_wait_until '! kill -0 '"$worker"' 2>/dev/null' 10; then
  pass "after kill -9 of the postmaster the drain worker exits ($(( $(now_ms) - t0 )) ms)"
else
  fail "the drain worker (pid $worker) still runs 10 s after the postmaster died"
  kill -9 "$worker" 2>/dev/null
fi
jb_wait_until '[ -z "$(pgrep -f -- "-D $JB_PGDATA")" ] && [ -z "$(ps -o pid= --ppid "$postmaster" 2>/dev/null)" ]' 10
rm -f "$JB_PGDATA/postmaster.pid"

e2e_done
