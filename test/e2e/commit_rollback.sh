#!/usr/bin/env bash
# The core promise: jobs staged in committed transactions reach Redis within seconds of the
# commit (the commit wakes the worker: poll_interval is 30 s here, so polling cannot explain it),
# exactly once; jobs of rolled-back transactions never do.
# 200 transactions of 5 jobs each, every tenth rolled back: exactly 900 jobs, numbered 1..1000
# minus the rolled-back ones, no duplicates, and jobbuf.jobs empty afterwards.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '30s'"
jb_sql "SELECT jobbuf_create_queue('orders', 'list')" >/dev/null

# Let the worker finish the round it runs at start-up (and the one the queue creation woke: it
# connects to Redis then), so that from here on only commits can wake it within the 30 s poll.
wait_redis_connected || fail "the worker did not connect to Redis once a queue existed"
worker_idle || fail "the worker did not go back to sleep"
wakeups_before=$(jb_sql "SELECT wakeups FROM jobbuf_worker_status()")

# Job number n = 5 * (t - 1) + k for transaction t = 1..200, job k = 1..5.
{
  for t in $(seq 1 200); do
    echo "BEGIN;"
    for k in 1 2 3 4 5; do
      echo "SELECT jobbuf_stage('orders', jsonb_build_object('n', $(( 5 * (t - 1) + k )), 'tx', $t));"
    done
    if (( t % 10 == 0 )); then echo "ROLLBACK;"; else echo "COMMIT;"; fi
  done
} >"$JB_RUN/stage.sql"
expected_numbers=$(for t in $(seq 1 200); do
  (( t % 10 == 0 )) && continue
  for k in 1 2 3 4 5; do echo $(( 5 * (t - 1) + k )); done
done)

start=$(now_ms)
jb_psql -q -o /dev/null -f "$JB_RUN/stage.sql"
staged_at=$(now_ms)
say "staged 200 transactions (20 rolled back) in $(( staged_at - start )) ms"

if jb_wait_until '[ "$(jb_redis LLEN jobbuf:orders)" -ge 900 ]' 15; then
  pass "900 jobs in Redis $(( $(now_ms) - staged_at )) ms after the last commit (poll_interval is 30 s)"
else
  fail "only $(jb_redis LLEN jobbuf:orders) of 900 jobs in Redis 15 s after the last commit"
fi
wait_delivered 900 || fail "the worker did not count 900 deliveries"   # it pushes first, then commits
sleep 0.5  # anything extra (a duplicate) would show up by now

expect_eq "list length" "$(jb_redis LLEN jobbuf:orders)" 900
arrived=$(jb_redis LRANGE jobbuf:orders 0 -1 | ruby -rjson -ne 'puts JSON.parse($_)["n"]')
expect_eq "no job delivered twice" "$(sort -n <<<"$arrived" | uniq -d | wc -l)" 0
expect_eq "exactly the committed jobs arrived (numbers compared)" \
  "$(sort -n <<<"$arrived")" "$(sort -n <<<"$expected_numbers")"
rolled_back_seen=$(jb_redis LRANGE jobbuf:orders 0 -1 | ruby -rjson -ne 'puts 1 if JSON.parse($_)["tx"] % 10 == 0' | wc -l)
expect_eq "jobs of rolled-back transactions in Redis" "$rolled_back_seen" 0
expect_eq "jobs arrived in id (= staging) order" "$arrived" "$(sort -n <<<"$arrived")"
expect_eq "payload is the jsonb text as stored" "$(jb_redis LINDEX jobbuf:orders 0)" '{"n": 1, "tx": 1}'

expect_eq "jobbuf.jobs empty afterwards" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0
wait_census || fail "no census of the worker"
expect_eq "jobbuf_stats: ready, delivered_total, failed_total" \
  "$(jb_sql "SELECT ready || ' ' || delivered_total || ' ' || failed_total FROM jobbuf_stats() WHERE queue = 'orders'")" "0 900 0"
expect_eq "jobbuf_worker_status: running, redis_connected, delivered" \
  "$(jb_sql "SELECT running || ' ' || redis_connected || ' ' || delivered FROM jobbuf_worker_status()")" "true true 900"
wakeups_after=$(jb_sql "SELECT wakeups FROM jobbuf_worker_status()")
check "commits woke the worker (wakeups $wakeups_before -> $wakeups_after)" [ "$wakeups_after" -gt "$wakeups_before" ]
expect_eq "nothing dead-lettered" "$(jb_sql "SELECT count(*) FROM jobbuf.dead")" 0

e2e_done
