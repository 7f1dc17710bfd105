#!/usr/bin/env bash
# jobbuf_worker_status() and jobbuf_stats() report what the worker does: pid of the running
# drain worker, database, Redis connection, wake-up / batch / delivered counters; jobbuf.enabled
# = off idles the worker while staging continues. (not_preloaded.sh: the status without a worker.)
# The status is the truth when it is read: redis_connected turns false on an idle worker as soon
# as Redis goes away, and stays false while Redis refuses every command (NOAUTH: a password is
# required and none is configured, which the one WARNING says); last_error clears when the problem
# ends (last_error_at keeps when it was).
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '30s'
jobbuf.batch_size = 10"
jb_sql "SELECT jobbuf_create_queue('s', 'list')" >/dev/null
wait_redis_connected || fail "the worker did not connect to Redis once a queue existed"
status() { jb_sql "SELECT $1 FROM jobbuf_worker_status()"; }

expect_eq "running, database, redis_connected" "$(status "running || ' ' || database || ' ' || redis_connected")" "true $JB_DB true"
expect_eq "pid is the drain worker's backend" \
  "$(status pid)" "$(jb_sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'jobbuf drain worker'")"
read -r w0 b0 d0 <<<"$(status "wakeups || ' ' || batches || ' ' || delivered")"
expect_eq "nothing delivered yet" "$d0" 0

for i in 1 2 3; do
  worker_idle || fail "the worker did not go back to sleep before commit $i"   # else it may not count
  jb_sql "SELECT jobbuf_stage('s', jsonb_build_object('n', n)) FROM generate_series(1, 25) n" >/dev/null
  jb_wait_until '[ "$(jb_redis LLEN jobbuf:s)" = '$(( 25 * i ))' ]' 15
done
wait_delivered 75 || fail "the worker did not count 75 deliveries"
read -r w1 b1 d1 <<<"$(status "wakeups || ' ' || batches || ' ' || delivered")"
expect_eq "delivered counts the 75 jobs" "$d1" 75
check "batches count the deliveries (3 commits x 3 batches of <= 10: $b1 - $b0 >= 9)" [ $(( b1 - b0 )) -ge 9 ]
check "wakeups count the 3 commits ($w1 - $w0 >= 3)" [ $(( w1 - w0 )) -ge 3 ]
wait_census || fail "no census of the worker"
expect_eq "jobbuf_stats: delivered_total, failed_total, ready, last_delivery_at set" \
  "$(jb_sql "SELECT delivered_total || ' ' || failed_total || ' ' || ready || ' ' || (last_delivery_at IS NOT NULL) FROM jobbuf_stats()")" "75 0 0 true"

# jobbuf.enabled = off: the worker idles, staging continues; on: delivered.
set_and_reload jobbuf.enabled off || fail "jobbuf.enabled = off was not reloaded"
jb_sql "SELECT jobbuf_stage('s', '{\"n\": 100}'::jsonb)" >/dev/null
sleep 1   # a window for a delivery that should not happen
wait_census || fail "no census of the worker while jobbuf.enabled = off"
expect_eq "enabled = off: the job stays staged (and the census counts it)" "$(jb_redis LLEN jobbuf:s) $(jb_sql "SELECT ready FROM jobbuf_stats()")" "75 1"
expect_eq "enabled = off: the worker process stays" "$(status running)" t
jb_psql -q -o /dev/null -c "ALTER SYSTEM SET jobbuf.enabled = on" -c "SELECT pg_reload_conf()"
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:s)" = 76 ]' 15; then
  pass "enabled = on again: delivered without waiting for the 30 s poll"
else
  fail "enabled = on again: not delivered within 15 s (the poll is 30 s)"
fi

# An outage while the worker idles (the poll is 30 s: nothing else wakes it).
worker_idle || fail "the worker did not go back to sleep"
mark=$(log_mark)
stop_redis
if jb_wait_until '[ "$(status redis_connected)" = f ]' 15; then
  pass "Redis stopped: an idle worker's redis_connected turns false"
else
  fail "Redis stopped: redis_connected still says $(status redis_connected) on the idle worker"
fi
jb_restart_redis || fail "redis-server did not restart"
jb_sql "SELECT jobbuf_stage('s', '{\"n\": 101}'::jsonb)" >/dev/null
expect_list_reaches jobbuf:s 1 30 "Redis back (empty: it keeps no data): delivered"
check "Redis back: redis_connected" jb_wait_until '[ "$(status redis_connected)" = t ]' 15
expect_eq "Redis back: last_error cleared, last_error_at kept" \
  "$(status "coalesce(last_error, '(null)') || ' ' || (last_error_at IS NOT NULL)")" "(null) true"

# Redis requires a password and none is configured: every command is refused.
worker_idle || fail "the worker did not go back to sleep"
mark=$(log_mark)
jb_redis CONFIG SET requirepass status-secret >/dev/null
REDISCLI_AUTH=status-secret jb_redis CLIENT KILL TYPE normal SKIPME yes >/dev/null
if jb_wait_until '[ "$(status redis_connected)" = f ]' 15; then
  pass "NOAUTH: redis_connected is false"
else
  fail "NOAUTH: redis_connected still says $(status redis_connected)"
fi
check "NOAUTH: last_error says Redis requires a password" \
  jb_wait_until "status last_error | grep -q 'requires a password'" 15
say "last_error: $(status last_error)"
noauth_log=$(log_since "$mark")
expect_eq "NOAUTH: one WARNING says Redis requires a password" \
  "$(count_lines 'WARNING: +jobbuf: .*requires a password' "$noauth_log")" 1
expect_eq "NOAUTH: no WARNING about batches delivered twice" "$(count_lines 'delivered twice' "$noauth_log")" 0
REDISCLI_AUTH=status-secret jb_redis CONFIG SET requirepass "" >/dev/null
jb_sql "SELECT jobbuf_stage('s', '{\"n\": 102}'::jsonb)" >/dev/null
expect_list_reaches jobbuf:s 2 45 "the password requirement lifted: delivered"
check "the password requirement lifted: redis_connected" jb_wait_until '[ "$(status redis_connected)" = t ]' 15
expect_eq "the password requirement lifted: last_error cleared" "$(status "coalesce(last_error, '(null)')")" "(null)"

e2e_done
