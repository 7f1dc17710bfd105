#!/usr/bin/env bash
# Redis down while jobs are staged: nothing is lost, everything is delivered once Redis is back,
# and the server log carries exactly one WARNING for the outage and one LOG line for its end,
# however many jobs were committed and however many reconnects failed meanwhile.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '200ms'
jobbuf.redis_timeout = '500ms'"
jb_sql "SELECT jobbuf_create_queue('work', 'list')" >/dev/null
jb_sql "SELECT jobbuf_stage('work', '{\"n\": 0}'::jsonb)" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN jobbuf:work)" = 1 ]' 15
wait_delivered 1 || fail "the worker did not commit job 0"
expect_eq "before the outage: delivered, redis_connected" \
  "$(jb_redis LLEN jobbuf:work) $(jb_sql "SELECT redis_connected FROM jobbuf_worker_status()")" "1 t"

mark=$(log_mark)
stop_redis
say "redis-server stopped; staging 6 transactions of 50 jobs over ~6 s"
for t in 1 2 3 4 5 6; do
  jb_sql "SELECT count(jobbuf_stage('work', jsonb_build_object('n', n))) FROM generate_series($(( 50 * t - 49 )), $(( 50 * t ))) n" >/dev/null
  sleep 1
done
jb_wait_until "log_since $mark | grep -qE 'WARNING: +jobbuf:'" 15   # the worker tried, at least once
expect_eq "jobs stay staged while Redis is down" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 300
expect_eq "jobbuf_worker_status: redis_connected false, last_error set" \
  "$(jb_sql "SELECT redis_connected || ' ' || (last_error IS NOT NULL) FROM jobbuf_worker_status()")" "false true"
say "worker's last_error: $(jb_sql "SELECT last_error FROM jobbuf_worker_status()")"
outage_log=$(log_since "$mark")
warnings=$(grep -E 'WARNING: +jobbuf:' <<<"$outage_log")
expect_eq "one jobbuf WARNING during a ~6 s outage" "$(count_lines . "$warnings")" 1
say "the WARNING: $(head -n 1 <<<"$warnings" | sed 's/.*WARNING: *//')"

mark=$(log_mark)
jb_restart_redis
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:work)" = 300 ]' 15; then
  pass "all 300 staged jobs delivered after Redis came back"
else
  fail "$(jb_redis LLEN jobbuf:work) of 300 jobs in Redis 15 s after Redis came back"
fi
wait_staged 0 || fail "the worker did not commit the 300"   # it pushes first, then commits
sleep 0.5   # a duplicate would show up here
expect_eq "no duplicates, none lost (numbers 1..300 in order)" \
  "$(jb_redis LRANGE jobbuf:work 0 -1 | ruby -rjson -e 'puts STDIN.each_line.map { |l| JSON.parse(l)["n"] } == (1..300).to_a')" true
expect_eq "jobbuf.jobs empty" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0
expect_eq "redis_connected again" "$(jb_sql "SELECT redis_connected FROM jobbuf_worker_status()")" t
recovery_log=$(log_since "$mark")
expect_eq "one jobbuf LOG line on recovery" "$(count_lines 'LOG: +jobbuf: Redis .* accepts jobs again' "$recovery_log")" 1
expect_eq "no further jobbuf WARNING after recovery" "$(count_lines 'WARNING: +jobbuf:' "$recovery_log")" 0
expect_eq "delivered_total" "$(jb_sql "SELECT delivered_total FROM jobbuf_stats()")" 301
expect_eq "the worker never restarted" "$(count_lines 'jobbuf drain worker.*(exited|terminated)' "$(cat "$JB_RUN/postgres.log")")" 0

e2e_done
