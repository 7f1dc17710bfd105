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
jb_wait_until '[ "$(jb_redis LLEN jobbuf:h)" = 1 ]' 15
expect_eq "delivering to the first Redis" "$(jb_redis LLEN jobbuf:h)" 1
wait_delivered 1 || fail "the worker did not commit the first job"

kill -STOP "$JB_REDIS_PID"
jb_sql "SELECT jobbuf_stage('h', jsonb_build_object('n', n)) FROM generate_series(1, 10) n" >/dev/null
check "the worker waits on the frozen Redis, in a batch" in_batch

t0=$(now_ms)
set_and_reload jobbuf.redis_url "redis://127.0.0.1:$EXTRA_REDIS_PORT/0" || fail "the new jobbuf.redis_url was not reloaded"
jb_sql "SELECT jobbuf_stage('h', jsonb_build_object('n', n)) FROM generate_series(11, 20) n" >/dev/null
if jb_wait_until '[ "$(redis-cli -p "$EXTRA_REDIS_PORT" LLEN jobbuf:h)" -ge 20 ]' 10; then
  pass "after SIGHUP the stuck and the new jobs reach the second Redis ($(( $(now_ms) - t0 )) ms; redis_timeout is 60 s)"
else
  fail "after SIGHUP: $(redis-cli -p "$EXTRA_REDIS_PORT" LLEN jobbuf:h) of 20 jobs in the second Redis within 10 s"
fi
expect_eq "jobs 1..20 in the second Redis, in order" \
  "$(redis-cli -p "$EXTRA_REDIS_PORT" LRANGE jobbuf:h 0 -1 | ruby -rjson -ne 'print JSON.parse($_)["n"], " "' 2>/dev/null)" "$(seq -s ' ' 1 20) "
wait_staged 0
expect_eq "jobbuf.jobs empty" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0

# Postmaster death while the worker waits on a hung Redis.
reset_and_reload jobbuf.redis_url "redis://127.0.0.1:$JB_REDIS_PORT/0" || fail "the reset of jobbuf.redis_url was not reloaded"
jb_sql "SELECT jobbuf_stage('h', '{\"n\": 21}'::jsonb)" >/dev/null
worker=$(jb_sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'jobbuf drain worker'")
# It waits either in a batch or in its reconnect (the reset closed the connection it had).
if jb_wait_until '[[ "$(worker_activity)" =~ ^active\|jobbuf:\ (delivering\ a\ batch|connecting\ to\ Redis)\| ]]' 15; then
  pass "the worker waits on the frozen Redis again"
else
  fail "the worker does not wait on the frozen Redis: $(worker_activity)"
fi
expect_eq "job 21 went nowhere else" "$(redis-cli -p "$EXTRA_REDIS_PORT" LLEN jobbuf:h)" 20
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
