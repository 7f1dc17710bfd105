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

e2e_done
