#!/usr/bin/env bash
# A paused queue is skipped by the worker (staging continues); other queues keep flowing;
# jobbuf_resume wakes the worker and the held jobs are delivered in order.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '200ms'"
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('held', 'list');
SELECT jobbuf_create_queue('flowing', 'list');
SELECT jobbuf_pause('held');
SELECT jobbuf_stage('held', jsonb_build_object('n', n)) FROM generate_series(1, 20) n;
SELECT jobbuf_stage('flowing', jsonb_build_object('n', n)) FROM generate_series(1, 20) n;
SQL

jb_wait_until '[ "$(jb_redis LLEN jobbuf:flowing)" = 20 ]' 5
expect_eq "the other queue is delivered" "$(jb_redis LLEN jobbuf:flowing)" 20
sleep 1.5  # several poll intervals and wake-ups
jb_sql "SELECT jobbuf_stage('held', '{\"n\": 21}'::jsonb)" >/dev/null
jb_sql "SELECT jobbuf_stage('flowing', '{\"n\": 21}'::jsonb)" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN jobbuf:flowing)" = 21 ]' 5
sleep 0.5
expect_eq "paused queue: nothing in Redis" "$(jb_redis EXISTS jobbuf:held)" 0
expect_eq "paused queue: jobbuf_stats paused, ready" \
  "$(jb_sql "SELECT paused || ' ' || ready || ' ' || delivered_total FROM jobbuf_stats() WHERE queue = 'held'")" "true 21 0"
expect_eq "jobbuf.queues.paused" "$(jb_sql "SELECT paused FROM jobbuf.queues WHERE name = 'held'")" t

# Resume with a 30 s poll interval: only the resume's own wake-up can deliver promptly.
jb_psql -q -c "ALTER SYSTEM SET jobbuf.poll_interval = '30s'" -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
jb_sql "SELECT jobbuf_resume('held')" >/dev/null
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:held)" = 21 ]' 5; then
  pass "resumed queue delivered at once (poll_interval 30 s)"
else
  fail "resumed queue: $(jb_redis LLEN jobbuf:held) of 21 jobs in Redis 5 s after jobbuf_resume"
fi
expect_eq "held jobs arrive in order" \
  "$(jb_redis LRANGE jobbuf:held 0 -1 | ruby -rjson -ne 'print JSON.parse($_)["n"], " "')" "$(seq -s ' ' 1 21) "
expect_eq "resumed queue: jobbuf_stats" \
  "$(jb_sql "SELECT paused || ' ' || ready || ' ' || delivered_total FROM jobbuf_stats() WHERE queue = 'held'")" "false 0 21"

# Pausing again holds new jobs again.
jb_sql "SELECT jobbuf_pause('held')" >/dev/null
jb_sql "SELECT jobbuf_stage('held', '{\"n\": 22}'::jsonb)" >/dev/null
sleep 1
expect_eq "paused again: new job held" "$(jb_redis LLEN jobbuf:held) $(jb_sql "SELECT count(*) FROM jobbuf.jobs")" "21 1"

e2e_done
