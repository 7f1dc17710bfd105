#!/usr/bin/env bash
# run_at on a list queue: a job due in the future is held (jobbuf_stats counts it as scheduled)
# and delivered once due, by the poll_interval safety net; a job with run_at in the past, or
# NULL, goes at once; a later-staged immediate job overtakes the scheduled one. The scheduled
# jobs are staged an hour ahead and brought forward by an UPDATE (which wakes nobody) once the
# test has looked at them: nothing depends on how fast the checks run.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '300ms'"
jb_sql "SELECT jobbuf_create_queue('later', 'list')" >/dev/null

jb_psql -q -o /dev/null <<'SQL'
BEGIN;
SELECT jobbuf_stage('later', '{"n": "future"}'::jsonb, run_at => clock_timestamp() + interval '1 hour');
SELECT jobbuf_stage('later', '{"n": "past"}'::jsonb, run_at => now() - interval '1 hour');
SELECT jobbuf_stage('later', '{"n": "null"}'::jsonb, run_at => NULL);
INSERT INTO jobbuf.jobs (queue, payload, run_at) VALUES ('later', '{"n": "insert-future"}', clock_timestamp() + interval '1 hour');
COMMIT;
SQL
jb_wait_until '[ "$(jb_redis LLEN jobbuf:later)" -ge 2 ]' 15
wait_staged 2 || fail "the worker did not commit the due jobs"
sleep 1   # a few polls (300 ms) that must not deliver the scheduled jobs
expect_eq "only the due jobs are in Redis" \
  "$(jb_redis LRANGE jobbuf:later 0 -1 | tr '\n' ' ')" '{"n": "past"} {"n": "null"} '
wait_census || fail "no census of the worker"
expect_eq "jobbuf_stats: scheduled 2, ready 0" \
  "$(jb_sql "SELECT scheduled || ' ' || ready FROM jobbuf_stats() WHERE queue = 'later'")" "2 0"
jb_sql "SELECT jobbuf_stage('later', '{\"n\": \"after\"}'::jsonb)" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN jobbuf:later)" -ge 3 ]' 15
expect_eq "an immediate job staged later overtakes the scheduled ones" "$(jb_redis LINDEX jobbuf:later 2)" '{"n": "after"}'
wait_staged 2 || fail "the worker did not commit the immediate job"
due=$(jb_sql "WITH u AS (UPDATE jobbuf.jobs SET run_at = now() + interval '1 second' WHERE queue = 'later' RETURNING run_at)
              SELECT max(run_at) FROM u")
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:later)" -ge 5 ]' 15; then
  pass "scheduled jobs delivered once due (1 s after the UPDATE that brought them forward)"
  wait_staged 0 || fail "the worker did not commit the scheduled jobs"
  # The worker takes jobs with run_at <= now() and records now() as last_delivery_at, both its
  # transaction's start.
  expect_eq "scheduled jobs not delivered before their run_at ($due)" \
    "$(jb_sql "SELECT last_delivery_at >= '$due'::timestamptz FROM jobbuf_stats() WHERE queue = 'later'")" t
else
  fail "scheduled jobs not delivered within 15 s of the UPDATE (due after 1 s, poll 300 ms)"
fi
expect_eq "all five in Redis, scheduled ones last" \
  "$(jb_redis LRANGE jobbuf:later 3 -1 | sort | tr '\n' ' ')" '{"n": "future"} {"n": "insert-future"} '
expect_eq "jobbuf.jobs empty" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0

# A row that holds 'infinity' (staging refuses it, but a restore or an INSERT with triggers off can
# still put one there): a target that keeps run_at itself schedules it at the latest time the
# worker carries (9999-12-31), never now; the time once overflowed and the job ran at once.
jb_sql "SELECT jobbuf_create_queue('forever', 'sidekiq')" >/dev/null
jb_psql -q -c "SET session_replication_role = replica" \
  -c "INSERT INTO jobbuf.jobs (queue, payload, run_at) VALUES ('forever', '{\"class\": \"F\", \"args\": []}', 'infinity')"
check "a job whose run_at is infinity goes to Sidekiq's schedule" jb_wait_until '[ "$(jb_redis ZCARD schedule)" = 1 ]' 10
expect_eq "scheduled at 9999-12-31T23:59:59Z, not pushed to its queue" \
  "$(jb_redis ZRANGE schedule 0 -1 WITHSCORES | tail -n 1) $(jb_redis LLEN queue:forever)" "253402300799 0"

e2e_done
