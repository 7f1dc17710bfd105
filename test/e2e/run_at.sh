#!/usr/bin/env bash
# run_at on a list queue: a job due in the future is held (jobbuf_stats counts it as scheduled)
# and delivered once due, by the poll_interval safety net; a job with run_at in the past, or
# NULL, goes at once; a later-staged immediate job overtakes the scheduled one.
source "$(dirname "$0")/tools/lib.sh"

e2e_start "jobbuf.poll_interval = '300ms'"
jb_sql "SELECT jobbuf_create_queue('later', 'list')" >/dev/null

jb_psql -q -o /dev/null <<'SQL'
BEGIN;
SELECT jobbuf_stage('later', '{"n": "future"}'::jsonb, run_at => clock_timestamp() + interval '3 seconds');
SELECT jobbuf_stage('later', '{"n": "past"}'::jsonb, run_at => now() - interval '1 hour');
SELECT jobbuf_stage('later', '{"n": "null"}'::jsonb, run_at => NULL);
INSERT INTO jobbuf.jobs (queue, payload, run_at) VALUES ('later', '{"n": "insert-future"}', clock_timestamp() + interval '3 seconds');
COMMIT;
SQL
staged=$(now_ms)
jb_wait_until '[ "$(jb_redis LLEN jobbuf:later)" -ge 2 ]' 5
sleep 1
expect_eq "1.x s later: only the due jobs are in Redis" \
  "$(jb_redis LRANGE jobbuf:later 0 -1 | tr '\n' ' ')" '{"n": "past"} {"n": "null"} '
expect_eq "jobbuf_stats: scheduled 2, ready 0" \
  "$(jb_sql "SELECT scheduled || ' ' || ready FROM jobbuf_stats() WHERE queue = 'later'")" "2 0"
jb_sql "SELECT jobbuf_stage('later', '{\"n\": \"after\"}'::jsonb)" >/dev/null
jb_wait_until '[ "$(jb_redis LLEN jobbuf:later)" -ge 3 ]' 5
expect_eq "an immediate job staged later overtakes the scheduled ones" "$(jb_redis LINDEX jobbuf:later 2)" '{"n": "after"}'
if jb_wait_until '[ "$(jb_redis LLEN jobbuf:later)" -ge 5 ]' 8; then
  elapsed=$(( $(now_ms) - staged ))
  pass "scheduled jobs delivered once due ($elapsed ms after staging, due after 3000 ms)"
  check "scheduled jobs not delivered before their run_at" [ "$elapsed" -ge 2900 ]
else
  fail "scheduled jobs not delivered within 8 s of their run_at"
fi
expect_eq "all five in Redis, scheduled ones last" \
  "$(jb_redis LRANGE jobbuf:later 3 -1 | sort | tr '\n' ' ')" '{"n": "future"} {"n": "insert-future"} '
expect_eq "jobbuf.jobs empty" "$(jb_sql "SELECT count(*) FROM jobbuf.jobs")" 0

e2e_done
