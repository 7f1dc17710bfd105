#!/usr/bin/env bash
# A paused queue is skipped by the worker (staging continues); other queues keep flowing;
# jobbuf_resume wakes the worker and the held jobs are delivered in order.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '200ms'"
jb_psql -q -o /dev/null <<'SQL'
BEGIN;
SELECT jobbuf_create_queue('held', 'list');
SELECT jobbuf_pause('held');
COMMIT;
SELECT jobbuf_create_queue('flowing', 'list');
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

# A pause takes effect while the queue drains: the worker must not finish a backlog of a queue
# that was paused meanwhile (the pause is a stop button for a misbehaving consumer).
jb_psql -q -o /dev/null -c "ALTER SYSTEM SET jobbuf.batch_size = 20" -c "SELECT pg_reload_conf()"
jb_psql -q -o /dev/null <<'SQL'
SELECT jobbuf_create_queue('backlog', 'list');
SELECT count(jobbuf_stage('backlog', jsonb_build_object('n', n))) FROM generate_series(1, 50000) n;
SQL
jb_wait_until '[ "$(jb_redis LLEN jobbuf:backlog)" -gt 0 ]' 5
jb_sql "SELECT jobbuf_pause('backlog')" >/dev/null
at_pause=$(jb_redis LLEN jobbuf:backlog)
sleep 1.5
after=$(jb_redis LLEN jobbuf:backlog)
say "backlog: $at_pause of 50000 in Redis when jobbuf_pause committed, $after 1.5 s later"
expect_le "paused mid-drain: at most one more batch of 20 after the pause committed" "$(( after - at_pause ))" 20
expect_eq "paused mid-drain: the rest stays staged" "$(jb_sql "SELECT ready FROM jobbuf_stats() WHERE queue = 'backlog'")" "$(( 50000 - after ))"

# A pause is exact for later commits: a batch whose snapshot sees a job staged after
# jobbuf_pause returned also sees the pause, even when the worker read its queue list before the
# pause (mid-pass, busy with other queues' backlogs). 60 resume-pause-stage cycles: a resume may
# deliver the jobs of the cycles before, none may deliver its own cycle's job.
jb_psql -q -o /dev/null -c "SELECT jobbuf_create_queue(q, 'list') FROM unnest('{busy1,busy2,busy3,toggled}'::text[]) q" \
  -c "SELECT jobbuf_pause(q) FROM unnest('{busy1,busy2,busy3,toggled}'::text[]) q" \
  -c "SELECT count(jobbuf_stage(q, jsonb_build_object('n', n))) FROM unnest('{busy1,busy2,busy3}'::text[]) q, generate_series(1, 60000) n" \
  -c "SELECT jobbuf_resume(q) FROM unnest('{backlog,busy1,busy2,busy3}'::text[]) q"
early=0
for i in $(seq 1 60); do
  jb_psql -q -o /dev/null -c "SELECT jobbuf_resume('toggled')" -c "SELECT jobbuf_pause('toggled')" \
    -c "SELECT jobbuf_stage('toggled', jsonb_build_object('n', $i))"
  sleep 0.05
  jb_redis LRANGE jobbuf:toggled 0 -1 | grep -qx "{\"n\": $i}" && early=$((early + 1))
  [ "$i" = 10 ] && busy=$(jb_sql "SELECT bool_and(ready > 0) FROM jobbuf_stats() WHERE queue LIKE 'busy_'")
done
expect_eq "the worker was busy with three backlogs during the first 10 cycles" "$busy" t
expect_eq "no job staged after jobbuf_pause returned was delivered before the next resume (of 60)" "$early" 0
# (A resume lasts a millisecond here: the cycle before's job may or may not have gone in it.)
expect_eq "the last cycle's job stays staged" \
  "$(jb_sql "SELECT count(*) FROM jobbuf.jobs WHERE queue = 'toggled' AND payload->>'n' = '60'")" 1

e2e_done
